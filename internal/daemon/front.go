package daemon

import (
	"net/http"
	"net/url"

	"github.com/fanoutd/fanoutd/internal/api"
)

// front is what every request meets before its route: X-Content-Type-Options
// nosniff on every answer; without tokens, a Host other than a loopback name
// or the listen address refused (api.Hosts, against DNS rebinding); a query
// that does not parse as a whole (url.ParseQuery: a bad escape, a ';', more
// than Go's 10,000 parameters) refused rather than silently cut; and the
// mux's own 404 and 405 given the one JSON error body. /v1/stream does its
// own host and query checks (wsapi.Server), to count them in its refusals.
func (d *Daemon) front(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path != "/v1/stream" {
			if !d.hosts.Allows(r.Host) {
				api.WriteError(w, http.StatusForbidden, api.CodeHostNotAllowed, "without tokens only a loopback name or the listen address is answered as Host")
				return
			}
			if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
				api.WriteError(w, http.StatusBadRequest, api.CodeInvalidQuery, "query: "+err.Error())
				return
			}
		}
		if _, pattern := mux.Handler(r); pattern == "" {
			// No route: every route is GET, so a path a GET would reach
			// is a method not allowed.
			g := r.Clone(r.Context())
			g.Method = http.MethodGet
			if _, p := mux.Handler(g); p != "" {
				w.Header().Set("Allow", "GET, HEAD")
				api.WriteError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, r.Method+" is not allowed here: the routes answer GET and HEAD")
				return
			}
			api.WriteError(w, http.StatusNotFound, api.CodeNotFound, "no such route")
			return
		}
		mux.ServeHTTP(w, r)
	})
}
