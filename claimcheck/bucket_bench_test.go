package claimcheck_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
)

// bucketStore is a token bucket of rate requests/s (burst tokens): a
// request that finds a token is answered after latency (its first byte);
// one that finds none is answered 503 SlowDown at once, as S3's front end
// and claimchecktest.FaultProxy do. Unlike pacedStore it never queues,
// which is what makes it hard for the reader.
type bucketStore struct {
	rate    float64
	burst   float64
	latency time.Duration

	mu     sync.Mutex // protects tokens and last
	tokens float64
	last   time.Time

	ok, throttled atomic.Int64
}

func newBucketStore(rate, burst int, latency time.Duration) *bucketStore {
	return &bucketStore{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: time.Now(), latency: latency}
}

func (s *bucketStore) do(ctx context.Context) error {
	s.mu.Lock()
	now := time.Now()
	s.tokens = min(s.burst, s.tokens+now.Sub(s.last).Seconds()*s.rate)
	s.last = now
	if s.tokens < 1 {
		s.mu.Unlock()
		s.throttled.Add(1)
		return errSlowDown
	}
	s.tokens--
	s.mu.Unlock()
	if s.latency > 0 {
		t := time.NewTimer(s.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.ok.Add(1)
	return nil
}

const (
	bucketRate    = 200 // C: requests/s the store accepts
	bucketBurst   = 10  // 50 ms of tokens
	bucketClients = 256
)

// BenchmarkReaderGoodputBucket runs bucketClients closed-loop callers
// (each retrying at once) through the Reader (ceiling 64) against a
// bucketStore of C = 200 requests/s at first-byte latencies from 0 to
// 60 ms. It reports goodput as % of C, the % of store requests
// throttled, and store requests per success, over 3 s after 1 s of
// convergence. Run it several times (-count): the figures are noisy.
func BenchmarkReaderGoodputBucket(b *testing.B) {
	for _, lat := range []time.Duration{0, 10, 20, 30, 40, 50, 60} {
		lat *= time.Millisecond
		b.Run(fmt.Sprintf("latency=%dms", lat.Milliseconds()), func(b *testing.B) {
			var goodPct, thPct, perOK float64
			for range b.N {
				s := newBucketStore(bucketRate, bucketBurst, lat)
				r, err := claimcheck.NewReader(claimcheck.ReaderConfig{MaxInflight: benchCeiling, QueueMax: 4 * bucketClients, Deadline: time.Minute},
					[]claimcheck.Store{stubStore{"bucket"}})
				if err != nil {
					b.Fatal(err)
				}
				fn := func(ctx context.Context) (any, int64, error) { return nil, 0, s.do(ctx) }
				var (
					done atomic.Bool
					next atomic.Int64
					wg   sync.WaitGroup
				)
				for range bucketClients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for !done.Load() {
							r.Fetch(context.Background(), 0, key(int(next.Add(1))), fn)
						}
					}()
				}
				time.Sleep(time.Second) // convergence
				ok0, th0 := s.ok.Load(), s.throttled.Load()
				const window = 3 * time.Second
				time.Sleep(window)
				ok, th := s.ok.Load()-ok0, s.throttled.Load()-th0
				done.Store(true)
				wg.Wait()
				r.Close()
				goodPct = 100 * float64(ok) / window.Seconds() / bucketRate
				thPct = 100 * float64(th) / float64(max(ok+th, 1))
				perOK = float64(ok+th) / float64(max(ok, 1))
			}
			b.ReportMetric(goodPct, "%ofC")
			b.ReportMetric(thPct, "%throttled")
			b.ReportMetric(perOK, "reqs/ok")
			b.ReportMetric(0, "ns/op")
		})
	}
}
