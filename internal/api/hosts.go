package api

import (
	"net"
	"strings"
)

// Hosts is the set of Host names a daemon without tokens answers, against
// DNS rebinding: a page on an attacker's name that the attacker's DNS then
// points at 127.0.0.1 reaches the daemon with that name as Host (and as a
// websocket's Origin). Only names that cannot be rebound are accepted:
// "localhost", loopback addresses, the listen address's host and, when it
// listens on every address (0.0.0.0, ::), any IP address, since a page can
// only be served from an IP literal by whoever holds that IP. A nil *Hosts
// accepts every Host.
type Hosts struct {
	listen string // the listen address's host, lower-case; "" for every address
}

// NewHosts returns the Hosts of a daemon listening on listen (host:port).
func NewHosts(listen string) *Hosts {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	return &Hosts{listen: host}
}

// Allows reports whether hostport (a Host header, or the host of an
// Origin, with or without a port) is one the daemon answers.
func (h *Hosts) Allows(hostport string) bool {
	if h == nil {
		return true
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return false
	}
	if host == "localhost" || host == h.listen {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || h.listen == "")
}
