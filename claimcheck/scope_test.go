package claimcheck_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/venue"
)

// scopedTokens are the tokens a request picks with its X-Token header; no
// header is an unrestricted token.
var scopedTokens = map[string]*api.Token{
	"kraken":        {Name: "kraken", Streams: []string{"kraken:*"}},
	"kraken-level2": {Name: "kraken-level2", Streams: []string{"kraken:level2:*"}},
	"kraken-venue":  {Name: "kraken-venue", Venues: []string{"kraken"}},
}

// authorizeStream is the daemon's check, as docs/claim-check.md shows it.
func authorizeStream(r *http.Request, stream string) (int, bool) {
	if !scopedTokens[r.Header.Get("X-Token")].Allows(venue.Stream(stream)) {
		return http.StatusForbidden, false
	}
	return http.StatusOK, true
}

// TestGatewayStreamScopes: a pack mixes streams and claim ids are
// enumerable, so the gateway must check each claim's stream, not only its
// tenant.
func TestGatewayStreamScopes(t *testing.T) {
	ds, err := claimcheck.NewDirStore("dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pcs := []claimcheck.PackClaim{
		{Stream: "coinbase:level2:BTC-USD", Time: t0, Data: []byte("coinbase book")},
		{Stream: "kraken:level2:XBT/USD", Time: t0, Data: []byte("kraken book")},
		{Kind: claimcheck.KindCapture, Stream: "kraken", Time: t0, Data: []byte("kraken capture")},
		{Kind: claimcheck.KindCapture, Stream: "coinbase", Time: t0, Data: []byte("coinbase capture")},
		{Kind: claimcheck.KindCapture, Time: t0, Data: []byte("no stream")},
	}
	p, err := claimcheck.BuildPack("acme_1", claimcheck.LayoutFlat, pcs)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Put(context.Background(), p.Key(), p.Data); err != nil {
		t.Fatal(err)
	}
	// A version 1 pack: its index names no stream.
	v1, err := os.ReadFile("testdata/packs/v1-mixed.zip")
	if err != nil {
		t.Fatal(err)
	}
	const v1Key = "claims/tenant=acme_1/dt=2026-05-06/6119eb15ee9e4c7dbbbb7ef1940e8408.zip"
	if err := ds.Put(context.Background(), v1Key, v1); err != nil {
		t.Fatal(err)
	}
	r := newReader(t, claimcheck.ReaderConfig{CacheBytes: 1 << 20}, ds)
	gw := &claimcheck.Gateway{Reader: r, Logger: discardLogger(), AuthorizeStream: authorizeStream}
	do := func(method, path, token string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if token != "" {
			req.Header.Set("X-Token", token)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		gw.ServeHTTP(w, req)
		return w
	}
	url := func(i int) string { return "/v1/claims/acme_1/" + p.ClaimID(i).String() }
	v1URL := func(id string) string { return "/v1/claims/acme_1/" + id }

	for _, tc := range []struct {
		name, token, path string
		want              int
	}{
		{"own stream", "kraken", url(1), 200},
		{"other stream", "kraken", url(0), 403},
		{"own venue's capture", "kraken", url(2), 200},
		{"other venue's capture", "kraken", url(3), 403},
		{"claim naming no stream", "kraken", url(4), 403},
		{"capture needs every stream of its venue", "kraken-level2", url(2), 403},
		{"level2 scope reads level2", "kraken-level2", url(1), 200},
		{"venue scope reads the venue's capture", "kraken-venue", url(2), 200},
		{"venue scope, other venue", "kraken-venue", url(0), 403},
		{"unrestricted, no stream", "", url(4), 200},
		{"unrestricted, capture", "", url(3), 200},
		{"v1 pack: scoped token refused", "kraken", v1URL("AQBQY2EZ6xXunkx9u7t-8ZQOhAgBAg"), 403},
		{"v1 pack: unrestricted reads", "", v1URL("AQBQY2EZ6xXunkx9u7t-8ZQOhAgAAg"), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, method := range []string{"GET", "HEAD"} {
				w := do(method, tc.path, tc.token, "Range", "bytes=0-3")
				if w.Code != tc.want && !(tc.want == 200 && w.Code == 206) {
					t.Fatalf("%s: %d, want %d", method, w.Code, tc.want)
				}
				if tc.want != 403 {
					continue
				}
				if method == "GET" && errorCode(t, w) != string(api.CodeUnauthorized) {
					t.Fatalf("%s: body %q", method, w.Body.String())
				}
				if h := w.Header(); h.Get("ETag") != "" || h.Get("Content-Range") != "" || h.Get("Content-Length") == "4" {
					t.Fatalf("%s: a refused claim's headers leaked: %v", method, h)
				}
			}
			// A conditional request learns nothing either.
			if w := do("GET", tc.path, tc.token, "If-None-Match", "*"); tc.want == 403 && w.Code != 403 {
				t.Fatalf("If-None-Match: %d, want 403", w.Code)
			}
		})
	}
	if w := do("GET", url(1), "kraken"); w.Body.String() != "kraken book" {
		t.Fatalf("own stream's bytes: %q", w.Body.String())
	}
}

// TestSnapshotRoutesStreamScopes: /v1/snapshots asks AuthorizeStream with
// the route's stream.
func TestSnapshotRoutesStreamScopes(t *testing.T) {
	ds, err := claimcheck.NewDirStore("dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := claimcheck.NewWriter(claimcheck.WriterConfig{Tenant: "acme_1"}, []claimcheck.Store{ds})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	for _, st := range []string{"coinbase:level2:BTC-USD", "kraken:level2:XBT/USD"} {
		if err := w.Add(claimcheck.Snapshot{Stream: st, Seq: 1, Time: t0, Recorded: t0, Data: []byte(st)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := newReader(t, claimcheck.ReaderConfig{}, ds)
	sh := &claimcheck.SnapshotHandler{Gateway: &claimcheck.Gateway{Reader: r, AuthorizeStream: authorizeStream}, Writer: w, Tenant: "acme_1"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/snapshots/{venue}/{symbol}", sh.List)
	mux.HandleFunc("GET /v1/snapshots/{venue}/{symbol}/latest", sh.Latest)
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/v1/snapshots/kraken/XBT%2FUSD/latest", 200},
		{"/v1/snapshots/kraken/XBT%2FUSD", 200},
		{"/v1/snapshots/coinbase/BTC-USD/latest", 403},
		{"/v1/snapshots/coinbase/BTC-USD", 403},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		req.Header.Set("X-Token", "kraken")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.path, rec.Code, rec.Body.String(), tc.want)
		}
	}
}
