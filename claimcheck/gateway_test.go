package claimcheck_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/testutil"
)

// faultStore wraps a store; fail, if set, answers GetRange instead.
type faultStore struct {
	claimcheck.Store
	mu    sync.Mutex
	fail  func(ctx context.Context) error
	calls int
}

func (s *faultStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.calls++
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		if err := fail(ctx); err != nil {
			return nil, err
		}
	}
	return s.Store.GetRange(ctx, key, off, n)
}

func (s *faultStore) setFail(f func(ctx context.Context) error) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

type gwFixture struct {
	store  *faultStore
	reader *claimcheck.Reader
	gw     *claimcheck.Gateway
	pack   *claimcheck.Pack
	pcs    []claimcheck.PackClaim
}

func newGateway(t *testing.T, rc claimcheck.ReaderConfig) *gwFixture {
	t.Helper()
	ds, err := claimcheck.NewDirStore("dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, pcs := samplePack(t, claimcheck.LayoutFlat)
	if err := ds.Put(context.Background(), p.Key(), p.Data); err != nil {
		t.Fatal(err)
	}
	fs := &faultStore{Store: ds}
	r := newReader(t, rc, fs)
	return &gwFixture{store: fs, reader: r, pack: p, pcs: pcs,
		gw: &claimcheck.Gateway{Reader: r, Logger: discardLogger()}}
}

func (f *gwFixture) url(i int) string {
	return "/v1/claims/acme_1/" + f.pack.ClaimID(i).String()
}

func (f *gwFixture) do(method, path string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.gw.ServeHTTP(w, req)
	return w
}

func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct{ Type, Code, Message string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Header().Get("Content-Type") != "application/json" ||
		body.Type != "error" || body.Message == "" {
		t.Fatalf("error body %q (%s): %v", w.Body.String(), w.Header().Get("Content-Type"), err)
	}
	return body.Code
}

func TestGatewayServesClaims(t *testing.T) {
	f := newGateway(t, claimcheck.ReaderConfig{CacheBytes: 1 << 20})
	data := f.pcs[2].Data
	n := int64(len(data))
	w := f.do("GET", f.url(2))
	if w.Code != 200 || w.Body.String() != string(data) {
		t.Fatalf("GET: %d %q", w.Code, w.Body.String())
	}
	h := w.Header()
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Cache-Control": "private, max-age=31536000, immutable",
		"Accept-Ranges": "bytes", "ETag": f.pack.Entries[2].ETag(), "Content-Length": itoa(n),
	} {
		if h.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v)
		}
	}
	// The empty claim is application/octet-stream.
	if w := f.do("GET", f.url(4)); w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("empty claim: %d %q", w.Code, w.Header().Get("Content-Type"))
	}

	for _, tc := range []struct {
		rng          string
		code         int
		first, last  int64
		contentRange string
	}{
		{"bytes=2-5", 206, 2, 5, "bytes 2-5/" + itoa(n)},
		{"bytes=3-", 206, 3, n - 1, "bytes 3-" + itoa(n-1) + "/" + itoa(n)},
		{"bytes=-4", 206, n - 4, n - 1, "bytes " + itoa(n-4) + "-" + itoa(n-1) + "/" + itoa(n)},
		{"bytes=0-99999", 206, 0, n - 1, "bytes 0-" + itoa(n-1) + "/" + itoa(n)},
		{"bytes=-99999", 206, 0, n - 1, "bytes 0-" + itoa(n-1) + "/" + itoa(n)},
		{"bytes=" + itoa(n) + "-", 416, 0, 0, "bytes */" + itoa(n)},
		{"bytes=-0", 416, 0, 0, "bytes */" + itoa(n)},
		{"bytes=0-1,3-4", 200, 0, n - 1, ""},
		{"items=0-1", 200, 0, n - 1, ""},
		{"bytes=5-2", 200, 0, n - 1, ""},
		{"bytes=x-", 200, 0, n - 1, ""},
	} {
		w := f.do("GET", f.url(2), "Range", tc.rng)
		if w.Code != tc.code || w.Header().Get("Content-Range") != tc.contentRange {
			t.Errorf("%s: %d %q, want %d %q", tc.rng, w.Code, w.Header().Get("Content-Range"), tc.code, tc.contentRange)
			continue
		}
		if tc.code == 416 {
			if c := errorCode(t, w); c != "range_not_satisfiable" {
				t.Errorf("%s: code %q", tc.rng, c)
			}
			continue
		}
		if got := w.Body.String(); got != string(data[tc.first:tc.last+1]) {
			t.Errorf("%s: body %q", tc.rng, got)
		}
	}
	// HEAD: headers, no body, no bytes read.
	before := f.reader.Stats().Reads
	w = f.do("HEAD", f.url(3))
	if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != itoa(int64(len(f.pcs[3].Data))) {
		t.Fatalf("HEAD: %d len %s", w.Code, w.Header().Get("Content-Length"))
	}
	if after := f.reader.Stats().Reads; after.Store+after.Cache+after.Coalesced != before.Store+before.Cache+before.Coalesced+1 {
		t.Fatalf("HEAD made more than the index read: %+v -> %+v", before, after)
	}
	if w := f.do("GET", f.url(2), "If-None-Match", f.pack.Entries[2].ETag()); w.Code != 304 {
		t.Fatalf("If-None-Match: %d", w.Code)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestGatewayErrors(t *testing.T) {
	f := newGateway(t, claimcheck.ReaderConfig{})
	other := f.pack.ClaimID(0)
	other.Pack[0] ^= 1
	for _, tc := range []struct {
		name string
		path string
		fail error
		code int
		err  string
		ra   string
	}{
		{"invalid tenant", "/v1/claims/a.b/" + f.pack.ClaimID(0).String(), nil, 400, "invalid_tenant", ""},
		{"invalid id", "/v1/claims/acme_1/nope", nil, 400, "invalid_id", ""},
		{"missing pack", "/v1/claims/acme_1/" + other.String(), nil, 404, "not_found", ""},
		{"other tenant", "/v1/claims/acme_2/" + f.pack.ClaimID(0).String(), nil, 404, "not_found", ""},
		{"throttled", f.url(0), storeErr(claimcheck.ErrThrottled), 503, "store_unavailable", "1"},
		{"unavailable", f.url(0), storeErr(claimcheck.ErrUnavailable), 503, "store_unavailable", "1"},
		{"forbidden", f.url(0), &claimcheck.StoreError{Kind: claimcheck.ErrForbidden, Err: errors.New("SECRET store body")}, 503, "store_forbidden", "60"},
		{"other", f.url(0), &claimcheck.StoreError{Kind: claimcheck.ErrOther, Err: errors.New("SECRET 500")}, 502, "store_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fail != nil {
				f.store.setFail(func(context.Context) error { return tc.fail })
				defer f.store.setFail(nil)
			}
			w := f.do("GET", tc.path)
			if w.Code != tc.code || errorCode(t, w) != tc.err || w.Header().Get("Retry-After") != tc.ra {
				t.Fatalf("%d %q Retry-After %q, want %d %q %q", w.Code, w.Body.String(), w.Header().Get("Retry-After"), tc.code, tc.err, tc.ra)
			}
			if strings.Contains(w.Body.String(), "SECRET") {
				t.Fatal("store error echoed")
			}
		})
	}
}

func TestGatewayAuthorize(t *testing.T) {
	f := newGateway(t, claimcheck.ReaderConfig{})
	f.gw.Authorize = func(r *http.Request, tenant string) (int, bool) {
		switch r.Header.Get("Authorization") {
		case "":
			return 401, false
		case "Bearer " + tenant:
			return 0, true
		}
		return 403, false
	}
	if w := f.do("GET", f.url(0)); w.Code != 401 || errorCode(t, w) != "unauthenticated" {
		t.Fatalf("no token: %d", w.Code)
	}
	if w := f.do("GET", f.url(0), "Authorization", "Bearer other"); w.Code != 403 || errorCode(t, w) != "unauthorized" {
		t.Fatalf("wrong tenant: %d", w.Code)
	}
	if w := f.do("GET", f.url(0), "Authorization", "Bearer acme_1"); w.Code != 200 {
		t.Fatalf("right tenant: %d", w.Code)
	}
}

func TestGatewayDeadlineAndGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGateway(t, claimcheck.ReaderConfig{MaxConcurrentReads: 2, Deadline: 500 * time.Millisecond, CacheBytes: 1 << 20})
		release := make(chan struct{})
		f.store.setFail(func(ctx context.Context) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				w := f.do("GET", f.url(1))
				if w.Code != 503 || errorCode(t, w) != "deadline" || w.Header().Get("Retry-After") != "1" || time.Since(start) != 500*time.Millisecond {
					t.Errorf("hanging store: %d %q after %v", w.Code, w.Body.String(), time.Since(start))
				}
			}()
		}
		synctest.Wait()
		calls := f.store.calls
		w := f.do("GET", f.url(0))
		if w.Code != 503 || errorCode(t, w) != "overloaded" || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("past max_concurrent_reads: %d %q", w.Code, w.Body.String())
		}
		if f.store.calls != calls {
			t.Fatal("a gated request reached the store")
		}
		wg.Wait()
		close(release)
		synctest.Wait()
		// The late index landed in the cache; the retry succeeds.
		f.store.setFail(nil)
		if w := f.do("GET", f.url(1)); w.Code != 200 {
			t.Fatalf("retry: %d", w.Code)
		}
		if g := f.reader.Stats().Gate; g.InFlight != 0 || g.Rejected != 1 {
			t.Fatalf("gate %+v", g)
		}
	})
}

func discardLogger() *slogLogger { return newDiscardLogger() }

func TestGatePanickingHandlerFreesSlot(t *testing.T) {
	r := newReader(t, claimcheck.ReaderConfig{MaxConcurrentReads: 1})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, ok := r.Admit(req.Context()); !ok {
			w.WriteHeader(503)
			return
		}
		panic("handler bug") // never releases
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		resp, err := c.Get(srv.URL)
		if err == nil {
			if resp.StatusCode == 503 {
				t.Fatalf("request %d shed: a panicking request leaked its slot", i)
			}
			resp.Body.Close()
		}
		if !testutil.Poll(5*time.Second, func() bool { return r.Stats().Gate.InFlight == 0 }) {
			t.Fatalf("slot of panicking request %d not freed", i)
		}
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		h        string
		size     int64
		first, n int64
		res      claimcheck.RangeResult
	}{
		{"", 10, 0, 0, claimcheck.RangeWhole},
		{"bytes=0-0", 10, 0, 1, claimcheck.RangePartial},
		{"bytes=9-", 10, 9, 1, claimcheck.RangePartial},
		{"bytes=10-", 10, 0, 0, claimcheck.RangeUnsatisfiable},
		{"bytes=-10", 10, 0, 10, claimcheck.RangePartial},
		{"bytes=-1", 0, 0, 0, claimcheck.RangeUnsatisfiable},
		{"bytes=0-", 0, 0, 0, claimcheck.RangeUnsatisfiable},
		{" Bytes = 1 - 2 ", 10, 1, 2, claimcheck.RangePartial},
		{"bytes=99999999999999999999-", 10, 0, 0, claimcheck.RangeUnsatisfiable},
		{"bytes=-99999999999999999999", 10, 0, 10, claimcheck.RangePartial},
		{"bytes=1-2,4-5", 10, 0, 0, claimcheck.RangeWhole},
		{"bytes=+1-2", 10, 0, 0, claimcheck.RangeWhole},
		{"bytes=-", 10, 0, 0, claimcheck.RangeWhole},
		{"bytes=1", 10, 0, 0, claimcheck.RangeWhole},
	} {
		f, n, res := claimcheck.ParseRange(tc.h, tc.size)
		if res != tc.res || (res == claimcheck.RangePartial && (f != tc.first || n != tc.n)) {
			t.Errorf("ParseRange(%q, %d) = %d, %d, %v; want %d, %d, %v", tc.h, tc.size, f, n, res, tc.first, tc.n, tc.res)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-10", "bytes=5-", "bytes=-3", "bytes=1-2,3-4", "items=1-2", "bytes=99999999999999999999-1", ""} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -size
		}
		if size < 0 {
			return
		}
		first, n, res := claimcheck.ParseRange(h, size)
		if res == claimcheck.RangePartial && (first < 0 || n < 1 || first+n > size) {
			t.Fatalf("ParseRange(%q, %d) = %d+%d outside the claim", h, size, first, n)
		}
	})
}
