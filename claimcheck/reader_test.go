package claimcheck_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/claimcheck"
)

// stubStore only names a store; reader tests pass their own FetchFuncs.
type stubStore struct{ name string }

func (s stubStore) Name() string                              { return s.name }
func (s stubStore) Put(context.Context, string, []byte) error { return nil }
func (s stubStore) Close() error                              { return nil }
func (s stubStore) GetRange(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, &claimcheck.StoreError{Kind: claimcheck.ErrMissing, Err: errors.New("stub")}
}

func newReader(t *testing.T, cfg claimcheck.ReaderConfig, stores ...claimcheck.Store) *claimcheck.Reader {
	t.Helper()
	if len(stores) == 0 {
		stores = []claimcheck.Store{stubStore{"s0"}}
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	r, err := claimcheck.NewReader(cfg, stores)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func key(i int) claimcheck.Key {
	return claimcheck.Key{Kind: claimcheck.KeyBytes, Tenant: "t", Index: uint32(i)}
}

func storeErr(k claimcheck.ErrorKind) error {
	return &claimcheck.StoreError{Op: "get", Store: "s0", Key: "k", Kind: k, Err: errors.New(k.String())}
}

// answer returns a FetchFunc that waits for release (if not nil), then
// answers err (or a value when err is nil), counting its calls.
func answer(calls *atomic.Int64, release <-chan struct{}, err error) claimcheck.FetchFunc {
	return func(ctx context.Context) (any, int64, error) {
		if calls != nil {
			calls.Add(1)
		}
		if release != nil {
			<-release
		}
		if err != nil {
			return nil, 0, err
		}
		return []byte("v"), 1, nil
	}
}

func limit(r *claimcheck.Reader) int { return r.Stats().Stores[0].Limit }

// wave runs n fetches of distinct keys (from base) that all start, then
// all end with err at once; it returns when every caller has its answer.
func wave(t *testing.T, r *claimcheck.Reader, base, n int, err error) {
	t.Helper()
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Fetch(context.Background(), 0, key(base+i), answer(nil, release, err))
		}()
	}
	synctest.Wait()
	if got := r.Stats().Stores[0].InFlight; got != n {
		t.Fatalf("wave: %d in flight, want %d", got, n)
	}
	close(release)
	wg.Wait()
}

func TestAIMDWaveHalvesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 16, QueueMax: 100})
		wave(t, r, 0, 16, storeErr(claimcheck.ErrThrottled))
		if got := limit(r); got != 8 {
			t.Fatalf("after a wave of 16 throttles: limit %d, want 8 (halved once)", got)
		}
		// Admitted after the decrease but within 100 ms: no new decrease.
		time.Sleep(50 * time.Millisecond)
		wave(t, r, 100, 8, storeErr(claimcheck.ErrThrottled))
		if got := limit(r); got != 8 {
			t.Fatalf("a wave 50 ms after the decrease: limit %d, want 8", got)
		}
		time.Sleep(50 * time.Millisecond) // 100 ms after the first decrease
		wave(t, r, 200, 8, storeErr(claimcheck.ErrUnavailable))
		if got := limit(r); got != 4 {
			t.Fatalf("a wave 100 ms after the decrease: limit %d, want 4", got)
		}
	})
}

func TestAIMDOldEpochDoesNotHalveAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 16, QueueMax: 100})
		// 8 requests admitted now; the first fails at once, the others
		// 200 ms later — long past the 100 ms window, but admitted before
		// the decrease their sibling caused.
		slow := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 7 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.Fetch(context.Background(), 0, key(i), answer(nil, slow, storeErr(claimcheck.ErrThrottled)))
			}()
		}
		synctest.Wait()
		r.Fetch(context.Background(), 0, key(99), answer(nil, nil, storeErr(claimcheck.ErrThrottled)))
		if got := limit(r); got != 8 {
			t.Fatalf("limit %d, want 8", got)
		}
		time.Sleep(200 * time.Millisecond)
		close(slow)
		wg.Wait()
		if got := limit(r); got != 8 {
			t.Fatalf("late failures of requests admitted before the decrease: limit %d, want 8", got)
		}
	})
}

func TestAIMDAdditiveIncrease(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{{"success", nil}, {"missing is a success", storeErr(claimcheck.ErrMissing)}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 10, QueueMax: 100})
				wave(t, r, 0, 10, storeErr(claimcheck.ErrThrottled)) // 10 -> 5
				if got := limit(r); got != 5 {
					t.Fatalf("limit %d, want 5", got)
				}
				n := 100
				step := func(count, want int) {
					t.Helper()
					for range count {
						r.Fetch(context.Background(), 0, key(n), answer(nil, nil, tc.err))
						n++
					}
					if got := limit(r); got != want {
						t.Fatalf("limit %d, want %d", got, want)
					}
				}
				step(4, 5) // 4 of 5 successes: no change
				step(1, 6) // the 5th: +1
				step(6, 7) // then 6 more
				step(7+8+9, 10)
				step(50, 10) // never past the ceiling
			})
		})
	}
}

func TestAIMDForbiddenChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 16, QueueMax: 100})
		wave(t, r, 0, 16, storeErr(claimcheck.ErrForbidden))
		if got := limit(r); got != 16 {
			t.Fatalf("after 16 forbidden: limit %d, want 16", got)
		}
		wave(t, r, 100, 16, storeErr(claimcheck.ErrThrottled))
		// 8 forbidden answers do not count as successes towards +1.
		for i := range 8 {
			r.Fetch(context.Background(), 0, key(200+i), answer(nil, nil, storeErr(claimcheck.ErrForbidden)))
		}
		if got := limit(r); got != 8 {
			t.Fatalf("after 8 forbidden: limit %d, want 8", got)
		}
		for i := range 8 {
			r.Fetch(context.Background(), 0, key(300+i), answer(nil, nil, nil))
		}
		if got := limit(r); got != 9 {
			t.Fatalf("after 8 successes: limit %d, want 9", got)
		}
	})
}

func TestAIMDFloorIsOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 4, QueueMax: 100})
		for i := range 5 {
			r.Fetch(context.Background(), 0, key(i), answer(nil, nil, storeErr(claimcheck.ErrThrottled)))
			time.Sleep(100 * time.Millisecond)
		}
		if got := limit(r); got != 1 {
			t.Fatalf("limit %d, want 1", got)
		}
	})
}

func TestQueueShedsPastMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 2, QueueMax: 3})
		release := make(chan struct{})
		var calls atomic.Int64
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.Fetch(context.Background(), 0, key(i), answer(&calls, release, nil)); err != nil {
					t.Errorf("fetch %d: %v", i, err)
				}
			}()
			synctest.Wait()
		}
		st := r.Stats()
		if st.Stores[0].InFlight != 2 || st.Stores[0].Queued != 3 {
			t.Fatalf("in flight %d queued %d, want 2 and 3", st.Stores[0].InFlight, st.Stores[0].Queued)
		}
		start := time.Now()
		_, err := r.Fetch(context.Background(), 0, key(5), answer(&calls, nil, nil))
		if !errors.Is(err, claimcheck.ErrOverloaded) || time.Since(start) != 0 {
			t.Fatalf("6th fetch: %v after %v, want ErrOverloaded at once", err, time.Since(start))
		}
		// A read of a key already in flight or queued joins it instead.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Fetch(context.Background(), 0, key(4), nil); err != nil {
				t.Errorf("joining a queued read: %v", err)
			}
		}()
		synctest.Wait() // the joiner is waiting on key(4)'s flight, not racing its end
		close(release)
		wg.Wait()
		st = r.Stats()
		if calls.Load() != 5 || st.Reads.Shed != 1 || st.Reads.Store != 5 || st.Reads.Coalesced != 1 {
			t.Fatalf("calls %d, reads %+v", calls.Load(), st.Reads)
		}
	})
}

func TestQueuedReadPastDeadlineNeverReachesStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 1, QueueMax: 10})
		release := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Fetch(context.Background(), 0, key(0), answer(nil, release, nil))
		}()
		synctest.Wait()
		var calls atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := r.Fetch(ctx, 0, key(1), answer(&calls, nil, nil))
		if !errors.Is(err, claimcheck.ErrDeadline) || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("queued read: %v after %v, want ErrDeadline after 50ms", err, time.Since(start))
		}
		if q := r.Stats().Stores[0].Queued; q != 0 {
			t.Fatalf("%d still queued after its only caller left", q)
		}
		close(release)
		<-done
		synctest.Wait()
		if calls.Load() != 0 {
			t.Fatal("a queued read whose deadline passed reached the store")
		}
		if s := r.Stats().Reads; s.Shed != 1 || s.Store != 1 {
			t.Fatalf("reads %+v, want 1 store and 1 shed", s)
		}
	})
}

func TestQueuedReadDroppedAtDispatch(t *testing.T) {
	// A queued read whose callers' deadlines passed while a joiner still
	// technically waits on the same instant is dropped when a slot frees.
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 1, QueueMax: 10, Deadline: time.Second})
		release := make(chan struct{})
		go r.Fetch(context.Background(), 0, key(0), answer(nil, release, nil))
		synctest.Wait()
		var calls atomic.Int64
		errc := make(chan error)
		go func() {
			_, err := r.Fetch(context.Background(), 0, key(1), answer(&calls, nil, nil))
			errc <- err
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		if err := <-errc; !errors.Is(err, claimcheck.ErrDeadline) {
			t.Fatalf("got %v, want ErrDeadline", err)
		}
		close(release)
		synctest.Wait()
		if calls.Load() != 0 {
			t.Fatal("dropped read reached the store")
		}
	})
}

func TestHangingStoreDeadlineAndLateFill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 4, QueueMax: 10, CacheBytes: 1 << 20})
		release := make(chan struct{})
		var calls atomic.Int64
		fn := func(ctx context.Context) (any, int64, error) {
			calls.Add(1)
			<-release // the store hangs; the fetch outlives every caller
			return []byte("late"), 4, nil
		}
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithDeadline(context.Background(), start.Add(time.Duration(100+i*10)*time.Millisecond))
				defer cancel()
				_, err := r.Fetch(ctx, 0, key(7), fn)
				if !errors.Is(err, claimcheck.ErrDeadline) {
					t.Errorf("caller %d: %v, want ErrDeadline", i, err)
				}
				if d, want := time.Since(start), time.Duration(100+i*10)*time.Millisecond; d != want {
					t.Errorf("caller %d answered after %v, want exactly its deadline %v", i, d, want)
				}
			}()
		}
		wg.Wait()
		if calls.Load() != 1 {
			t.Fatalf("%d store requests, want 1", calls.Load())
		}
		close(release)
		synctest.Wait()
		v, err := r.Fetch(context.Background(), 0, key(7), answer(&calls, nil, errors.New("must not be called")))
		if err != nil || string(v.([]byte)) != "late" {
			t.Fatalf("retry: %v %v, want the late result from the cache", v, err)
		}
		s := r.Stats().Reads
		if s.Store != 1 || s.Shed != 9 || s.Cache != 1 || s.Coalesced != 0 || calls.Load() != 1 {
			t.Fatalf("reads %+v calls %d", s, calls.Load())
		}
	})
}

func TestCoalescing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 4, QueueMax: 10})
		release := make(chan struct{})
		var calls atomic.Int64
		var wg sync.WaitGroup
		firstCtx, cancelFirst := context.WithCancel(context.Background())
		for i := range 100 {
			wg.Add(1)
			ctx := context.Background()
			if i == 0 {
				ctx = firstCtx
			}
			go func() {
				defer wg.Done()
				v, err := r.Fetch(ctx, 0, key(1), answer(&calls, release, nil))
				if i == 0 {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("cancelled first caller: %v", err)
					}
					return
				}
				if err != nil || string(v.([]byte)) != "v" {
					t.Errorf("caller %d: %v %v", i, v, err)
				}
			}()
			synctest.Wait()
		}
		cancelFirst() // the first caller leaves; the shared fetch goes on
		synctest.Wait()
		close(release)
		wg.Wait()
		s := r.Stats().Reads
		if calls.Load() != 1 || s.Store != 1 || s.Coalesced != 99 {
			t.Fatalf("calls %d reads %+v, want 1 store request, 99 coalesced", calls.Load(), s)
		}
	})
}

func TestPanicBecomesErrorForAllWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 4, QueueMax: 10})
		release := make(chan struct{})
		fn := func(context.Context) (any, int64, error) {
			<-release
			panic("boom")
		}
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := r.Fetch(context.Background(), 0, key(3), fn)
				var pe *claimcheck.PanicError
				if !errors.As(err, &pe) || pe.Value != "boom" {
					t.Errorf("waiter %d: %v, want a PanicError", i, err)
				}
			}()
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if st := r.Stats().Stores[0]; st.InFlight != 0 || st.Limit != 4 {
			t.Fatalf("after a panic: %+v", st)
		}
	})
}

// slowStore answers GetRange after ttfb and then streams its body over
// bodyTime.
type slowStore struct {
	stubStore
	data     []byte
	ttfb     time.Duration
	bodyTime time.Duration
}

type slowBody struct {
	r    io.Reader
	wait time.Duration
	once bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if !b.once {
		b.once = true
		time.Sleep(b.wait)
	}
	return b.r.Read(p)
}
func (b *slowBody) Close() error { return nil }

func (s slowStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	select {
	case <-time.After(s.ttfb):
	case <-ctx.Done():
		return nil, &claimcheck.StoreError{Op: "get", Store: s.name, Key: key, Kind: claimcheck.ErrUnavailable, Err: ctx.Err()}
	}
	return &slowBody{r: bytes.NewReader(s.data[off : off+n]), wait: s.bodyTime}, nil
}

func TestTimeoutIsOnFirstByte(t *testing.T) {
	p, err := claimcheck.BuildPack("t", claimcheck.LayoutFlat, []claimcheck.PackClaim{{Time: time.Unix(1e9, 0), Data: bytes.Repeat([]byte("x"), 1000)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		ttfb      time.Duration
		body      time.Duration
		wantErr   bool
		wantLimit int
	}{
		{"slow first byte is congestion", 2 * time.Second, 0, true, 4},
		{"slow large body is not", 10 * time.Millisecond, 5 * time.Second, false, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := slowStore{stubStore: stubStore{"s0"}, data: p.Data, ttfb: tc.ttfb, bodyTime: tc.body}
				r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 8, FirstByteTimeout: time.Second, Deadline: 10 * time.Second}, st)
				loc := &claimcheck.Location{Ref: claimcheck.Ref{Tenant: "t", ID: p.ClaimID(0)}, Store: 0, Key: p.Key(), Entry: p.Entries[0]}
				_, err := r.Bytes(context.Background(), loc)
				if (err != nil) != tc.wantErr {
					t.Fatalf("err %v, want error %v", err, tc.wantErr)
				}
				if tc.wantErr && (claimcheck.Classify(err) != claimcheck.ErrUnavailable || !errors.Is(err, claimcheck.ErrFirstByteTimeout)) {
					t.Fatalf("err %v, want unavailable: first byte timeout", err)
				}
				if got := limit(r); got != tc.wantLimit {
					t.Fatalf("limit %d, want %d", got, tc.wantLimit)
				}
			})
		})
	}
}

func TestGateShedsAndCannotLeak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxConcurrentReads: 2})
		rel1, ok1 := r.Admit(context.Background())
		ctx2, kill2 := context.WithCancel(context.Background())
		_, ok2 := r.Admit(ctx2)
		_, ok3 := r.Admit(context.Background())
		if !ok1 || !ok2 || ok3 {
			t.Fatalf("admit: %v %v %v, want true true false", ok1, ok2, ok3)
		}
		// The second request dies without releasing: its context ends.
		kill2()
		synctest.Wait()
		if g := r.Stats().Gate; g.InFlight != 1 || g.Rejected != 1 {
			t.Fatalf("gate %+v after a killed request, want 1 in flight", g)
		}
		rel4, ok4 := r.Admit(context.Background())
		if !ok4 {
			t.Fatal("the killed request's slot leaked")
		}
		rel1()
		rel1() // idempotent
		rel4()
		if g := r.Stats().Gate; g.InFlight != 0 {
			t.Fatalf("gate %+v, want 0 in flight", g)
		}
		// 0 is unlimited.
		u := newReader(t, claimcheck.ReaderConfig{})
		for range 1000 {
			if _, ok := u.Admit(context.Background()); !ok {
				t.Fatal("unlimited gate shed")
			}
		}
	})
}

func TestCloseFailsQueuedAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := claimcheck.NewReader(claimcheck.ReaderConfig{MaxInflight: 1, QueueMax: 5}, []claimcheck.Store{stubStore{"s0"}})
		if err != nil {
			t.Fatal(err)
		}
		running := func(ctx context.Context) (any, int64, error) {
			<-ctx.Done() // ends when Close cancels it
			return nil, 0, ctx.Err()
		}
		errs := make(chan error, 2)
		go func() { _, err := r.Fetch(context.Background(), 0, key(0), running); errs <- err }()
		synctest.Wait()
		go func() { _, err := r.Fetch(context.Background(), 0, key(1), running); errs <- err }()
		synctest.Wait()
		r.Close()
		for range 2 {
			if err := <-errs; err == nil {
				t.Fatal("fetch succeeded across Close")
			}
		}
		if _, err := r.Fetch(context.Background(), 0, key(2), running); !errors.Is(err, claimcheck.ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	})
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 4, Registerer: reg, CacheBytes: 1 << 20})
	r.Fetch(context.Background(), 0, key(1), answer(nil, nil, nil))
	r.Fetch(context.Background(), 0, key(1), answer(nil, nil, nil))
	r.Fetch(context.Background(), 0, key(2), answer(nil, nil, storeErr(claimcheck.ErrThrottled)))
	for r.Stats().Stores[0].InFlight != 0 { // the throttled request holds its slot MinHold
		time.Sleep(time.Millisecond)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += fmt.Sprintf(",%s=%s", l.GetName(), l.GetValue())
			}
			switch {
			case m.Counter != nil:
				got[name] = m.Counter.GetValue()
			case m.Gauge != nil:
				got[name] = m.Gauge.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		claimcheck.MetricReads + ",outcome=store":                     2,
		claimcheck.MetricReads + ",outcome=cache":                     1,
		claimcheck.MetricLimit + ",store=s0":                          2,
		claimcheck.MetricInflight + ",store=s0":                       0,
		claimcheck.MetricQueued + ",store=s0":                         0,
		claimcheck.MetricLimitChanges + ",direction=down,store=s0":    1,
		claimcheck.MetricStoreRequests + ",result=throttled,store=s0": 1,
		claimcheck.MetricStoreRequests + ",result=ok,store=s0":        1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if got[claimcheck.MetricCacheBytes] <= 0 {
		t.Errorf("%s = %v", claimcheck.MetricCacheBytes, got[claimcheck.MetricCacheBytes])
	}
}

// measureRTT ends n successful requests that each take d, so the store's
// srtt is d.
func measureRTT(r *claimcheck.Reader, base, n int, d time.Duration) {
	for i := range n {
		r.Fetch(context.Background(), 0, key(base+i), func(context.Context) (any, int64, error) {
			time.Sleep(d)
			return []byte("v"), 1, nil
		})
	}
}

// A throttle answered at once must not free its slot at once: the next
// queued read would go to a store that just refused, and the reader
// spins. The slot is kept one srtt.
func TestThrottleHoldsSlotOneRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 1, QueueMax: 10})
		measureRTT(r, 0, 1, 20*time.Millisecond)
		if s := r.Stats().Stores[0]; s.SRTTms != 20 {
			t.Fatalf("srtt %v ms, want 20", s.SRTTms)
		}
		start := time.Now()
		_, err := r.Fetch(context.Background(), 0, key(10), answer(nil, nil, storeErr(claimcheck.ErrThrottled)))
		if claimcheck.Classify(err) != claimcheck.ErrThrottled || time.Since(start) != 0 {
			t.Fatalf("throttled caller: %v after %v, want the throttle at once", err, time.Since(start))
		}
		var sent time.Duration
		r.Fetch(context.Background(), 0, key(11), func(context.Context) (any, int64, error) {
			sent = time.Since(start)
			return []byte("v"), 1, nil
		})
		if sent != 20*time.Millisecond {
			t.Fatalf("the next read was sent %v after the throttle, want 20ms (one srtt)", sent)
		}
	})
}

// The decrease window is the store's srtt, not a fixed 100 ms: a throttle
// of a request admitted after a decrease halves again one srtt after it,
// not sooner.
func TestDecreaseWindowFollowsRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 16, QueueMax: 100})
		measureRTT(r, 0, 1, 20*time.Millisecond)
		throttle := func(i int) {
			r.Fetch(context.Background(), 0, key(i), answer(nil, nil, storeErr(claimcheck.ErrThrottled)))
		}
		wave(t, r, 100, 4, storeErr(claimcheck.ErrThrottled))
		if got := limit(r); got != 8 {
			t.Fatalf("limit %d, want 8", got)
		}
		time.Sleep(10 * time.Millisecond)
		throttle(200) // admitted after the decrease, half an srtt later
		if got := limit(r); got != 8 {
			t.Fatalf("a throttle 10 ms after the decrease: limit %d, want 8", got)
		}
		time.Sleep(10 * time.Millisecond)
		throttle(201) // one srtt later: still congested, halve again
		if got := limit(r); got != 4 {
			t.Fatalf("a throttle 20 ms (one srtt) after the decrease: limit %d, want 4", got)
		}
	})
}

// With the cache off, an index fetch whose caller cannot also read the
// claim's bytes before its deadline (two srtt) is not sent; one that ends
// after its caller left is counted as wasted.
func TestCacheOffWastedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReader(t, claimcheck.ReaderConfig{MaxInflight: 4, QueueMax: 10})
		measureRTT(r, 0, 1, 30*time.Millisecond)
		var calls atomic.Int64
		idx := claimcheck.Key{Kind: claimcheck.KeyIndex, Tenant: "t", Count: 1}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := r.Fetch(ctx, 0, idx, answer(&calls, nil, nil)); !errors.Is(err, claimcheck.ErrDeadline) || calls.Load() != 0 {
			t.Fatalf("index with 50 ms left, srtt 30 ms: %v, %d store requests; want ErrDeadline and none", err, calls.Load())
		}
		// A bytes read with the same time left is sent (one srtt suffices).
		ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel2()
		if _, err := r.Fetch(ctx2, 0, key(50), answer(&calls, nil, nil)); err != nil || calls.Load() != 1 {
			t.Fatalf("bytes with 50 ms left: %v, %d store requests", err, calls.Load())
		}
		// A read whose caller leaves before the store answers: wasted.
		release := make(chan struct{})
		ctx3, cancel3 := context.WithTimeout(context.Background(), 40*time.Millisecond)
		defer cancel3()
		if _, err := r.Fetch(ctx3, 0, key(60), answer(&calls, release, nil)); !errors.Is(err, claimcheck.ErrDeadline) {
			t.Fatalf("hanging read: %v", err)
		}
		close(release)
		synctest.Wait()
		if w := r.Stats().Stores[0].Wasted; w != 1 {
			t.Fatalf("wasted %d, want 1", w)
		}
	})
}
