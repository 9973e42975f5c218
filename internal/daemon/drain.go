package daemon

import (
	"net"
	"net/http"

	"github.com/fanoutd/fanoutd/internal/api"
)

// drainz is POST /drainz, the first step of stopping a node that others
// stand in for (a Kubernetes preStop hook runs `fanoutd drain`): from now
// on /readyz answers 503 {"ready":false,"draining":true}, so a load
// balancer sends no new client here, and a new websocket is refused 503
// shutting_down, so a reconnecting client lands on another edge. The
// connections already open are served until the process is stopped
// (SIGTERM): they then get the shutdown notice and close 1001, and a named
// subscriber's record is released for another edge to adopt. Only a
// loopback peer may drain (a client on the port must not take the node
// out of service); draining again is a no-op.
func (d *Daemon) drainz(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		api.WriteError(w, http.StatusForbidden, api.CodeHostNotAllowed, "POST /drainz is answered only to a loopback peer")
		return
	}
	if !d.draining.Swap(true) {
		d.log.Info("draining: /readyz answers 503, new websockets are refused; stop the process to close the open ones")
	}
	writeJSON(w, http.StatusOK, map[string]any{"draining": true, "connections": d.ws.Sessions()})
}

// refuseWhileDraining answers a websocket upgrade 503 shutting_down while
// the node drains.
func (d *Daemon) refuseWhileDraining(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() {
			w.Header().Set("Retry-After", "1")
			api.WriteError(w, http.StatusServiceUnavailable, api.CodeShuttingDown, "this node is draining: connect to another")
			return
		}
		h.ServeHTTP(w, r)
	})
}
