// Package ui is the operator's page: one HTML page, its script and its
// style sheet, built into the binary (no CDN, no build step). The page
// holds no data; it reads the daemon's own routes (/v1/coverage,
// /v1/subscribers, /v1/claimcheck/stats) with the token the operator typed
// in, and a stream's events and notices over the websocket API, so it is
// also that API's reference client.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// csp keeps the page to its own origin: no inline script, no third party.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Register mounts the page on mux: GET / and GET /ui/ answer the page
// (the query, such as ?stream=, is the page's to read), GET /ui/<file>
// its assets. The page and its assets are public: they hold nothing of
// the daemon's; every route they read checks the token as it always does.
func Register(mux *http.ServeMux) {
	sub, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(sub)
	page := func(w http.ResponseWriter, r *http.Request) {
		header(w)
		http.ServeFileFS(w, r, sub, "index.html")
	}
	mux.HandleFunc("GET /{$}", page)
	mux.HandleFunc("GET /ui/{$}", page)
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "index.html" {
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
			return
		}
		header(w)
		files.ServeHTTP(w, r)
	})))
}

func header(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}
