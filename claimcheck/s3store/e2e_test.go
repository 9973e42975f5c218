package s3store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/claimcheck/claimchecktest"
	"github.com/fanoutd/fanoutd/internal/testutil"
)

type e2e struct {
	proxy  *claimchecktest.FaultProxy
	reader *claimcheck.Reader
	srv    *httptest.Server
	pack   *claimcheck.Pack
	pcs    []claimcheck.PackClaim
	client *http.Client
}

// newE2E runs versitygw, a fault proxy in front of it, an s3 store
// through the proxy, a reader and the gateway on a real HTTP server.
func newE2E(t *testing.T, rc claimcheck.ReaderConfig) *e2e {
	vgw := claimchecktest.VersityGW(t)
	proxy := claimchecktest.NewFaultProxy(t, vgw.Endpoint)
	st := vgw.At(proxy.URL).NewStore(t, "vgw", rc.MaxInflight+8)
	var pcs []claimcheck.PackClaim
	for i := range 40 {
		pcs = append(pcs, claimcheck.PackClaim{Stream: "bybit:level2:BTCUSDT", Seq: uint64(i), Time: time.Unix(1.8e9, 0),
			ContentType: "application/json", Data: bytes.Repeat([]byte(fmt.Sprintf("%03d", i)), 5000)})
	}
	p, err := claimcheck.BuildPack("acme", claimcheck.LayoutSharded, pcs)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), p.Key(), p.Data); err != nil {
		t.Fatal(err)
	}
	proxy.Reset()
	rc.Registerer = prometheus.NewRegistry()
	r, err := claimcheck.NewReader(rc, []claimcheck.Store{st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	gw := &claimcheck.Gateway{Reader: r, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/claims/{tenant}/{claim_id}", gw)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256} // a dial storm of 1000 overflows the listen backlog
	t.Cleanup(tr.CloseIdleConnections)
	return &e2e{proxy: proxy, reader: r, srv: srv, pack: p, pcs: pcs, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (e *e2e) get(t *testing.T, i int) (int, http.Header, []byte) {
	resp, err := e.client.Get(e.srv.URL + "/v1/claims/acme/" + e.pack.ClaimID(i).String())
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func rangeOf(e claimcheck.IndexEntry) string {
	return fmt.Sprintf("bytes=%d-%d", e.Offset, e.Offset+e.Length-1)
}

func TestE2EThousandGetsOneStoreRead(t *testing.T) {
	e := newE2E(t, claimcheck.ReaderConfig{MaxInflight: 32, QueueMax: 1024, CacheBytes: 64 << 20, Deadline: 20 * time.Second})
	e.proxy.Delay(200 * time.Millisecond) // the store is slow: the GETs pile up on one fetch
	const n = 1000
	var wg sync.WaitGroup
	start := make(chan struct{})
	var mu sync.Mutex
	codes := map[int]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code, _, body := e.get(t, 7)
			if code == 200 && !bytes.Equal(body, e.pcs[7].Data) {
				t.Error("wrong bytes")
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d GETs answered in %v", n, time.Since(t0))
	if codes[200] != n {
		t.Fatalf("answers %v, want %d × 200", codes, n)
	}
	key := e.pack.Key()
	if got := e.proxy.Count("GET", key, rangeOf(e.pack.Entries[7])); got != 1 {
		t.Fatalf("%d store reads of the claim's bytes, want exactly 1", got)
	}
	if got := e.proxy.Count("GET", key, fmt.Sprintf("bytes=0-%d", claimcheck.IndexPrefixLen(40)-1)); got != 1 {
		t.Fatalf("%d store reads of the index, want exactly 1", got)
	}
	s := e.reader.Stats().Reads
	if s.Store != 2 || s.Store+s.Coalesced+s.Cache != 2*n {
		t.Fatalf("reads %+v", s)
	}
}

func TestE2EFaults(t *testing.T) {
	e := newE2E(t, claimcheck.ReaderConfig{MaxInflight: 16, QueueMax: 1024, Deadline: 700 * time.Millisecond, FirstByteTimeout: 5 * time.Second})
	check := func(name string, i int, code int, errCode, retryAfter string) {
		t.Helper()
		got, h, body := e.get(t, i)
		var b struct{ Code string }
		json.Unmarshal(body, &b)
		if got != code || b.Code != errCode || h.Get("Retry-After") != retryAfter {
			t.Errorf("%s: %d %q Retry-After %q, want %d %q %q", name, got, body, h.Get("Retry-After"), code, errCode, retryAfter)
		}
		if strings.Contains(string(body), "secret detail") || strings.Contains(string(body), "AccessDenied") {
			t.Errorf("%s: store error body echoed: %q", name, body)
		}
	}
	check("healthy", 0, 200, "", "")

	e.proxy.Set(claimchecktest.FaultForbidden)
	check("403", 1, 503, "store_forbidden", "60")
	if l := e.reader.Stats().Stores[0].Limit; l != 16 {
		t.Errorf("403 changed the limit to %d", l)
	}

	e.proxy.Set(claimchecktest.FaultReset)
	check("reset", 2, 503, "store_unavailable", "1")

	e.proxy.Set(claimchecktest.FaultHang)
	start := time.Now()
	check("hang", 3, 503, "deadline", "1")
	if d := time.Since(start); d < 700*time.Millisecond || d > 3*time.Second {
		t.Errorf("hang answered after %v, want about the 700ms deadline", d)
	}
	e.proxy.Set(claimchecktest.FaultNone) // frees the hanging request
	// Wait until the late request has finished (and filled the cache), so
	// the throttling below starts from an idle store.
	testutil.WaitFor(t, 10*time.Second, "the freed request out of flight", func() bool { return e.reader.Stats().Stores[0].InFlight == 0 })

	// Throttle above 20 requests/s: concurrent uncached reads get 503
	// SlowDown, the gateway answers store_unavailable, the limit drops.
	e.proxy.Throttle(20, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := 4; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, h, _ := e.get(t, i)
			mu.Lock()
			codes[fmt.Sprintf("%d/%s", code, h.Get("Retry-After"))]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes["503/1"] == 0 {
		t.Errorf("throttling: answers %v, want some 503 with Retry-After 1", codes)
	}
	if l := e.reader.Stats().Stores[0].Limit; l >= 16 {
		t.Errorf("throttling: limit %d, want it halved", l)
	}
	e.proxy.Set(claimchecktest.FaultNone)
	check("recovered", 5, 200, "", "")
}
