package claimcheck_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
)

// pacedStore serves at most rate requests/s: each request takes the next
// free service slot (1/rate apart) plus a fixed latency, and a request
// whose slot is more than maxDelay away is answered 503 SlowDown at once
// — how S3 behaves against one prefix.
type pacedStore struct {
	interval, latency, maxDelay time.Duration

	mu   sync.Mutex // protects next
	next time.Time

	ok, throttled atomic.Int64
}

var errSlowDown = &claimcheck.StoreError{Op: "get", Store: "paced", Kind: claimcheck.ErrThrottled, Err: errors.New("503 SlowDown")}

func (s *pacedStore) do() error {
	s.mu.Lock()
	now := time.Now()
	slot := s.next
	if slot.Before(now) {
		slot = now
	}
	if slot.Sub(now) > s.maxDelay {
		s.mu.Unlock()
		s.throttled.Add(1)
		return errSlowDown
	}
	s.next = slot.Add(s.interval)
	s.mu.Unlock()
	time.Sleep(slot.Sub(now) + s.latency)
	s.ok.Add(1)
	return nil
}

const (
	benchRate    = 2000 // C, requests/s the store serves
	benchClients = 256  // closed-loop callers, each retrying at once
	benchCeiling = 64   // read_max_inflight; the fixed reader's limit
)

// BenchmarkReaderGoodput runs benchClients callers against a store that
// serves at most benchRate requests/s, through the adaptive Reader, a
// fixed-limit reader (a semaphore of benchCeiling) and no limit at all.
// It reports goodput (successful store reads/s and as % of C) and the %
// of store requests throttled, measured over 1.5 s after 0.5 s of
// convergence.
func BenchmarkReaderGoodput(b *testing.B) {
	variants := []struct {
		name string
		run  func(s *pacedStore) (fetch func(i int) error, stop func())
	}{
		{"adaptive", func(s *pacedStore) (func(int) error, func()) {
			r, err := claimcheck.NewReader(claimcheck.ReaderConfig{MaxInflight: benchCeiling, QueueMax: 4 * benchClients, Deadline: time.Minute},
				[]claimcheck.Store{stubStore{"paced"}})
			if err != nil {
				b.Fatal(err)
			}
			fn := func(context.Context) (any, int64, error) { return nil, 0, s.do() }
			return func(i int) error {
				_, err := r.Fetch(context.Background(), 0, key(i), fn)
				return err
			}, r.Close
		}},
		{"fixed", func(s *pacedStore) (func(int) error, func()) {
			sem := make(chan struct{}, benchCeiling)
			return func(int) error {
				sem <- struct{}{}
				defer func() { <-sem }()
				return s.do()
			}, func() {}
		}},
		{"unbounded", func(s *pacedStore) (func(int) error, func()) {
			return func(int) error { return s.do() }, func() {}
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			var goodput, throttledPct float64
			for range b.N {
				s := &pacedStore{interval: time.Second / benchRate, latency: 2 * time.Millisecond, maxDelay: 25 * time.Millisecond}
				fetch, stop := v.run(s)
				var (
					done atomic.Bool
					next atomic.Int64
					wg   sync.WaitGroup
				)
				for range benchClients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for !done.Load() {
							fetch(int(next.Add(1)))
						}
					}()
				}
				time.Sleep(500 * time.Millisecond) // convergence
				ok0, th0 := s.ok.Load(), s.throttled.Load()
				const window = 1500 * time.Millisecond
				time.Sleep(window)
				ok, th := s.ok.Load()-ok0, s.throttled.Load()-th0
				done.Store(true)
				wg.Wait()
				stop()
				goodput = float64(ok) / window.Seconds()
				throttledPct = 100 * float64(th) / float64(max(ok+th, 1))
			}
			b.ReportMetric(goodput, "goodput/s")
			b.ReportMetric(100*goodput/benchRate, "%ofC")
			b.ReportMetric(throttledPct, "%throttled")
			b.ReportMetric(0, "ns/op")
		})
	}
}
