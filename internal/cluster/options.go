package cluster

import (
	"errors"
	"fmt"
	"strings"
)

// Options is how a node reaches the bus and what it is there: the
// daemon maps the configuration's cluster: section to it. Its secrets
// (Password, Token, EdgeToken, the creds file) are never logged.
type Options struct {
	// Role is "all" (or ""), RoleIngest or RoleEdge.
	Role string
	// NATSURL is the NATS servers, comma-separated (each nats:// or
	// tls://, host:port): Connect dials one and fails over to the others
	// and to those the cluster announces.
	NATSURL string
	// SubjectPrefix starts every subject the node uses.
	SubjectPrefix string
	// Node names this node on the bus (client name, heartbeats).
	Node string
	// EmbeddedNATS: an ingest runs the NATS server (StartServer) in its
	// own process, listening on NATSURL's address.
	EmbeddedNATS bool
	// NATSDir is where the embedded server's JetStream stores, and where
	// EmbeddedCredentials keeps the secrets it generates.
	NATSDir string
	// Credentials: at most one of user+password, token, creds file.
	User, Password, Token, Creds string
	// EdgeToken is the secret edges log in to the embedded server with.
	EdgeToken string
	// KVReplicas is how many copies JetStream keeps of the lease and
	// names buckets, 1 to 5; 0 is 3 where the cluster can place three,
	// else 1.
	KVReplicas int
	// TLS: a CA to verify the server, and a client certificate and key.
	TLSCA, TLSCert, TLSKey string
}

// URLs returns the servers of NATSURL, each trimmed of spaces, empty ones
// left out.
func (o Options) URLs() []string {
	var out []string
	for _, u := range strings.Split(o.NATSURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Validate reports the first option the node cannot run with: a role other
// than all, ingest or edge, no server, credentials of two kinds, a client
// certificate without its key (or the reverse), KVReplicas past 5, or an
// embedded server on a node that is not an ingest. The configuration
// checks the same of its cluster: section, naming the keys; Validate holds
// for any caller.
func (o Options) Validate() error {
	switch o.Role {
	case "", "all", RoleIngest, RoleEdge:
	default:
		return fmt.Errorf("cluster: role %q is not all, ingest or edge", o.Role)
	}
	n := 0
	for _, set := range []bool{o.User != "" || o.Password != "", o.Token != "", o.Creds != ""} {
		if set {
			n++
		}
	}
	switch {
	case len(o.URLs()) == 0 && (o.Role == RoleIngest || o.Role == RoleEdge):
		return errors.New("cluster: no NATS server (NATSURL is empty)")
	case (o.User == "") != (o.Password == ""):
		return errors.New("cluster: User and Password go together")
	case n > 1:
		return errors.New("cluster: set one of User+Password, Token or Creds, not several")
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return errors.New("cluster: TLSCert and TLSKey go together")
	case o.KVReplicas < 0 || o.KVReplicas > 5:
		return fmt.Errorf("cluster: KVReplicas %d is not from 0 (auto) to 5", o.KVReplicas)
	case o.EmbeddedNATS && o.Role != RoleIngest:
		return fmt.Errorf("cluster: only an ingest runs the embedded NATS server (role %s)", o.Role)
	}
	return nil
}
