package bybit_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/bybit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/venues/bybit/golden")

const testdata venuetest.Dir = "../../testdata/venues/bybit"

// recv0 is the receive time of a capture's first frame; frame i is
// received i ms later.
var recv0 = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)

// decode runs the frames through a fresh decoder into a recording sink.
func decode(depth int, frames [][]byte) (*venuetest.Sink, *bybit.Decoder) {
	d, sink := venuetest.Decode(bybit.NewDecoder, venue.Config{Depth: depth}, recv0, time.Millisecond, frames...)
	return sink, d
}

// refBook is an independent reading of Bybit book frames with
// encoding/json and decimal.NewFromString, to check the decoder against.
func refBook(t *testing.T, frames [][]byte, topic string) *venue.Book {
	t.Helper()
	b := &venue.Book{}
	for _, f := range frames {
		var m struct {
			Topic string
			Type  string
			Data  struct {
				B, A [][2]string
			}
		}
		if json.Unmarshal(f, &m) != nil || m.Topic != topic {
			continue
		}
		ev := &venue.Event{Kind: venue.KindBook, Snapshot: m.Type == "snapshot"}
		conv := func(in [][2]string) []venue.Level {
			var out []venue.Level
			for _, l := range in {
				out = append(out, venue.Level{Price: decimal.RequireFromString(l[0]), Size: decimal.RequireFromString(l[1])})
			}
			return out
		}
		ev.Bids, ev.Asks = conv(m.Data.B), conv(m.Data.A)
		b.Apply(ev)
	}
	return b
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestGoldenLinearSnapshotDelta(t *testing.T) {
	frames := testdata.Frames(t, "orderbook50_linear_BTCUSDT_2026_snapshot_delta.jsonl")
	sink, d := decode(50, frames)
	sink.Check(t)
	st := venue.NewStream("bybit", venue.Level2, "BTCUSDT")
	if st != "bybit:level2:BTCUSDT" {
		t.Fatalf("stream = %q", st)
	}
	got := sink.Book(st)
	if want := refBook(t, frames, "orderbook.50.BTCUSDT"); !got.Equal(want) {
		t.Fatal("decoded book differs from the reference reading of the frames")
	}
	if got.Len(venue.Bid) != 50 || got.Len(venue.Ask) != 50 {
		t.Errorf("levels = %d/%d, want 50/50", got.Len(venue.Bid), got.Len(venue.Ask))
	}
	for _, c := range []struct {
		side        venue.BookSide
		price, size string
	}{
		{venue.Bid, "63982.70", "6.408"}, // best bid, from the snapshot
		{venue.Bid, "63982.50", "0.003"}, // the delta's changes
		{venue.Bid, "63980.60", "0.004"},
		{venue.Ask, "63990.50", "0.008"},
		{venue.Ask, "63982.80", "5.015"},
	} {
		if sz, ok := got.Get(c.side, dec(c.price)); !ok || !sz.Equal(dec(c.size)) {
			t.Errorf("size at %s = %v (present %v), want %s", c.price, sz, ok, c.size)
		}
	}
	evs := sink.Events()
	if len(evs) != 2 || !evs[0].Snapshot || evs[1].Snapshot || evs[0].VenueSeq != 53935309 || evs[1].VenueSeq != 53935310 {
		t.Fatalf("events = %d, want a snapshot (u 53935309) then an update (u 53935310)", len(evs))
	}
	if want := time.UnixMilli(1786540345147); !evs[1].VenueTime.Equal(want) {
		t.Errorf("venue time = %v, want cts %v", evs[1].VenueTime, want)
	}
	if s := d.Stats(); s.BadFrames != 0 || s.DroppedUpdates != 0 {
		t.Errorf("stats = %+v", s)
	}
	testdata.Golden(t, "golden/"+"orderbook50_linear.golden.jsonl", sink.AppendJSONLines(nil), *update)
}

func TestGoldenSpotTardis(t *testing.T) {
	frames := testdata.Frames(t, "orderbook_spot_v5_tardis_fixture.jsonl")
	sink, _ := decode(50, frames)
	sink.Check(t)
	b := sink.Book("bybit:level2:BTCUSDT")
	if want := refBook(t, frames, "orderbook.50.BTCUSDT"); !b.Equal(want) {
		t.Fatal("book differs from the reference reading")
	}
	if b.Len(venue.Bid) != 2 || b.Len(venue.Ask) != 1 {
		t.Fatalf("levels = %d/%d, want 2/1", b.Len(venue.Bid), b.Len(venue.Ask))
	}
	// orderbook.1 is the ticker: its snapshot, then its delta's new bid size.
	var tk []*venue.Event
	for _, ev := range sink.Events() {
		if ev.Kind == venue.KindTicker {
			tk = append(tk, ev)
		}
	}
	if len(tk) != 2 {
		t.Fatalf("tickers = %d, want 2", len(tk))
	}
	if !tk[0].Bid.Equal(dec("28165.07")) || !tk[0].BidSize.Equal(dec("0.175231")) || !tk[0].Ask.Equal(dec("28165.08")) ||
		!tk[1].BidSize.Equal(dec("0.166754")) || !tk[1].AskSize.Equal(dec("0.996816")) || tk[1].Last.Valid {
		t.Errorf("tickers = %+v %+v", tk[0], tk[1])
	}
	testdata.Golden(t, "golden/"+"spot_tardis.golden.jsonl", sink.AppendJSONLines(nil), *update)
}

func TestGoldenOrderbook1Ticker(t *testing.T) {
	sink, d := decode(50, testdata.Frames(t, "orderbook1_spot_BTCUSDT_2026.jsonl"))
	sink.Check(t)
	evs := sink.Events()
	if len(evs) != 2 {
		t.Fatalf("events = %d, want 2 tickers", len(evs))
	}
	for _, ev := range evs {
		if ev.Stream != "bybit:ticker:BTCUSDT" || ev.Kind != venue.KindTicker {
			t.Fatalf("event on %s kind %v", ev.Stream, ev.Kind)
		}
	}
	if !evs[1].Bid.Equal(dec("63705.3")) || !evs[1].BidSize.Equal(dec("2.014151")) || !evs[1].Ask.Equal(dec("63705.4")) || !evs[1].AskSize.Equal(dec("2.334566")) {
		t.Errorf("second ticker = %+v", evs[1])
	}
	if d.Stats().BadFrames != 0 {
		t.Errorf("control frames counted bad: %+v", d.Stats())
	}
	testdata.Golden(t, "golden/"+"orderbook1_ticker.golden.jsonl", sink.AppendJSONLines(nil), *update)

	// With depth 1, orderbook.1 is also the level2 stream.
	sink, _ = decode(1, testdata.Frames(t, "orderbook1_spot_BTCUSDT_2026.jsonl"))
	sink.Check(t)
	b := sink.Book("bybit:level2:BTCUSDT")
	if sz, ok := b.Get(venue.Bid, dec("63705.3")); !ok || !sz.Equal(dec("2.014151")) || b.Len(venue.Bid) != 1 {
		t.Errorf("depth-1 level2 book wrong: %v %v", sz, ok)
	}
}

func TestGoldenTrades(t *testing.T) {
	sink, d := decode(50, testdata.Frames(t, "publicTrade_spot.jsonl"))
	sink.Check(t)
	evs := sink.Events()
	if len(evs) != 6 {
		t.Fatalf("trades = %d, want 6", len(evs))
	}
	e := evs[0]
	if e.Stream != "bybit:trades:BTCUSDT" || e.TradeID != "2290000001190010749" || !e.Price.Equal(dec("64103.9")) ||
		!e.Size.Equal(dec("0.001683")) || e.Side != venue.SideSell || !e.VenueTime.Equal(time.UnixMilli(1786538700967)) {
		t.Errorf("first trade = %+v", e)
	}
	if e := evs[5]; e.Side != venue.SideBuy || e.TradeID != "20f43950-d8dd-5b31-9112-a178eb6023af" {
		t.Errorf("last trade = %+v", e)
	}
	if d.Stats().BadFrames != 0 {
		t.Errorf("stats = %+v", d.Stats())
	}
	testdata.Golden(t, "golden/"+"trades.golden.jsonl", sink.AppendJSONLines(nil), *update)
}

func TestGoldenQuietFiles(t *testing.T) {
	// Spot tickers (no bid/ask: not decoded), control frames and a delta
	// with no snapshot before it: no events and nothing counted bad.
	for _, name := range []string{"tickers_spot.jsonl", "control_ping_ack_errors.jsonl", "orderbook_doc_delta.jsonl"} {
		sink, d := decode(50, testdata.Frames(t, name))
		if n := sink.NumEvents(); n != 0 {
			t.Errorf("%s: %d events, want 0", name, n)
		}
		if n := sink.NumNotices(); n != 0 {
			t.Errorf("%s: %d notices, want 0", name, n)
		}
		if d.Stats().BadFrames != 0 {
			t.Errorf("%s: stats %+v", name, d.Stats())
		}
	}
	_, d := decode(50, testdata.Frames(t, "orderbook_doc_delta.jsonl"))
	if d.Stats().DroppedUpdates != 1 {
		t.Errorf("delta before a snapshot: stats %+v, want 1 dropped", d.Stats())
	}
}

// TestGapOnRealFrames: a delta whose u skips is not applied; the decoder
// says book_resync with the sequence numbers and asks for nothing more
// until a snapshot (replay has no link to resubscribe on).
func TestGapOnRealFrames(t *testing.T) {
	frames := testdata.Frames(t, "orderbook50_linear_BTCUSDT_2026_snapshot_delta.jsonl")
	frames[1] = bytes.Replace(frames[1], []byte(`"u":53935310`), []byte(`"u":53935311`), 1)
	frames = append(frames, frames[0]) // the venue's fresh snapshot
	sink, _ := decode(50, frames)
	sink.Check(t)
	ns := sink.NoticesExcept(notice.CoverageChange)
	if len(ns) != 1 || ns[0].Kind != notice.BookResync || ns[0].Stream != "bybit:level2:BTCUSDT" {
		t.Fatalf("notices = %+v, want one book_resync", ns)
	}
	dt := ns[0].Details
	if dt["reason"] != "gap" || dt["last_u"] != int64(53935309) || dt["got_u"] != int64(53935311) {
		t.Errorf("details = %v", dt)
	}
	evs := sink.Events()
	if len(evs) != 2 || !evs[0].Snapshot || !evs[1].Snapshot {
		t.Fatalf("want snapshot, (gap dropped), snapshot; got %d events", len(evs))
	}
}

// TestResetOnUOne: u == 1 overwrites the book, with no resync.
func TestResetOnUOne(t *testing.T) {
	frames := testdata.Frames(t, "orderbook_spot_v5_tardis_fixture.jsonl")[2:4]
	reset := []byte(`{"topic":"orderbook.50.BTCUSDT","ts":1680652809000,"type":"delta","data":{"s":"BTCUSDT","b":[["28100.00","1.5"]],"a":[["28200.00","2"]],"u":1,"seq":4281282300}}`)
	next := []byte(`{"topic":"orderbook.50.BTCUSDT","ts":1680652809020,"type":"delta","data":{"s":"BTCUSDT","b":[["28100.5","3"]],"a":[],"u":2,"seq":4281282301}}`)
	sink, _ := decode(50, append(frames, reset, next))
	sink.Check(t)
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 0 {
		t.Fatalf("notices = %v, want none", n)
	}
	b := sink.Book("bybit:level2:BTCUSDT")
	want := &venue.Book{}
	want.Replace([]venue.Level{{Price: dec("28100.5"), Size: dec("3")}, {Price: dec("28100"), Size: dec("1.5")}},
		[]venue.Level{{Price: dec("28200"), Size: dec("2")}})
	if !b.Equal(want) {
		t.Errorf("book after u=1 reset is not the reset book plus the next delta")
	}
}

// TestBadFramesOneNoticePerBurst: truncations of every real frame are
// counted, reported once per burst, and never panic.
func TestBadFramesOneNoticePerBurst(t *testing.T) {
	frames := testdata.Frames(t, "orderbook50_linear_BTCUSDT_2026_snapshot_delta.jsonl")
	sink := venuetest.NewSink()
	d := bybit.NewDecoder(venue.Config{Sink: sink})
	d.Frame(recv0, frames[0])
	n := 0
	for _, f := range frames {
		for cut := 1; cut < len(f); cut += 7 {
			d.Frame(recv0.Add(time.Millisecond), f[:cut])
			n++
		}
	}
	var dq, rs int
	for _, x := range sink.NoticesExcept(notice.CoverageChange) {
		switch x.Kind {
		case notice.DataQuality:
			dq++
		case notice.BookResync:
			rs++
		}
	}
	if dq != 1 || d.Stats().BadFrames != uint64(n) {
		t.Errorf("data_quality notices = %d, bad frames = %d; want 1 and %d", dq, d.Stats().BadFrames, n)
	}
	// A later burst is reported again.
	d.Frame(recv0.Add(time.Minute), []byte("{"))
	if got := len(sink.NoticesExcept(notice.CoverageChange)); got != dq+rs+1 {
		t.Errorf("a new burst gave %d notices in all, want %d", got, dq+rs+1)
	}
	sink.Check(t)
}

// TestGeneratedStreamMatchesReference decodes a long generated level2
// stream and compares the consumer's book with an independent reading.
func TestGeneratedStreamMatchesReference(t *testing.T) {
	frames := genStream(3000, 12)
	sink, d := decode(50, frames)
	sink.Check(t)
	if !sink.Book("bybit:level2:BTCUSDT").Equal(refBook(t, frames, "orderbook.50.BTCUSDT")) {
		t.Fatal("book differs from the reference reading")
	}
	if s := d.Stats(); s.BadFrames != 0 || s.DroppedUpdates != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestTruncateToDepth: a level pushed out of the topic's depth without a
// removal from the venue leaves our book, and the update says so.
func TestTruncateToDepth(t *testing.T) {
	frames := testdata.Frames(t, "orderbook_spot_v5_tardis_fixture.jsonl")[:1]
	better := []byte(`{"topic":"orderbook.1.BTCUSDT","ts":1680652806615,"type":"delta","data":{"s":"BTCUSDT","b":[["28165.075","1"]],"a":[],"u":20404755,"seq":4281281875}}`)
	sink, _ := decode(1, append(frames, better))
	sink.Check(t)
	evs := sink.Events()
	var upd *venue.Event
	for _, ev := range evs {
		if ev.Kind == venue.KindBook && !ev.Snapshot {
			upd = ev
		}
	}
	if upd == nil || len(upd.Bids) != 2 || !upd.Bids[1].Size.IsZero() || !upd.Bids[1].Price.Equal(dec("28165.07")) {
		t.Fatalf("update = %+v, want the new bid and the removal of 28165.07", upd)
	}
	b := sink.Book("bybit:level2:BTCUSDT")
	if b.Len(venue.Bid) != 1 {
		t.Errorf("bids = %d, want 1", b.Len(venue.Bid))
	}
}
