package venue_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Keys go to the first connection with room; a new one opens when all are
// full, none past MaxConns; a freed place is filled first; a lowered
// capacity holds.
func TestPoolPlacement(t *testing.T) {
	var opened []int
	p, err := venue.NewPool(venue.PoolConfig{
		Link: venue.LinkConfig{Venue: "v", Dial: func(context.Context, string, func()) (venue.Conn, error) { return newPipe(), nil },
			ReadTimeout: time.Second, Sink: &noticeSink{}},
		Capacity: 2, MaxConns: 2,
		Conn: func(i int, cfg *venue.LinkConfig) {
			opened = append(opened, i)
			cfg.Decoder, cfg.Coverage = &nopDecoder{}, venue.NewCoverageTracker("v")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	place := func(key string, cost, want int, wantOpened, wantOK bool) {
		t.Helper()
		var i int
		var o, ok bool
		p.Do(func() { i, o, ok = p.Place(key, cost) })
		if ok != wantOK || ok && (i != want || o != wantOpened) {
			t.Errorf("Place(%s) = %d, %v, %v; want %d, %v, %v", key, i, o, ok, want, wantOpened, wantOK)
		}
	}
	place("a", 1, 0, false, true)
	place("b", 1, 0, false, true)
	place("a", 1, 0, false, true) // placed already
	place("c", 1, 1, true, true)
	place("d", 2, 0, false, false) // no room, no third connection
	p.Do(func() { p.Remove("a") })
	place("e", 1, 0, false, true)
	place("f", 1, 1, false, true)
	p.Do(func() {
		p.Remove("c")
		p.Limit(1, 1)
	})
	place("g", 1, 0, false, false) // connection 1 holds f, its one place
	p.Do(func() {
		if got := p.Keys(0); len(got) != 2 || got[0] != "b" || got[1] != "e" {
			t.Errorf("connection 0 has %v", got)
		}
		if p.Len() != 2 || p.Used(1) != 1 || p.Capacity(1) != 1 {
			t.Errorf("%d connections, connection 1 used %d of %d", p.Len(), p.Used(1), p.Capacity(1))
		}
	})
	if len(opened) != 2 {
		t.Errorf("Conn called for %v", opened)
	}
}

// Each connection runs its own link: connections opened after Run start
// at once, link notices name their connection, a drop of one of several
// names its streams, and coverage is up only while every connection is.
func TestPoolConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &noticeSink{}
		pipes := make(chan *pipeConn, 8)
		covs := []*venue.CoverageTracker{}
		p, err := venue.NewPool(venue.PoolConfig{
			Link: venue.LinkConfig{Venue: "v", URL: "ws://v", ReadTimeout: time.Hour, Sink: sink,
				Dial: func(context.Context, string, func()) (venue.Conn, error) {
					c := newPipe()
					pipes <- c
					return c, nil
				}},
			Capacity: 1,
			Conn: func(i int, cfg *venue.LinkConfig) {
				cov := venue.NewCoverageTracker("v")
				covs = append(covs, cov)
				cfg.Decoder, cfg.Coverage = &nopDecoder{}, cov
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			p.Run(ctx)
			close(done)
		}()
		first := <-pipes
		p.Do(func() {
			p.Place("a", 1)
			p.Place("b", 1) // opens connection 1
		})
		<-pipes
		synctest.Wait()
		if c := p.Coverage(); c.Link != "up" {
			t.Errorf("coverage link %s with both connections up", c.Link)
		}
		now := time.Now()
		covs[0].Observe(venue.NewStream("v", venue.Level2, "A"), now)
		covs[1].Observe(venue.NewStream("v", venue.Level2, "B"), now)
		if n := len(p.Coverage().Streams); n != 2 {
			t.Errorf("%d streams covered, want 2", n)
		}
		first.Close()
		synctest.Wait()
		var down *notice.Notice
		sink.mu.Lock()
		for i := range sink.ns {
			if sink.ns[i].Kind == notice.LinkDown {
				down = &sink.ns[i]
			}
		}
		sink.mu.Unlock()
		if down == nil {
			t.Fatal("no link_down")
		}
		if down.Details["connection"] != 0 || len(down.Details["streams"].([]string)) != 1 || down.Details["streams"].([]string)[0] != "v:level2:A" {
			t.Errorf("link_down details %v", down.Details)
		}
		if err := notice.CheckDetails(*down); err != nil {
			t.Error(err)
		}
		if c := p.Coverage(); len(c.Streams) != 1 || c.Streams[0].Stream != "v:level2:B" {
			t.Errorf("coverage after connection 0 dropped: %+v", c.Streams)
		}
		<-pipes // connection 0 again
		synctest.Wait()
		cancel()
		<-done
	})
}

// connRecorder is a venue.ConnRecorder that keeps what each connection
// was given.
type connRecorder struct {
	keys map[int]func() []string
}

func (r *connRecorder) Frame(string, time.Time, []byte) {}
func (r *connRecorder) Disconnect(string, time.Time)    {}
func (r *connRecorder) ForConn(i int, keys func() []string) venue.Recorder {
	r.keys[i] = keys
	return r
}

// A ConnRecorder gets each connection apart: ForConn with its index and
// its placed keys, which it may read without the decode lock.
func TestPoolRecordsConnectionsApart(t *testing.T) {
	rec := &connRecorder{keys: map[int]func() []string{}}
	p, err := venue.NewPool(venue.PoolConfig{
		Link: venue.LinkConfig{Venue: "v", Dial: func(context.Context, string, func()) (venue.Conn, error) { return newPipe(), nil },
			ReadTimeout: time.Second, Sink: &noticeSink{}, Recorder: rec},
		Capacity: 2,
		Conn: func(i int, cfg *venue.LinkConfig) {
			cfg.Decoder, cfg.Coverage = &nopDecoder{}, venue.NewCoverageTracker("v")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Do(func() {
		for _, k := range []string{"a", "b", "c"} {
			p.Place(k, 1)
		}
	})
	if len(rec.keys) != 2 {
		t.Fatalf("ForConn for %d connections, want 2", len(rec.keys))
	}
	if got := rec.keys[0](); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("connection 0 keys %v", got)
	}
	if got := rec.keys[1](); len(got) != 1 || got[0] != "c" {
		t.Errorf("connection 1 keys %v", got)
	}
}
