// Package claimchecktest holds what tests of claim-check stores and of
// the daemon share: the store conformance suite (RunStore, in the manner
// of testing/slogtest), a fault-injecting HTTP proxy for S3, and helpers
// that run an S3 server (versitygw, gofakes3) on 127.0.0.1.
package claimchecktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
)

// RunStore runs the store conformance suite. newStore returns a fresh,
// empty store for each subtest; the suite closes it.
func RunStore(t *testing.T, newStore func(t *testing.T) claimcheck.Store) {
	ctx := context.Background()
	open := func(t *testing.T) claimcheck.Store {
		s := newStore(t)
		t.Cleanup(func() { s.Close() })
		if s.Name() == "" {
			t.Fatal("Name() is empty")
		}
		return s
	}
	get := func(t *testing.T, s claimcheck.Store, key string, off, n int64) []byte {
		t.Helper()
		rc, err := s.GetRange(ctx, key, off, n)
		if err != nil {
			t.Fatalf("GetRange(%q, %d, %d): %v", key, off, n, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("GetRange(%q, %d, %d): reading: %v", key, off, n, err)
		}
		return b
	}
	data := make([]byte, 1<<20+7)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}

	t.Run("PutGetRanges", func(t *testing.T) {
		s := open(t)
		const key = "claims/tenant=t1/dt=2026-01-02/abc.zip"
		if err := s.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			off, n int64
			want   []byte
		}{
			{0, -1, data},
			{0, int64(len(data)), data},
			{3, 5, data[3:8]},
			{int64(len(data)) - 1, 1, data[len(data)-1:]},
			{1000, -1, data[1000:]},
			{int64(len(data)) - 10, 100, data[len(data)-10:]}, // cut at the end
			{5, 0, nil},
		}
		for _, c := range cases {
			if got := get(t, s, key, c.off, c.n); !bytes.Equal(got, c.want) {
				t.Errorf("GetRange(%d, %d): %d bytes, want %d", c.off, c.n, len(got), len(c.want))
			}
		}
	})

	t.Run("Missing", func(t *testing.T) {
		s := open(t)
		_, err := s.GetRange(ctx, "claims/none/x.zip", 0, 10)
		var se *claimcheck.StoreError
		if !errors.As(err, &se) {
			t.Fatalf("GetRange of a missing key: %v (%T), want a *claimcheck.StoreError", err, err)
		}
		if se.Kind != claimcheck.ErrMissing || claimcheck.Classify(err) != claimcheck.ErrMissing {
			t.Errorf("kind %v, want missing", se.Kind)
		}
		if se.Key != "claims/none/x.zip" || se.Store != s.Name() || se.Op == "" {
			t.Errorf("error %+v does not name op, store and key", se)
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		s := open(t)
		for _, v := range []string{"first", "second, longer"} {
			if err := s.Put(ctx, "k/v", []byte(v)); err != nil {
				t.Fatal(err)
			}
			if got := get(t, s, "k/v", 0, -1); string(got) != v {
				t.Errorf("got %q, want %q", got, v)
			}
		}
	})

	t.Run("AtomicPut", func(t *testing.T) {
		s := open(t)
		a, b := bytes.Repeat([]byte{'a'}, 256<<10), bytes.Repeat([]byte{'b'}, 256<<10)
		if err := s.Put(ctx, "atomic", a); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					rc, err := s.GetRange(ctx, "atomic", 0, -1)
					if err != nil {
						errs <- err
						return
					}
					got, err := io.ReadAll(rc)
					rc.Close()
					if err == nil && !bytes.Equal(got, a) && !bytes.Equal(got, b) {
						err = fmt.Errorf("read a partial object (%d bytes)", len(got))
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for i := range 6 {
			v := a
			if i%2 == 0 {
				v = b
			}
			if err := s.Put(ctx, "atomic", v); err != nil {
				t.Error(err)
			}
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		s := open(t)
		if err := s.Put(ctx, "c", []byte("x")); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if rc, err := s.GetRange(cctx, "c", 0, -1); err == nil {
			rc.Close()
			t.Error("GetRange with a cancelled context succeeded")
		}
		if err := s.Put(cctx, "c2", []byte("x")); err == nil {
			t.Error("Put with a cancelled context succeeded")
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		s := open(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := fmt.Sprintf("conc/%d", i)
				v := bytes.Repeat([]byte{byte(i)}, 1000+i)
				if err := s.Put(ctx, k, v); err != nil {
					t.Error(err)
					return
				}
				rc, err := s.GetRange(ctx, k, 0, -1)
				if err != nil {
					t.Error(err)
					return
				}
				defer rc.Close()
				if got, _ := io.ReadAll(rc); !bytes.Equal(got, v) {
					t.Errorf("key %s: wrong bytes", k)
				}
			}()
		}
		wg.Wait()
	})

	t.Run("PackRedeem", func(t *testing.T) {
		s := open(t)
		t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		var pcs []claimcheck.PackClaim
		for i := range 5 {
			pcs = append(pcs, claimcheck.PackClaim{Stream: "coinbase:level2:BTC-USD", Seq: uint64(i + 1), Time: t0.Add(time.Duration(i) * time.Second),
				ContentType: "application/json", Data: bytes.Repeat([]byte{byte('a' + i)}, 100*i)})
		}
		for _, layout := range []claimcheck.Layout{claimcheck.LayoutFlat, claimcheck.LayoutSharded} {
			p, err := claimcheck.BuildPack("tenant-1", layout, pcs)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, p.Key(), p.Data); err != nil {
				t.Fatal(err)
			}
			for i := range pcs {
				got, e, err := claimcheck.Redeem(ctx, []claimcheck.Store{s}, claimcheck.Ref{Tenant: "tenant-1", ID: p.ClaimID(i)})
				if err != nil {
					t.Fatalf("%v claim %d: %v", layout, i, err)
				}
				if !bytes.Equal(got, pcs[i].Data) || e.ContentType != "application/json" {
					t.Errorf("%v claim %d: wrong bytes or content type %q", layout, i, e.ContentType)
				}
			}
		}
	})
}
