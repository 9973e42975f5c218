package binance_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance"
)

const testdata venuetest.Dir = "../../testdata/venues/binance"

// snapshotFrame wraps a REST depth body as the adapter records it.
func snapshotFrame(lower string, body []byte) []byte {
	return []byte(`{"stream":"` + lower + `@depthSnapshot","generated":true,"data":` + string(body) + `}`)
}

// naiveBook rebuilds a book the slow, obvious way: encoding/json and
// decimal.NewFromString, the snapshot, then every event with u past it.
func naiveBook(t *testing.T, snap []byte, events [][]byte, symbol string) (*venue.Book, int64, int) {
	t.Helper()
	var s struct {
		LastUpdateID int64       `json:"lastUpdateId"`
		Bids         [][2]string `json:"bids"`
		Asks         [][2]string `json:"asks"`
	}
	if err := json.Unmarshal(snap, &s); err != nil {
		t.Fatal(err)
	}
	b := &venue.Book{}
	set := func(side venue.BookSide, l [2]string) {
		b.Set(side, decimal.RequireFromString(l[0]), decimal.RequireFromString(l[1]))
	}
	for _, l := range s.Bids {
		set(venue.Bid, l)
	}
	for _, l := range s.Asks {
		set(venue.Ask, l)
	}
	last, applied := s.LastUpdateID, 0
	for _, f := range events {
		var ev struct {
			Data struct {
				S    string      `json:"s"`
				U    int64       `json:"U"`
				LowU int64       `json:"u"`
				B    [][2]string `json:"b"`
				A    [][2]string `json:"a"`
			} `json:"data"`
		}
		if err := json.Unmarshal(f, &ev); err != nil {
			t.Fatal(err)
		}
		d := ev.Data
		if d.S != symbol || d.LowU <= last {
			continue
		}
		if d.U > last+1 {
			t.Fatalf("%s: capture has a gap at U=%d after %d", symbol, d.U, last)
		}
		for _, l := range d.B {
			set(venue.Bid, l)
		}
		for _, l := range d.A {
			set(venue.Ask, l)
		}
		last = d.LowU
		applied++
	}
	return b, last, applied
}

// TestGoldenBridge replays the real 2021 capture: for each symbol the REST
// snapshot arrives after the symbol's first websocket event (which it
// buffers, then discards as older than lastUpdateId), and every later event
// must chain. The decoder's book must equal the naive rebuild, with no
// resync and no bad frame.
func TestGoldenBridge(t *testing.T) {
	events := testdata.Frames(t, "ws_depth_diff_all_2021.jsonl")
	for _, sym := range []string{"BLZETH", "LRCBTC", "RUNEEUR"} {
		t.Run(sym, func(t *testing.T) {
			snap := testdata.Frames(t, "rest_depth_snapshot_"+sym+"_2021.jsonl")[0]
			lower := strings.ToLower(sym)
			sink := venuetest.NewSink()
			d := binance.NewDecoder(venue.Config{Sink: sink})
			recv := time.Date(2021, 10, 12, 0, 28, 34, 0, time.UTC)
			sent := false
			for _, f := range events {
				recv = recv.Add(time.Millisecond)
				d.Frame(recv, f)
				if !sent && bytes.Contains(f, []byte(`"`+lower+`@depth@100ms"`)) {
					d.Frame(recv, snapshotFrame(lower, snap))
					sent = true
				}
			}
			want, last, applied := naiveBook(t, snap, events, sym)
			l2 := venue.NewStream("binance", venue.Level2, sym)
			got := sink.Book(l2)
			if !got.Equal(want) {
				t.Fatalf("book differs from the naive rebuild (bids %d/%d asks %d/%d)",
					got.Len(venue.Bid), want.Len(venue.Bid), got.Len(venue.Ask), want.Len(venue.Ask))
			}
			var updates int
			var lastSeq int64
			for _, e := range sink.Events() {
				if e.Stream == l2 && !e.Snapshot {
					updates++
					lastSeq = e.VenueSeq
				}
			}
			if updates != applied || (applied > 0 && lastSeq != last) {
				t.Errorf("%d updates ending at u=%d, want %d ending at %d", updates, lastSeq, applied, last)
			}
			for _, n := range sink.NoticesExcept(notice.CoverageChange) {
				t.Errorf("unexpected notice %s: %s", n.Kind, n.Message)
			}
			if d.BadFrames() != 0 {
				t.Errorf("%d bad frames", d.BadFrames())
			}
			sink.Check(t)
		})
	}
}

// TestGoldenLevels spot-checks levels the capture changes, against values
// read off the frames by hand.
func TestGoldenLevels(t *testing.T) {
	sink := venuetest.NewSink()
	d := binance.NewDecoder(venue.Config{Sink: sink})
	now := time.Now()
	for _, sym := range []string{"BLZETH", "LRCBTC", "RUNEEUR"} {
		d.Frame(now, snapshotFrame(strings.ToLower(sym), testdata.Frames(t, "rest_depth_snapshot_"+sym+"_2021.jsonl")[0]))
	}
	for _, f := range testdata.Frames(t, "ws_depth_diff_all_2021.jsonl") {
		d.Frame(now, f)
	}
	for _, c := range []struct {
		sym         string
		side        venue.BookSide
		price, size string // size "" means absent
	}{
		{"BLZETH", venue.Bid, "0.00006540", "170"},    // U=281916638
		{"BLZETH", venue.Bid, "0.00006542", "5562"},   // U=281916630
		{"BLZETH", venue.Bid, "0.00006537", ""},       // removed at U=281916629
		{"BLZETH", venue.Ask, "0.00006615", ""},       // set then removed at U=281916633
		{"LRCBTC", venue.Ask, "0.00000639", "45096"},  // U=259345563
		{"LRCBTC", venue.Bid, "0.00000637", "2500"},   // U=259345558
		{"LRCBTC", venue.Ask, "0.00000641", "71538"},  // U=259345550
		{"RUNEEUR", venue.Bid, "6.24800000", "48"},    // U=15602512
		{"RUNEEUR", venue.Bid, "6.08400000", "414.3"}, // re-added at U=15602512
		{"RUNEEUR", venue.Bid, "6.25100000", "69.3"},  // from the snapshot
	} {
		b := sink.Book(venue.NewStream("binance", venue.Level2, c.sym))
		got, ok := b.Get(c.side, decimal.RequireFromString(c.price))
		switch {
		case c.size == "" && ok:
			t.Errorf("%s %s: level present (%s), want removed", c.sym, c.price, got)
		case c.size != "" && (!ok || !got.Equal(decimal.RequireFromString(c.size))):
			t.Errorf("%s %s = %s (present %v), want %s", c.sym, c.price, got, ok, c.size)
		}
	}
	// The first events of each symbol arrived after its snapshot here and
	// are older than it: ignored, not gaps.
	for _, n := range sink.NoticesExcept(notice.CoverageChange) {
		t.Errorf("unexpected notice %s: %s", n.Kind, n.Message)
	}
}

// TestGoldenTradeAndTicker decodes the real bookTicker frames and the docs'
// trade example; aggTrade (not subscribed) is ignored without complaint.
func TestGoldenTradeAndTicker(t *testing.T) {
	sink := venuetest.NewSink()
	d := binance.NewDecoder(venue.Config{Sink: sink})
	now := time.Now()
	tickers := testdata.Frames(t, "ws_bookTicker_2021.jsonl")
	for _, f := range tickers {
		d.Frame(now, f)
	}
	for _, f := range testdata.Frames(t, "ws_aggTrade_2021.jsonl") {
		d.Frame(now, f)
	}
	for _, f := range testdata.Frames(t, "doc_trade_2026.jsonl") {
		d.Frame(now, f)
	}
	evs := sink.Events()
	if len(evs) != len(tickers)+1 {
		t.Fatalf("%d events, want %d", len(evs), len(tickers)+1)
	}
	tk := evs[0]
	if tk.Stream != "binance:ticker:NKNUSDT" || !tk.Bid.Equal(decimal.RequireFromString("0.3521")) ||
		!tk.BidSize.Equal(decimal.RequireFromString("672")) || !tk.Ask.Equal(decimal.RequireFromString("0.3526")) ||
		!tk.AskSize.Equal(decimal.RequireFromString("3199")) || tk.Last.Valid {
		t.Errorf("first ticker = %+v", tk)
	}
	tr := evs[len(evs)-1]
	if tr.Stream != "binance:trades:BNBBTC" || tr.TradeID != "12345" || tr.Side != venue.SideSell ||
		!tr.Price.Equal(decimal.RequireFromString("0.001")) || !tr.Size.Equal(decimal.RequireFromString("100")) ||
		!tr.VenueTime.Equal(time.UnixMilli(1672515782136)) {
		t.Errorf("trade = %+v", tr)
	}
	if d.BadFrames() != 0 {
		t.Errorf("%d bad frames", d.BadFrames())
	}
	for _, n := range sink.NoticesExcept(notice.CoverageChange) {
		if n.Kind == notice.DataQuality {
			t.Errorf("data_quality: %s", n.Message)
		}
	}
	sink.Check(t)
}
