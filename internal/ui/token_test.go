package ui_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

const secret = "s3cret-for-the-page"

// tokenDaemon runs a daemon with one token and a test venue that has
// published a few trades.
func tokenDaemon(t *testing.T) *daemontest.Running {
	t.Helper()
	var src *testsource.Source
	v := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) { src = testsource.New("coinbase", c); return src, nil }}
	d := daemontest.Start(t, "tokens:\n  - name: desk\n    token: "+secret+"\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n",
		daemon.Options{Venues: []venues.Venue{v}})
	for i := range 3 {
		src.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: strconv.Itoa(i),
			Price: decimal.New(50000, 0), Size: decimal.New(1, -2), Side: venue.SideBuy, RecvTime: time.Now()})
	}
	return d
}

// TestPageIsPublicItsDataIsNot: with tokens configured, the page and its
// two assets answer without a token and hold nothing of the daemon's (no
// venue, no token), as do the probes and /metrics; nothing else is public;
// every data route answers 401 without a token and its data with one; the
// page's files have their own CSP.
func TestPageIsPublicItsDataIsNot(t *testing.T) {
	d := tokenDaemon(t)
	base := d.URL("http")
	get := func(path, token string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, f := range []struct{ path, ctype string }{
		{"/", "text/html"}, {"/ui/", "text/html"}, {"/?stream=coinbase:level2:BTC-USD", "text/html"},
		{"/ui/app.js", "text/javascript"}, {"/ui/app.css", "text/css"},
	} {
		code, h, body := get(f.path, "")
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), f.ctype) {
			t.Errorf("GET %s without a token: %d %s, want 200 %s", f.path, code, h.Get("Content-Type"), f.ctype)
		}
		if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s: no Content-Security-Policy of its own", f.path)
		}
		if strings.Contains(body, "coinbase") || strings.Contains(body, secret) || strings.Contains(body, "desk") {
			t.Errorf("GET %s: the public file holds something of the daemon's", f.path)
		}
	}
	// The probes and the metrics are public too (docs/operations.md, HTTP routes).
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _, _ := get(p, ""); code == http.StatusUnauthorized {
			t.Errorf("GET %s without a token: 401, want it public", p)
		}
	}
	for _, p := range []string{"/ui/nosuchfile", "/nosuchpage"} {
		if code, _, _ := get(p, ""); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404 (only the page and its assets are public)", p, code)
		}
	}
	for _, p := range []string{"/v1/coverage", "/v1/subscribers", "/v1/books/coinbase/BTC-USD", "/v1/claimcheck/stats",
		"/v1/snapshots/coinbase/BTC-USD", "/v1/snapshots/coinbase/BTC-USD/latest", "/v1/claims/default/" + claimcheck.ClaimID{Day: 20000, Count: 1}.String()} {
		code, h, _ := get(p, "")
		if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without a token: %d, want 401 with WWW-Authenticate", p, code)
		}
		if code, _, _ := get(p, "wrong"); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", p, code)
		}
	}
	for _, p := range []string{"/v1/coverage", "/v1/subscribers", "/v1/books/coinbase/BTC-USD", "/v1/claimcheck/stats"} {
		if code, _, body := get(p, secret); code == http.StatusUnauthorized || code == http.StatusForbidden {
			t.Errorf("GET %s with the token: %d %s", p, code, body)
		}
	}
	ws := d.URL("ws") + "/v1/stream"
	if c, resp, err := websocket.DefaultDialer.Dial(ws, nil); err == nil {
		c.Close()
		t.Error("/v1/stream opened without a token")
	} else if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/v1/stream without a token: %v, want 401", err)
	}
	c, _, err := websocket.DefaultDialer.Dial(ws+"?token="+secret, nil)
	if err != nil {
		t.Fatalf("/v1/stream with ?token=: %v", err)
	}
	c.Close()
}

// TestPageAsksForAToken: against a daemon with tokens, the page says it
// needs one and puts the focus on the token field; a wrong one typed in is
// refused; the right one, typed and entered from the keyboard, fills the
// page, stays in the tab's session storage and never in its URL. In
// Chromium and in Firefox.
func TestPageAsksForAToken(t *testing.T) { eachBrowser(t, testAsksForAToken) }

func testAsksForAToken(t *testing.T, pg page) {
	d := tokenDaemon(t)
	pg.navigate(t, d.URL("http")+"/?stream=coinbase:trades:BTC-USD")
	var st struct {
		Status, Focus, Stored, URL, WS string
		Venues, Trades                 int
	}
	state := func() {
		pg.eval(t, `({Status: document.querySelector('#status').textContent, Focus: document.activeElement.id,
			Stored: sessionStorage.getItem('fanoutd.token') || '', URL: location.href, WS: document.querySelector('#ws-state').textContent,
			Venues: document.querySelectorAll('#venue-table tbody tr').length, Trades: document.querySelectorAll('#trades tbody tr').length})`, &st)
	}
	waitFor(t, 10*time.Second, "the page never asked for a token with the focus on its field", func() bool {
		state()
		return strings.Contains(st.Status, "needs a token") && st.Focus == "token-input"
	})
	if st.Venues != 0 {
		t.Fatalf("without a token the page shows %d venues", st.Venues)
	}
	pg.keys(t, "wrong\r")
	waitFor(t, 10*time.Second, "a wrong token was not refused", func() bool { state(); return strings.Contains(st.Status, "refused") })
	pg.eval(t, `document.querySelector('#token-input').focus() ?? null`, new(any))
	pg.keys(t, secret+"\r")
	waitFor(t, 10*time.Second, "the page never filled with the token", func() bool {
		state()
		return st.Venues == 1 && strings.HasPrefix(st.WS, "connected")
	})
	if st.Stored != secret || strings.Contains(st.URL, secret) {
		t.Fatalf("the token: kept %q in session storage (want it), URL %s (want it absent)", st.Stored, st.URL)
	}
	pg.screenshot(t, "token-accepted")
}
