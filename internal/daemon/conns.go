package daemon

import (
	"context"
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/internal/api"
)

// connGuard caps the keep-alive connections that sit idle without ever
// having presented a valid token (http.max_anonymous_connections): past
// the cap such a connection is closed as soon as it goes idle, so idle
// sockets cannot pile up between the idle timeouts. A connection that
// presented a valid token, and every websocket (hijacked), is not counted.
type connGuard struct {
	max    int // 0: no cap
	closed prometheus.Counter

	mu      sync.Mutex            // protects the maps
	vouched map[net.Conn]bool     // connections that presented a valid token
	idle    map[net.Conn]struct{} // idle connections not vouched for
}

type connKey struct{}

func newConnGuard(max int, reg prometheus.Registerer) *connGuard {
	g := &connGuard{max: max, vouched: map[net.Conn]bool{}, idle: map[net.Conn]struct{}{},
		closed: prometheus.NewCounter(prometheus.CounterOpts{Name: "fanoutd_http_anonymous_closed_total",
			Help: "Idle HTTP connections without a valid token closed at http.max_anonymous_connections."})}
	reg.MustRegister(g.closed)
	return g
}

// connContext makes the connection reachable from its requests.
func (g *connGuard) connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

func (g *connGuard) connState(c net.Conn, st http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch st {
	case http.StateIdle:
		if g.vouched[c] {
			return
		}
		if g.max > 0 && len(g.idle) >= g.max {
			g.closed.Inc()
			c.Close() // net/http then reports StateClosed
			return
		}
		g.idle[c] = struct{}{}
	case http.StateActive:
		delete(g.idle, c)
	case http.StateClosed, http.StateHijacked:
		delete(g.idle, c)
		delete(g.vouched, c)
	}
}

// vouching marks the connection of every request that presents a valid
// token; the routes then authenticate as before.
func (g *connGuard) vouching(auth *api.Auth, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.Enabled() {
			if tok, ok := auth.Authenticate(r); ok && tok != nil {
				if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
					g.mu.Lock()
					g.vouched[c] = true
					g.mu.Unlock()
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}
