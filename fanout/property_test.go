package fanout

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// propSub is the model of one subscriber in the property test.
type propSub struct {
	s        *subscriber.Subscriber
	conn     *subscriber.Mailbox // nil while a named subscriber is detached
	received map[venue.Stream]map[uint64]bool
	lost     map[venue.Stream]map[uint64]bool // every seq inside a reported gap
	// notice order on the current connection
	expectDropping bool
	firstOnConn    bool
}

// TestPropertyDelivery drives random publish/drain/attach/detach schedules
// and checks, for every subscriber: every published seq of its streams was
// either received or named in a resumed notice's gaps, and never both; the
// queue never exceeds the bound (forced snapshots aside); notices alternate
// dropping/resumed starting with dropping.
func TestPropertyDelivery(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		bound := rapid.IntRange(1, 6).Draw(rt, "bound")
		h := NewHub(subscriber.NewRegistry())
		f, _ := h.AddFeed(Options{Venue: "coinbase", MaxQueueLen: bound})
		streams := []venue.Stream{tr, tr2, l2}
		f.Publish(bookSnap(l2)) // seq 1 of l2, before anyone subscribes
		published := map[venue.Stream]uint64{l2: 1}
		startSeq := map[venue.Stream]uint64{l2: 1} // seqs up to here predate the subscribers
		var subs []*propSub
		nSubs := rapid.IntRange(1, 4).Draw(rt, "subs")
		for i := range nSubs {
			p := &propSub{received: map[venue.Stream]map[uint64]bool{}, lost: map[venue.Stream]map[uint64]bool{}, expectDropping: true, firstOnConn: true}
			p.conn = subscriber.NewMailbox()
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
		take := func(p *propSub, n int) {
			if p.conn == nil {
				return
			}
			ms, _ := p.conn.Drain(nil, n, math.MaxInt)
			for _, m := range ms {
				var w struct {
					Type, Kind, Stream string
					Seq                uint64
					Snapshot           bool
					Details            struct {
						Reason string
						Gaps   map[string][2]uint64
					}
				}
				if err := json.Unmarshal(m.Data, &w); err != nil {
					rt.Fatalf("bad message %q: %v", m.Data, err)
				}
				switch {
				case w.Type == "notice" && w.Kind == "dropping":
					if !p.expectDropping {
						rt.Fatalf("%s: dropping twice without resumed", p.s.ID())
					}
					p.expectDropping, p.firstOnConn = false, false
				case w.Type == "notice" && w.Kind == "resumed":
					if w.Details.Reason == "reattached" {
						if !p.firstOnConn {
							rt.Fatalf("%s: reattached resumed not first on its connection", p.s.ID())
						}
					} else if p.expectDropping {
						rt.Fatalf("%s: resumed without dropping", p.s.ID())
					}
					p.expectDropping, p.firstOnConn = true, false
					for st, g := range w.Details.Gaps {
						for s := g[0]; s <= g[1]; s++ {
							p.lost[venue.Stream(st)][s] = true
						}
					}
				case w.Type == "notice":
					rt.Fatalf("unexpected notice %s", w.Kind)
				case w.Snapshot:
					// a snapshot stands for the book, not for the events
				default:
					st := venue.Stream(w.Stream)
					if p.received[st][w.Seq] {
						rt.Fatalf("%s: %s seq %d received twice", p.s.ID(), st, w.Seq)
					}
					p.received[st][w.Seq] = true
					p.firstOnConn = false
				}
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"publish": func(rt *rapid.T) {
				st := rapid.SampledFrom(streams).Draw(rt, "stream")
				if st == l2 {
					f.Publish(bookUpd(l2, int(published[st])))
				} else {
					f.Publish(trade(st, 1))
				}
				published[st]++
				for _, p := range subs {
					if p.conn != nil && p.conn.Len() > bound+1 {
						rt.Fatalf("%s: queue %d past bound %d (+1 snapshot)", p.s.ID(), p.conn.Len(), bound)
					}
				}
			},
			"drain": func(rt *rapid.T) {
				p := rapid.SampledFrom(subs).Draw(rt, "sub")
				take(p, rapid.IntRange(0, bound+2).Draw(rt, "n"))
			},
			"detach": func(rt *rapid.T) {
				p := rapid.SampledFrom(subs).Draw(rt, "sub")
				if p.s.Kind() != subscriber.Named || p.conn == nil {
					rt.Skip("not an attached named subscriber")
				}
				take(p, rapid.IntRange(0, 2).Draw(rt, "written"))
				h.Detach(p.s, p.conn)
				p.conn = nil
			},
			"attach": func(rt *rapid.T) {
				p := rapid.SampledFrom(subs).Draw(rt, "sub")
				if p.s.Kind() != subscriber.Named {
					rt.Skip("ephemeral")
				}
				if p.conn != nil {
					take(p, rapid.IntRange(0, 2).Draw(rt, "written"))
				}
				p.conn = subscriber.NewMailbox()
				p.expectDropping, p.firstOnConn = true, true
				h.Attach(p.s.ID(), "", p.conn, nil)
			},
		})
		// Settle: attach everyone, drain, publish one more on each stream
		// so dropping subscribers resume and report, drain again.
		for _, p := range subs {
			if p.conn == nil {
				p.conn = subscriber.NewMailbox()
				p.expectDropping, p.firstOnConn = true, true
				h.Attach(p.s.ID(), "", p.conn, nil)
			}
			take(p, math.MaxInt)
		}
		for range 2 {
			for _, st := range streams {
				if st == l2 {
					f.Publish(bookUpd(l2, 0))
				} else {
					f.Publish(trade(st, 1))
				}
				published[st]++
				for _, p := range subs {
					take(p, math.MaxInt)
				}
			}
		}
		for _, p := range subs {
			for _, st := range streams {
				for s := startSeq[st] + 1; s <= published[st]; s++ {
					r, l := p.received[st][s], p.lost[st][s]
					if r == l {
						rt.Fatalf("%s: %s seq %d received=%v lost=%v (want exactly one)", p.s.ID(), st, s, r, l)
					}
				}
			}
		}
	})
}
