package claimcheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
)

func TestWriterBatchesAndAnnouncesAfterWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ds, _ := claimcheck.NewDirStore("dir", t.TempDir())
		var mu sync.Mutex
		var packs [][]claimcheck.Claim
		w, err := claimcheck.NewWriter(claimcheck.WriterConfig{Tenant: "acme", PackMaxBytes: 1000, PackMaxAge: time.Second,
			Announce: func(cs []claimcheck.Claim) {
				// Every announced claim is already readable from the store.
				for _, c := range cs {
					ref, err := claimcheck.ParseRef(c.URL)
					if err != nil {
						t.Error(err)
						continue
					}
					if _, _, err := claimcheck.Redeem(context.Background(), []claimcheck.Store{ds}, ref); err != nil {
						t.Errorf("announced before written: %v", err)
					}
				}
				mu.Lock()
				packs = append(packs, cs)
				mu.Unlock()
			}}, []claimcheck.Store{ds})
		if err != nil {
			t.Fatal(err)
		}
		snap := func() [][]claimcheck.Claim {
			mu.Lock()
			defer mu.Unlock()
			return append([][]claimcheck.Claim(nil), packs...)
		}
		add := func(seq uint64, n int) {
			if err := w.Add(claimcheck.Snapshot{Stream: "coinbase:level2:BTC-USD", Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second),
				ContentType: "application/json", Data: bytes.Repeat([]byte{'x'}, n)}); err != nil {
				t.Fatal(err)
			}
		}
		add(1, 400)
		add(2, 400)
		synctest.Wait()
		if len(snap()) != 0 {
			t.Fatal("announced before the size or age bound")
		}
		add(3, 400) // 1200 > 1000: seals [1,2], starts [3]
		add(4, 600) // 1000: seals [3,4]
		synctest.Wait()
		if packs := snap(); len(packs) != 2 || len(packs[0]) != 2 || len(packs[1]) != 2 {
			t.Fatalf("packs %v, want 2 packs of 2", len(snap()))
		}
		add(5, 10)
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if len(snap()) != 2 {
			t.Fatal("sealed before the age bound")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if packs := snap(); len(packs) != 3 || packs[2][0].Seq != 5 {
			t.Fatalf("age bound: %d packs", len(packs))
		}
		if c, ok := w.Latest("coinbase:level2:BTC-USD"); !ok || c.Seq != 5 || c.Tenant != "acme" || c.Kind != "snapshot" {
			t.Fatalf("latest %+v", c)
		}
		if got := w.Recent("coinbase:level2:BTC-USD", t0.Add(2*time.Second), t0.Add(4*time.Second)); len(got) != 3 || got[0].Seq != 2 {
			t.Fatalf("recent: %+v", got)
		}
		add(6, 10)
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(snap()) != 4 {
			t.Fatal("Close did not flush")
		}
		if err := w.Add(claimcheck.Snapshot{Data: []byte("x")}); !errors.Is(err, claimcheck.ErrWriterClosed) {
			t.Fatalf("Add after Close: %v", err)
		}
	})
}

func TestWriterHomeStoresAndCheckIn(t *testing.T) {
	var stores []claimcheck.Store
	for _, n := range []string{"a", "b", "c"} {
		s, _ := claimcheck.NewDirStore(n, t.TempDir())
		stores = append(stores, s)
	}
	w, err := claimcheck.NewWriter(claimcheck.WriterConfig{Layout: claimcheck.LayoutSharded}, stores)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	homes := map[int]int{}
	names := []string{"a", "b", "c"}
	for i := range 30 {
		c, err := w.CheckIn(context.Background(), "", claimcheck.PackClaim{Stream: "okx:trades:BTC-USDT", Seq: uint64(i), Time: t0, Data: []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind != "capture" || c.Tenant != "default" {
			t.Fatalf("%+v", c)
		}
		ref, _ := claimcheck.ParseRef(c.URL)
		home := claimcheck.HomeStore(names, ref.Tenant, ref.ID.Pack)
		homes[home]++
		// Only the home store holds the pack; Redeem finds it from any order.
		if _, _, err := claimcheck.Redeem(context.Background(), stores[home:home+1], ref); err != nil {
			t.Fatalf("pack not at its home: %v", err)
		}
		rev := []claimcheck.Store{stores[2], stores[1], stores[0]}
		if b, _, err := claimcheck.Redeem(context.Background(), rev, ref); err != nil || b[0] != byte(i) {
			t.Fatalf("redeem: %v", err)
		}
	}
	if len(homes) != 3 {
		t.Fatalf("homes %v: packs not spread over the stores", homes)
	}
	// Home hashing does not depend on store order.
	p := claimcheck.PackID{1, 2, 3}
	if claimcheck.HomeStore([]string{"a", "b", "c"}, "t", p) != 2-claimcheck.HomeStore([]string{"c", "b", "a"}, "t", p) {
		t.Fatal("home depends on store order")
	}
}

func TestNodeRoutes(t *testing.T) {
	cfg := claimcheck.Defaults()
	cfg.Stores = []claimcheck.StoreConfig{{Kind: "dir", Path: t.TempDir()}}
	cfg.PackMaxAgeMS = 10
	announced := make(chan []claimcheck.Claim, 10)
	n, err := claimcheck.Open(context.Background(), cfg, claimcheck.Options{Announce: func(c []claimcheck.Claim) { announced <- c }})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	mux := http.NewServeMux()
	n.Register(mux)
	for i := range 3 {
		n.Writer.Add(claimcheck.Snapshot{Stream: "kraken:level2:BTC/USD", Seq: uint64(100 + i), Time: t0.Add(time.Duration(i) * time.Minute),
			ContentType: "application/json", Data: []byte(`{"seq":` + itoa(int64(100+i)) + `}`)})
	}
	if err := n.Writer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	cs := <-announced
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w
	}
	w := get("/v1/snapshots/kraken/BTC%2FUSD?from=" + t0.Add(time.Minute).Format(time.RFC3339))
	var list struct {
		Stream string
		Claims []claimcheck.Claim
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != 200 || list.Stream != "kraken:level2:BTC/USD" || len(list.Claims) != 2 {
		t.Fatalf("list: %d %s", w.Code, w.Body.String())
	}
	w = get("/v1/snapshots/kraken/BTC%2FUSD/latest")
	if w.Code != 200 || w.Body.String() != `{"seq":102}` || w.Header().Get("X-Claim-Seq") != "102" || w.Header().Get("X-Claim-Id") != cs[2].ID {
		t.Fatalf("latest: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	if w := get(cs[1].URL); w.Code != 200 || w.Body.String() != `{"seq":101}` {
		t.Fatalf("claim: %d %q", w.Code, w.Body.String())
	}
	w = get("/v1/claimcheck/stats")
	var st claimcheck.Stats
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || len(st.Stores) != 1 || st.Stores[0].Limit != 64 || st.Reads.Store == 0 {
		t.Fatalf("stats: %s", w.Body.String())
	}
	if w := get("/v1/snapshots/kraken/ETH%2FUSD/latest"); w.Code != 404 {
		t.Fatalf("no snapshot: %d", w.Code)
	}
}

func TestConfigValidate(t *testing.T) {
	d := claimcheck.Defaults()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mut  func(c *claimcheck.Config)
		want string
	}{
		{func(c *claimcheck.Config) { c.ReadMaxInflight = 0 }, "claim_check.read_max_inflight: 0"},
		{func(c *claimcheck.Config) { c.ReadQueueMax = -1 }, "claim_check.read_queue_max: -1"},
		{func(c *claimcheck.Config) { c.ReadDeadlineMS = -5 }, "claim_check.read_deadline_ms: -5"},
		{func(c *claimcheck.Config) { c.CacheBytes = -1 }, "claim_check.cache_bytes: -1"},
		{func(c *claimcheck.Config) { c.MaxConcurrentReads = -1 }, "claim_check.max_concurrent_reads: -1"},
		{func(c *claimcheck.Config) { c.PackMaxBytes = 0 }, "claim_check.pack_max_bytes: 0"},
		{func(c *claimcheck.Config) { c.KeyLayout = "deep" }, `claim_check.key_layout: "deep"`},
		{func(c *claimcheck.Config) { c.Tenant = "a/b" }, `claim_check.tenant: "a/b"`},
		{func(c *claimcheck.Config) { c.Stores = nil }, "claim_check.stores"},
		{func(c *claimcheck.Config) { c.Stores = []claimcheck.StoreConfig{{Kind: "gcs"}} }, `claim_check.stores[0].kind: "gcs"`},
		{func(c *claimcheck.Config) { c.Stores = []claimcheck.StoreConfig{{Kind: "s3"}} }, `claim_check.stores[0].bucket: ""`},
		{func(c *claimcheck.Config) {
			c.Stores = []claimcheck.StoreConfig{{Kind: "dir", Name: "x"}, {Kind: "dir", Name: "x"}}
		}, `claim_check.stores[1].name: "x"`},
	} {
		c := claimcheck.Defaults()
		tc.mut(&c)
		err := c.Validate()
		var ce *claimcheck.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error naming %s", err, tc.want)
		}
	}
	c := claimcheck.Defaults()
	c.Stores = []claimcheck.StoreConfig{{Kind: "dir"}, {Kind: "dir"}, {Kind: "s3", Bucket: "b"}}
	if err := c.Validate(); err != nil || c.Stores[0].Name != "dir-0" || c.Stores[1].Name != "dir-1" || c.Stores[2].Name != "s3" || c.Stores[0].Path != claimcheck.DefaultDirRoot {
		t.Fatalf("%v %+v", err, c.Stores)
	}
	if _, err := claimcheck.OpenStores(context.Background(), &c, nil); err == nil || !strings.Contains(err.Error(), "no opener") {
		t.Fatalf("s3 without an opener: %v", err)
	}
}
