package venue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// pipeConn is an in-memory Conn: frames come from in, writes go to out.
type pipeConn struct {
	in     chan []byte
	out    chan []byte
	closed chan struct{}
	once   sync.Once
}

func newPipe() *pipeConn {
	return &pipeConn{in: make(chan []byte, 16), out: make(chan []byte, 16), closed: make(chan struct{})}
}

func (p *pipeConn) Read(ctx context.Context, buf []byte) ([]byte, error) {
	select {
	case f := <-p.in:
		return append(buf[:0], f...), nil
	case <-p.closed:
		return buf, errors.New("closed")
	case <-ctx.Done():
		return buf, ctx.Err()
	}
}

func (p *pipeConn) Write(ctx context.Context, msg []byte) error {
	select {
	case p.out <- msg:
		return nil
	case <-p.closed:
		return errors.New("closed")
	}
}

func (p *pipeConn) Ping(ctx context.Context) error { return nil }
func (p *pipeConn) Close() error                   { p.once.Do(func() { close(p.closed) }); return nil }

type nopDecoder struct{ frames int }

func (d *nopDecoder) Frame(time.Time, []byte) { d.frames++ }
func (d *nopDecoder) LinkDown(time.Time)      {}

type noticeSink struct {
	mu sync.Mutex
	ns []notice.Notice
}

func (s *noticeSink) Event(*venue.Event) {}
func (s *noticeSink) Notice(n notice.Notice) {
	s.mu.Lock()
	s.ns = append(s.ns, n)
	s.mu.Unlock()
}

func (s *noticeSink) kinds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.ns {
		out = append(out, n.Kind.String())
	}
	return out
}

// TestLinkWatchdogAndBackoff: a silent connection is dropped after the
// read timeout; the first retry is at once, the second after about 1 s; each
// connection is subscribed again; every notice follows its schema.
func TestLinkWatchdogAndBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var conns []*pipeConn
		var dials []time.Time
		sink := &noticeSink{}
		dec := &nopDecoder{}
		var l *venue.Link
		l, err := venue.NewLink(venue.LinkConfig{
			Venue: "x", URL: "mem://x", ReadTimeout: 2 * time.Second,
			Dial: func(ctx context.Context, url string, alive func()) (venue.Conn, error) {
				mu.Lock()
				defer mu.Unlock()
				c := newPipe()
				conns = append(conns, c)
				dials = append(dials, time.Now())
				return c, nil
			},
			Decoder: dec, Sink: sink, Coverage: venue.NewCoverageTracker("x"),
			Connected: func(time.Time) bool { l.Send([]byte("subscribe")); return true },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { l.Run(ctx); close(done) }()

		start := time.Now()
		synctest.Wait()
		mu.Lock()
		c0 := conns[0]
		mu.Unlock()
		if got := string(<-c0.out); got != "subscribe" {
			t.Fatalf("first write %q, want subscribe", got)
		}
		c0.in <- []byte("frame")
		time.Sleep(1500 * time.Millisecond) // within the read timeout of the frame
		synctest.Wait()
		mu.Lock()
		if len(conns) != 1 {
			t.Fatalf("%d dials before the read timeout", len(conns))
		}
		mu.Unlock()
		time.Sleep(5 * time.Second) // silence: dropped, retried at once, dropped again, retried after ~1 s
		synctest.Wait()
		cancel()
		<-done

		mu.Lock()
		defer mu.Unlock()
		if len(dials) < 3 {
			t.Fatalf("%d dials, want at least 3", len(dials))
		}
		if d := dials[1].Sub(start); d < 2*time.Second || d > 3*time.Second {
			t.Errorf("second dial %v after start, want just past the 2 s read timeout", d)
		}
		if gap := dials[2].Sub(dials[1]); gap < 2*time.Second+800*time.Millisecond {
			t.Errorf("third dial %v after the second, want read timeout + backoff of 0.8–1 s", gap)
		}
		if dec.frames != 1 {
			t.Errorf("decoder got %d frames, want 1", dec.frames)
		}
		want := []string{"link_up", "link_down", "link_reconnecting", "link_up", "link_down", "link_reconnecting", "link_up"}
		got := sink.kinds()
		if len(got) < len(want) || fmtSlice(got[:len(want)]) != fmtSlice(want) {
			t.Errorf("notices %v, want %v…", got, want)
		}
		for _, n := range sink.ns {
			if err := notice.CheckDetails(n); err != nil {
				t.Error(err)
			}
		}
	})
}

func fmtSlice(s []string) string {
	out := ""
	for _, x := range s {
		out += x + " "
	}
	return out
}

// TestLinkPacesRequests: a burst of requests drains evenly, one every
// 1/MaxSendsPerSecond, so no second however cut holds more than one extra.
func TestLinkPacesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newPipe()
		var l *venue.Link
		l, err := venue.NewLink(venue.LinkConfig{
			Venue: "x", URL: "mem://x", ReadTimeout: time.Hour, MaxSendsPerSecond: 4,
			Dial:    func(context.Context, string, func()) (venue.Conn, error) { return c, nil },
			Decoder: &nopDecoder{}, Sink: &noticeSink{}, Coverage: venue.NewCoverageTracker("x"),
			Connected: func(time.Time) bool {
				for range 10 {
					l.Send([]byte("subscribe"))
				}
				return true
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { l.Run(ctx); close(done) }()
		var at []time.Time
		for range 10 {
			<-c.out
			at = append(at, time.Now())
		}
		cancel()
		<-done
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < 250*time.Millisecond {
				t.Errorf("request %d %v after the one before, want 250 ms", i, gap)
			}
		}
	})
}
