package fanout

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// recSub is the model of one subscriber in TestPropertyRecovery.
type recSub struct {
	s        *subscriber.Subscriber
	conn     *subscriber.Mailbox // nil while a named subscriber is detached
	received map[venue.Stream]map[uint64]bool
	lost     map[venue.Stream]map[uint64]bool // every seq inside a reported gap
	// On the current connection: the last data seq read per stream, and
	// the recovered ranges announced and not yet read (the next seqs of
	// the stream past what was queued before the notice).
	last    map[venue.Stream]uint64
	pending map[venue.Stream][2]uint64
	// what a detached subscriber read before its connection closed, to
	// state on its next attach (nil: state nothing)
	stated map[venue.Stream]uint64
}

// TestPropertyRecovery drives random publishes, stalls, detaches and
// reattaches (stating what was read, or not) against random queue bounds
// and recovery windows, and checks for every subscriber and stream: every
// published seq was either received or named in a gap, never both, and
// none twice; on one connection a stream's seqs only go up; and where a
// resumed notice announced a recovered range, the stream continues with
// exactly that range, in order, before anything newer.
func TestPropertyRecovery(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		bound := rapid.IntRange(1, 8).Draw(rt, "bound")
		o := RecoveryOptions{
			MaxEventsPerStream: rapid.IntRange(1, 24).Draw(rt, "window"),
			MaxBytes:           int64(rapid.IntRange(1, 40).Draw(rt, "windowKB")) << 10,
			MaxAge:             time.Duration(rapid.IntRange(1, 10).Draw(rt, "age")) * time.Second,
		}
		now := t0
		h := NewHub(subscriber.NewRegistry())
		h.SetRecovery(o)
		f, _ := h.AddFeed(Options{Venue: "coinbase", MaxQueueLen: bound, Now: func() time.Time { return now }})
		streams := []venue.Stream{tr, tr2, l2}
		f.Publish(bookSnap(l2))
		published := map[venue.Stream]uint64{l2: 1}
		startSeq := map[venue.Stream]uint64{l2: 1}
		newConn := func(p *recSub) {
			p.conn = subscriber.NewMailbox()
			p.last, p.pending = map[venue.Stream]uint64{}, map[venue.Stream][2]uint64{}
		}
		var subs []*recSub
		for i := range rapid.IntRange(1, 3).Draw(rt, "subs") {
			p := &recSub{received: map[venue.Stream]map[uint64]bool{}, lost: map[venue.Stream]map[uint64]bool{}}
			newConn(p)
			if rapid.Bool().Draw(rt, fmt.Sprintf("named%d", i)) {
				p.s, _, _ = h.Attach(fmt.Sprintf("n%d", i), "", p.conn, nil)
			} else {
				p.s = h.NewEphemeral(p.conn)
			}
			for _, st := range streams {
				h.Subscribe(p.s, st)
				p.received[st], p.lost[st] = map[uint64]bool{}, map[uint64]bool{}
			}
			subs = append(subs, p)
		}
		// read takes ms as the client reads them.
		read := func(p *recSub, ms []*subscriber.Message) {
			for _, m := range ms {
				var w struct {
					Type, Kind, Stream string
					Seq                uint64
					Snapshot           bool
					Details            struct {
						Gaps, Recovered map[string][2]uint64
					}
				}
				if err := json.Unmarshal(m.Data, &w); err != nil {
					rt.Fatalf("bad message %q: %v", m.Data, err)
				}
				switch {
				case w.Type == "notice" && w.Kind == "resumed":
					for st, g := range w.Details.Gaps {
						for s := g[0]; s <= g[1]; s++ {
							p.lost[venue.Stream(st)][s] = true
						}
					}
					for st, g := range w.Details.Recovered {
						if _, ok := w.Details.Gaps[st]; ok {
							rt.Fatalf("%s: %s both recovered and a gap", p.s.ID(), st)
						}
						if g[1] < g[0] {
							rt.Fatalf("%s: %s recovered %v", p.s.ID(), st, g)
						}
						p.pending[venue.Stream(st)] = g
					}
				case w.Type == "notice" || w.Snapshot:
				default:
					st := venue.Stream(w.Stream)
					if p.received[st][w.Seq] || p.lost[st][w.Seq] {
						rt.Fatalf("%s: %s seq %d received twice (or after its gap)", p.s.ID(), st, w.Seq)
					}
					if w.Seq <= p.last[st] {
						rt.Fatalf("%s: %s seq %d after %d on one connection", p.s.ID(), st, w.Seq, p.last[st])
					}
					if g, ok := p.pending[st]; ok && w.Seq >= g[0] {
						if want := max(g[0], p.last[st]+1); w.Seq != want {
							rt.Fatalf("%s: %s recovered %v continues at %d, want %d", p.s.ID(), st, g, w.Seq, want)
						}
						if w.Seq == g[1] {
							delete(p.pending, st)
						}
					}
					p.received[st][w.Seq] = true
					p.last[st] = w.Seq
				}
			}
		}
		take := func(p *recSub, n int) {
			if p.conn != nil {
				ms, _ := p.conn.Drain(nil, n, math.MaxInt)
				read(p, ms)
			}
		}
		publish := func(st venue.Stream) {
			if st == l2 {
				f.Publish(bookUpd(l2, int(published[st])))
			} else {
				f.Publish(trade(st, 1))
			}
			published[st]++
		}
		attach := func(p *recSub) {
			// A statement supersedes what was said of the seqs after
			// it: the resumed notice names or recovers them again.
			for st, r := range p.stated {
				for s := range p.lost[st] {
					if s > r {
						delete(p.lost[st], s)
					}
				}
			}
			newConn(p)
			h.AttachFrom(p.s.ID(), "", p.conn, p.stated, nil)
			p.stated = nil
		}
		rt.Repeat(map[string]func(*rapid.T){
			"publish": func(rt *rapid.T) {
				publish(rapid.SampledFrom(streams).Draw(rt, "stream"))
			},
			"stall": func(rt *rapid.T) { // a reader that stops while the stream goes on
				st := rapid.SampledFrom(streams).Draw(rt, "stream")
				for range rapid.IntRange(1, 30).Draw(rt, "events") {
					publish(st)
				}
			},
			"tick": func(rt *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(1, 3000).Draw(rt, "ms")) * time.Millisecond)
			},
			"drain": func(rt *rapid.T) {
				take(rapid.SampledFrom(subs).Draw(rt, "sub"), rapid.IntRange(1, bound+4).Draw(rt, "n"))
			},
			"detach": func(rt *rapid.T) {
				p := rapid.SampledFrom(subs).Draw(rt, "sub")
				if p.s.Kind() != subscriber.Named || p.conn == nil {
					rt.Skip("not an attached named subscriber")
				}
				// Some messages were written to the socket; the client
				// read only those before the cut (a tail of data after
				// the last notice went unread), and states what it read
				// on its next attach — it must, or the unread would be
				// neither received nor named.
				ms, _ := p.conn.Drain(nil, rapid.IntRange(0, bound+2).Draw(rt, "written"), math.MaxInt)
				cut := len(ms)
				if rapid.Bool().Draw(rt, "unread") {
					cut = rapid.IntRange(0, len(ms)).Draw(rt, "cut")
					for i := cut; i < len(ms); i++ {
						if ms[i].Stream == "" {
							cut = i + 1 // a notice is read: everything before it is too
						}
					}
				}
				read(p, ms[:cut])
				if cut < len(ms) || rapid.Bool().Draw(rt, "state") {
					p.stated = map[venue.Stream]uint64{}
					for st, s := range p.last {
						p.stated[st] = s
					}
					if cut < len(ms) && len(p.stated) < len(streams) {
						// unread data of a stream never read on this
						// connection: its statement is "before all of it"
						for _, m := range ms[cut:] {
							st := venue.Stream(m.Stream)
							if _, ok := p.stated[st]; !ok && !m.Snapshot {
								p.stated[st] = m.Seq - 1
							}
						}
					}
				}
				h.Detach(p.s, p.conn)
				p.conn = nil
			},
			"attach": func(rt *rapid.T) {
				p := rapid.SampledFrom(subs).Draw(rt, "sub")
				if p.s.Kind() != subscriber.Named {
					rt.Skip("ephemeral")
				}
				if p.conn != nil {
					take(p, rapid.IntRange(0, 2).Draw(rt, "read"))
				}
				attach(p)
			},
		})
		// Settle: everyone attached and read, then one more event per
		// stream, so every dropping subscriber resumes and reports.
		for _, p := range subs {
			if p.conn == nil {
				attach(p)
			}
			take(p, math.MaxInt)
		}
		dropping := func() bool {
			for _, p := range subs {
				if st, _ := f.State(p.s); st.Dropping {
					return true
				}
			}
			return false
		}
		for round := 0; round < 3 || dropping(); round++ {
			if round > 1000 {
				rt.Fatal("still dropping after 1000 rounds of reading everything")
			}
			for _, st := range streams {
				publish(st)
				for _, p := range subs {
					take(p, math.MaxInt)
				}
			}
		}
		for _, p := range subs {
			for _, st := range streams {
				for s := startSeq[st] + 1; s <= published[st]; s++ {
					if r, l := p.received[st][s], p.lost[st][s]; r == l {
						rt.Fatalf("%s: %s seq %d received=%v lost=%v (want exactly one)", p.s.ID(), st, s, r, l)
					}
				}
			}
		}
		if held := h.rec.bytes.Load(); held > o.MaxBytes {
			rt.Fatalf("window holds %d bytes, bound %d", held, o.MaxBytes)
		}
	})
}
