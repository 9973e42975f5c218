package derive_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/derive"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/binance"
	"github.com/fanoutd/fanoutd/venues/bybit"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/okx"
)

var decoders = map[string]func(venue.Config) venue.Decoder{
	"binance":  func(c venue.Config) venue.Decoder { return binance.NewDecoder(c) },
	"bybit":    func(c venue.Config) venue.Decoder { return bybit.NewDecoder(c) },
	"okx":      func(c venue.Config) venue.Decoder { return okx.NewDecoder(c) },
	"coinbase": func(c venue.Config) venue.Decoder { return coinbase.NewDecoder(c) },
	"kraken":   func(c venue.Config) venue.Decoder { return kraken.NewDecoder(c) },
}

type collect struct {
	events  []*venue.Event
	notices []notice.Notice
}

func (c *collect) Event(ev *venue.Event)  { c.events = append(c.events, ev.Clone()) }
func (c *collect) Notice(n notice.Notice) { c.notices = append(c.notices, n) }

// captureEvents replays testdata/replay/<name>.jsonl.gz and returns its
// events in order.
func captureEvents(t *testing.T, name string) []*venue.Event {
	t.Helper()
	var c collect
	_, err := replay.Play(context.Background(), replay.PlayerOptions{
		NewDecoder: func(_ string, s venue.Sink) (venue.Decoder, error) { return decoders[name](venue.Config{Sink: s}), nil },
		Sink:       func(string) (venue.Sink, error) { return &c, nil },
	}, []replay.Source{replay.FileSource(filepath.Join("..", "testdata", "replay", name+".jsonl.gz"), "")})
	if err != nil {
		t.Fatal(err)
	}
	return c.events
}

// streamsOf returns the streams of channel ch among evs, sorted.
func streamsOf(evs []*venue.Event, ch venue.Channel) []venue.Stream {
	var out []venue.Stream
	for _, ev := range evs {
		if ev.Stream.Channel() == ch && !slices.Contains(out, ev.Stream) {
			out = append(out, ev.Stream)
		}
	}
	slices.Sort(out)
	return out
}

// emitted is one derived message and how many source events had been
// applied to the book when it was emitted.
type emitted struct {
	out     derive.Out
	applied int
}

// drive feeds src's events to d as a feed does (Advance, apply, Apply),
// then closes every interval, and returns what d emitted.
func drive(t *testing.T, d derive.Deriver, evs []*venue.Event) []emitted {
	t.Helper()
	var out []emitted
	book := &venue.Book{}
	n := 0
	emit := func(o derive.Out) { out = append(out, emitted{o, n}) }
	for _, ev := range evs {
		if ev.Stream != d.Source() {
			continue
		}
		d.Advance(ev.RecvTime, book, emit)
		book.Apply(ev)
		n++
		d.Apply(ev, book, emit)
	}
	d.Advance(time.Unix(1<<40, 0), book, emit)
	return out
}

func sourceEvents(evs []*venue.Event, src venue.Stream) []*venue.Event {
	var out []*venue.Event
	for _, ev := range evs {
		if ev.Stream == src {
			out = append(out, ev)
		}
	}
	return out
}

func top(b *venue.Book, s venue.BookSide, d int) []venue.Level { return b.Top(nil, s, d) }

func eqLevels(a, b []venue.Level) bool {
	return slices.EqualFunc(a, b, func(x, y venue.Level) bool { return x.Price.Equal(y.Price) && x.Size.Equal(y.Size) })
}

var captures = []string{"binance", "bybit", "okx", "coinbase", "kraken"}

// TestBookSnapshotsOnCaptures: every book_snapshot message equals the top d
// levels of the book after the last event received before its time, and
// the messages are exactly those of an independent computation (one at the
// end of each interval in which events came, when the top differs from the
// last one sent).
func TestBookSnapshotsOnCaptures(t *testing.T) {
	for _, name := range captures {
		evs := captureEvents(t, name)
		for _, src := range streamsOf(evs, venue.Level2) {
			sevs := sourceEvents(evs, src)
			for _, ch := range []string{"book_snapshot_10_100ms", "book_snapshot_1_1ms", "book_snapshot_25_10ms", "book_snapshot_1000_50ms", "book_snapshot_5_0ms", "book_snapshot_3_7ms"} {
				id := venue.Stream(src.Venue() + ":" + ch + ":" + src.Symbol())
				t.Run(string(id), func(t *testing.T) {
					der, err := venue.Channel(ch).Derivation()
					if err != nil {
						t.Fatal(err)
					}
					d, err := derive.New(id)
					if err != nil {
						t.Fatal(err)
					}
					got := drive(t, d, evs)
					want := independentSnapshots(sevs, der.Depth, der.Interval)
					if len(got) != len(want) {
						t.Fatalf("%d snapshots, want %d", len(got), len(want))
					}
					if len(got) < 2 {
						t.Fatalf("only %d snapshots: the capture does not exercise the stream", len(got))
					}
					book := &venue.Book{}
					n := 0
					for i, g := range got {
						ev := g.out.Event
						if ev == nil || ev.Kind != venue.KindBook || !ev.Snapshot || ev.Stream != id {
							t.Fatalf("message %d: %+v, want a book snapshot of %s", i, g.out, id)
						}
						for ; n < g.applied; n++ {
							book.Apply(sevs[n])
						}
						// The book after the last event before its time.
						if der.Interval > 0 {
							if n > 0 && !sevs[n-1].RecvTime.Before(ev.RecvTime) || n < len(sevs) && sevs[n].RecvTime.Before(ev.RecvTime) {
								t.Fatalf("message %d at %v: emitted after %d events, not the last before its time", i, ev.RecvTime, n)
							}
							if ev.RecvTime.UnixNano()%int64(der.Interval) != 0 {
								t.Fatalf("message %d at %v: not at an interval boundary", i, ev.RecvTime)
							}
						}
						if !eqLevels(ev.Bids, top(book, venue.Bid, der.Depth)) || !eqLevels(ev.Asks, top(book, venue.Ask, der.Depth)) {
							t.Fatalf("message %d at %v: not the top %d levels of the book", i, ev.RecvTime, der.Depth)
						}
						w := want[i]
						if !ev.RecvTime.Equal(w.at) || !eqLevels(ev.Bids, w.bids) || !eqLevels(ev.Asks, w.asks) {
							t.Fatalf("message %d at %v: differs from the independent computation's (at %v)", i, ev.RecvTime, w.at)
						}
						if i > 0 && !ev.RecvTime.After(got[i-1].out.Event.RecvTime) && der.Interval > 0 {
							t.Fatalf("message %d: two in one interval", i)
						}
					}
				})
			}
		}
	}
}

type snap struct {
	at         time.Time
	bids, asks []venue.Level
}

// independentSnapshots computes the snapshots of depth d every interval
// from the events of one level2 stream, by the definition: at the end of an
// interval in which events came (or on every event, for interval 0), the
// top d levels, if they differ from the last snapshot.
func independentSnapshots(evs []*venue.Event, d int, interval time.Duration) []snap {
	var out []snap
	book := &venue.Book{}
	add := func(at time.Time) {
		b, a := top(book, venue.Bid, d), top(book, venue.Ask, d)
		if len(out) > 0 && eqLevels(b, out[len(out)-1].bids) && eqLevels(a, out[len(out)-1].asks) {
			return
		}
		out = append(out, snap{at, b, a})
	}
	var end time.Time // end of the interval of the last event
	for _, ev := range evs {
		if interval > 0 && !end.IsZero() && !ev.RecvTime.Before(end) {
			add(end)
		}
		book.Apply(ev)
		if interval == 0 {
			add(ev.RecvTime)
			continue
		}
		e := time.Unix(0, ev.RecvTime.UnixNano()/int64(interval)*int64(interval)).Add(interval)
		if e.After(end) {
			end = e
		}
	}
	if interval > 0 && !end.IsZero() {
		add(end)
	}
	return out
}

// TestQuotesOnCaptures: every quote equals the top of the book, and there
// is one on every change of the top and on no other event.
func TestQuotesOnCaptures(t *testing.T) {
	for _, name := range captures {
		evs := captureEvents(t, name)
		for _, src := range streamsOf(evs, venue.Level2) {
			id := venue.NewStream(src.Venue(), venue.Quote, src.Symbol())
			t.Run(string(id), func(t *testing.T) {
				d, err := derive.New(id)
				if err != nil {
					t.Fatal(err)
				}
				got := drive(t, d, evs)
				sevs := sourceEvents(evs, src)
				book := &venue.Book{}
				var prev [2]venue.Level
				want := 0
				for n, ev := range sevs {
					book.Apply(ev)
					b, _ := book.Best(venue.Bid)
					a, _ := book.Best(venue.Ask)
					if n > 0 && b.Price.Equal(prev[0].Price) && b.Size.Equal(prev[0].Size) && a.Price.Equal(prev[1].Price) && a.Size.Equal(prev[1].Size) {
						continue
					}
					prev = [2]venue.Level{b, a}
					if want >= len(got) {
						t.Fatalf("event %d changed the top, and no quote came", n)
					}
					g := got[want]
					q := g.out.Event
					if g.applied != n+1 || q.Kind != venue.KindQuote || q.Stream != id {
						t.Fatalf("quote %d: after %d events, want after event %d (%+v)", want, g.applied, n+1, q)
					}
					if !q.Bid.Equal(b.Price) || !q.BidSize.Equal(b.Size) || !q.Ask.Equal(a.Price) || !q.AskSize.Equal(a.Size) {
						t.Fatalf("quote %d: %s %s / %s %s, want the top %s %s / %s %s", want, q.Bid, q.BidSize, q.Ask, q.AskSize, b.Price, b.Size, a.Price, a.Size)
					}
					want++
				}
				if want != len(got) || want < 2 {
					t.Fatalf("%d quotes, want %d (at least 2)", len(got), want)
				}
			})
		}
	}
}

// TestTradeBarsOnCaptures: the bars equal an independent computation from
// the trades, grouped by interval of receive time.
func TestTradeBarsOnCaptures(t *testing.T) {
	for _, name := range captures {
		evs := captureEvents(t, name)
		srcs := streamsOf(evs, venue.Trades)
		if len(srcs) == 0 {
			t.Logf("%s: no trades in the capture", name)
		}
		for _, src := range srcs {
			for _, iv := range []string{"1ms", "10ms", "100ms", "1s", "1m"} {
				id := venue.Stream(src.Venue() + ":trade_bar_" + iv + ":" + src.Symbol())
				t.Run(string(id), func(t *testing.T) {
					d, err := derive.New(id)
					if err != nil {
						t.Fatal(err)
					}
					der, _ := id.Channel().Derivation()
					got := drive(t, d, evs)
					want := independentBars(sourceEvents(evs, src), der.Interval)
					if len(got) != len(want) {
						t.Fatalf("%d bars, want %d", len(got), len(want))
					}
					for i, g := range got {
						if g.out.Bar == nil {
							t.Fatalf("message %d is not a bar", i)
						}
						if a, b := barString(g.out.Bar), barString(want[i]); a != b {
							t.Fatalf("bar %d:\n got %s\nwant %s", i, a, b)
						}
					}
				})
			}
		}
	}
}

func barString(b *derive.Bar) string {
	return fmt.Sprintf("%v–%v o=%s h=%s l=%s c=%s v=%s bv=%s sv=%s n=%d first=%v last=%v gap=%v",
		b.Start.UnixNano(), b.End.UnixNano(), b.Open, b.High, b.Low, b.Close, b.Volume, b.BuyVolume, b.SellVolume, b.Trades,
		b.FirstTrade.UnixNano(), b.LastTrade.UnixNano(), b.Gap)
}

func independentBars(trades []*venue.Event, interval time.Duration) []*derive.Bar {
	var out []*derive.Bar
	byStart := map[int64][]*venue.Event{}
	var starts []int64
	for _, tr := range trades {
		s := tr.RecvTime.UnixNano() / int64(interval) * int64(interval)
		if byStart[s] == nil {
			starts = append(starts, s)
		}
		byStart[s] = append(byStart[s], tr)
	}
	slices.Sort(starts)
	for _, s := range starts {
		ts := byStart[s]
		b := &derive.Bar{Start: time.Unix(0, s), End: time.Unix(0, s).Add(interval), Trades: len(ts)}
		b.Open, b.Close = ts[0].Price, ts[len(ts)-1].Price
		b.High, b.Low = ts[0].Price, ts[0].Price
		for _, tr := range ts {
			b.High, b.Low = decimal.Max(b.High, tr.Price), decimal.Min(b.Low, tr.Price)
			b.Volume = b.Volume.Add(tr.Size)
			if tr.Side == venue.SideBuy {
				b.BuyVolume = b.BuyVolume.Add(tr.Size)
			} else if tr.Side == venue.SideSell {
				b.SellVolume = b.SellVolume.Add(tr.Size)
			}
		}
		at := func(e *venue.Event) time.Time {
			if e.VenueTime.IsZero() {
				return e.RecvTime
			}
			return e.VenueTime
		}
		b.FirstTrade, b.LastTrade = at(ts[0]), at(ts[len(ts)-1])
		out = append(out, b)
	}
	return out
}

// syntheticTrades returns n trades of stream src with random prices,
// sizes, sides and gaps between receive times (some far longer than an
// interval), from seed.
func syntheticTrades(src venue.Stream, n int, seed uint64) []*venue.Event {
	r := rand.New(rand.NewPCG(seed, 1))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := make([]*venue.Event, n)
	for i := range out {
		switch r.IntN(10) {
		case 0:
			at = at.Add(time.Duration(r.IntN(5000)) * time.Millisecond)
		default:
			at = at.Add(time.Duration(r.IntN(3000)) * time.Microsecond)
		}
		ev := &venue.Event{Kind: venue.KindTrade, Stream: src, RecvTime: at, TradeID: fmt.Sprint(i),
			Price: decimal.New(int64(100000+r.IntN(2000)), -2), Size: decimal.New(int64(1+r.IntN(100000)), -5), Side: venue.Side(r.IntN(3))}
		if r.IntN(4) > 0 {
			ev.VenueTime = at.Add(-time.Duration(r.IntN(1000)) * time.Microsecond)
		}
		out[i] = ev
	}
	return out
}

// TestTradeBarsSynthetic: the testdata captures hold no trades, so the
// bars are checked on generated trade streams against the independent
// computation.
func TestTradeBarsSynthetic(t *testing.T) {
	src := venue.Stream("okx:trades:BTC-USDT")
	for seed := uint64(1); seed <= 5; seed++ {
		trades := syntheticTrades(src, 5000, seed)
		for _, iv := range []string{"1ms", "10ms", "100ms", "1s", "1m"} {
			id := venue.Stream("okx:trade_bar_" + iv + ":BTC-USDT")
			d, err := derive.New(id)
			if err != nil {
				t.Fatal(err)
			}
			der, _ := id.Channel().Derivation()
			got := drive(t, d, trades)
			want := independentBars(trades, der.Interval)
			if len(got) != len(want) || len(got) < 2 {
				t.Fatalf("seed %d %s: %d bars, want %d (at least 2)", seed, iv, len(got), len(want))
			}
			for i, g := range got {
				if a, b := barString(g.out.Bar), barString(want[i]); a != b {
					t.Fatalf("seed %d %s: bar %d:\n got %s\nwant %s", seed, iv, i, a, b)
				}
			}
		}
	}
}

// TestTradeBarGap: a bar whose interval spans a link drop is marked, the
// next is not.
func TestTradeBarGap(t *testing.T) {
	d, _ := derive.New("okx:trade_bar_1s:BTC-USDT")
	var bars []*derive.Bar
	emit := func(o derive.Out) { bars = append(bars, o.Bar) }
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := func(at time.Time) *venue.Event {
		return &venue.Event{Kind: venue.KindTrade, Stream: "okx:trades:BTC-USDT", RecvTime: at, Price: decimal.New(1, 0), Size: decimal.New(1, 0)}
	}
	d.Apply(tr(t0.Add(100*time.Millisecond)), nil, emit)
	d.Break(t0.Add(200 * time.Millisecond))               // during an open bar
	d.Apply(tr(t0.Add(1100*time.Millisecond)), nil, emit) // closes it
	d.Advance(t0.Add(2*time.Second), nil, emit)
	d.Break(t0.Add(2100 * time.Millisecond))              // between bars
	d.Apply(tr(t0.Add(2500*time.Millisecond)), nil, emit) // opens one spanning it
	d.Apply(tr(t0.Add(3500*time.Millisecond)), nil, emit)
	d.Advance(t0.Add(10*time.Second), nil, emit)
	if len(bars) != 4 {
		t.Fatalf("%d bars, want 4", len(bars))
	}
	for i, want := range []bool{true, false, true, false} {
		if bars[i].Gap != want {
			t.Errorf("bar %d gap %v, want %v", i, bars[i].Gap, want)
		}
	}
}
