package kraken_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

const testdata venuetest.Dir = "../../testdata/venues/kraken"

var recv = time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)

// decode runs frames through a fresh decoder at depth, frame i received i
// ms after recv, checks the sink's invariants and returns it.
func decode(t testing.TB, depth int, fs ...[]byte) (*venuetest.Sink, *kraken.Decoder) {
	t.Helper()
	d, sink := venuetest.Decode(kraken.NewDecoder, venue.Config{Depth: depth}, recv, time.Millisecond, fs...)
	sink.Check(t)
	return sink, d
}

func noticesOf(s *venuetest.Sink, k notice.Kind) []notice.Notice {
	var out []notice.Notice
	for _, n := range s.Notices() {
		if n.Kind == k {
			out = append(out, n)
		}
	}
	return out
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func levels(pairs ...string) []venue.Level {
	var out []venue.Level
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, venue.Level{Price: dec(pairs[i]), Size: dec(pairs[i+1])})
	}
	return out
}

func bookOf(bids, asks []venue.Level) *venue.Book {
	b := &venue.Book{}
	b.Replace(bids, asks)
	return b
}

func dump(b *venue.Book) string {
	var sb strings.Builder
	for _, s := range []venue.BookSide{venue.Bid, venue.Ask} {
		for _, l := range b.Top(nil, s, 0) {
			fmt.Fprintf(&sb, "%v %s@%s\n", s, l.Size, l.Price)
		}
	}
	return sb.String()
}

// The docs' checksum guide: 3310070434 over string-typed levels, with
// BTC/USD's precisions from the instrument channel.
func TestGoldenChecksumGuide(t *testing.T) {
	fs := append(testdata.Frames(t, "instrument_fixture.jsonl"), testdata.Frames(t, "book_checksum_guide_BTC-USD.jsonl")...)
	sink, d := decode(t, 10, fs...)
	if n := noticesOf(sink, notice.BookResync); len(n) != 0 {
		t.Fatalf("checksum 3310070434 did not verify: %+v", n)
	}
	evs := sink.Events()
	if len(evs) != 1 || !evs[0].Snapshot || evs[0].Stream != "kraken:level2:BTC/USD" {
		t.Fatalf("events = %+v, want one BTC/USD snapshot", evs)
	}
	want := bookOf(
		levels("45283.5", "0.1", "45283.4", "1.54582015", "45282.1", "0.1", "45281.0", "0.1", "45280.3", "1.54592586",
			"45279.0", "0.0799", "45277.6", "0.03310103", "45277.5", "0.3", "45277.3", "1.54602737", "45276.6", "0.15445238"),
		levels("45285.2", "0.001", "45286.4", "1.54571953", "45286.6", "1.54571109", "45289.6", "1.54560911", "45290.2", "0.1589066",
			"45291.8", "1.54553491", "45294.7", "0.04454749", "45296.1", "0.3538", "45297.5", "0.09945542", "45299.5", "0.18772827"))
	if got := sink.Book("kraken:level2:BTC/USD"); !got.Equal(want) {
		t.Fatalf("book:\n%s\nwant:\n%s", dump(got), dump(want))
	}
	if d.BadFrames() != 0 {
		t.Fatalf("bad frames = %d", d.BadFrames())
	}
}

// The docs' MATIC/USD pair verifies only when values are written with the
// instrument's precision (0.566 is 0.5660): with the instrument frame, and
// with precisions inferred from the snapshot when none arrived.
func TestGoldenMATICSnapshotUpdate(t *testing.T) {
	pair := testdata.Frames(t, "book_doc_MATIC-USD_snapshot_update.jsonl")
	for name, fs := range map[string][][]byte{
		"instrument": append(testdata.Frames(t, "instrument_MATIC-USD.jsonl"), pair...),
		"inferred":   pair,
	} {
		t.Run(name, func(t *testing.T) {
			sink, _ := decode(t, 10, fs...)
			if n := noticesOf(sink, notice.BookResync); len(n) != 0 {
				t.Fatalf("checksums 2439117997/2114181697 did not verify: %+v", n)
			}
			evs := sink.Events()
			if len(evs) != 2 || !evs[0].Snapshot || evs[1].Snapshot {
				t.Fatalf("events = %d, want a snapshot and an update", len(evs))
			}
			up := evs[1]
			if len(up.Bids) != 1 || len(up.Asks) != 0 || !up.Bids[0].Price.Equal(dec("0.5657")) || !up.Bids[0].Size.Equal(dec("1098.3947558")) {
				t.Fatalf("update = %+v", up)
			}
			if up.Bids[0].Price.Exponent() != -4 || up.Bids[0].Size.Exponent() != -8 {
				t.Errorf("update exponents %d/%d, want the instrument's -4/-8", up.Bids[0].Price.Exponent(), up.Bids[0].Size.Exponent())
			}
			if want := time.Date(2023, 10, 6, 17, 35, 55, 440295000, time.UTC); !up.VenueTime.Equal(want) {
				t.Errorf("venue time %v, want %v", up.VenueTime, want)
			}
			b := sink.Book("kraken:level2:MATIC/USD")
			if s, ok := b.Get(venue.Bid, dec("0.5657")); !ok || !s.Equal(dec("1098.3947558")) {
				t.Errorf("bid 0.5657 = %v %v", s, ok)
			}
			if b.Len(venue.Bid) != 10 || b.Len(venue.Ask) != 10 {
				t.Errorf("book %d×%d levels, want 10×10", b.Len(venue.Bid), b.Len(venue.Ask))
			}
		})
	}
}

// A 25-level BTC/USD snapshot whose numbers went through a float parser
// (63274.0, 0.0001): 4273381060 verifies with precisions (1, 8).
func TestGoldenFloatParsed25(t *testing.T) {
	obj := testdata.Frames(t, "book_floatparsed_BTC-USD_25lvl.jsonl")[0]
	frame := append(append([]byte(`{"channel":"book","type":"snapshot","data":[`), obj...), "]}"...)
	sink, _ := decode(t, 25, append(testdata.Frames(t, "instrument_fixture.jsonl"), frame)...)
	if n := noticesOf(sink, notice.BookResync); len(n) != 0 {
		t.Fatalf("checksum 4273381060 did not verify: %+v", n)
	}
	b := sink.Book("kraken:level2:BTC/USD")
	if b.Len(venue.Bid) != 25 || b.Len(venue.Ask) != 25 {
		t.Fatalf("book %d×%d, want 25×25", b.Len(venue.Bid), b.Len(venue.Ask))
	}
	if l := b.Level(venue.Ask, 0); !l.Price.Equal(dec("63275.5")) || !l.Size.Equal(dec("7.90395706")) {
		t.Errorf("best ask %v", l)
	}
	// At depth 10 the same snapshot is cut to 10 levels; the checksum
	// covers only the top 10, so it still verifies.
	sink, _ = decode(t, 10, append(testdata.Frames(t, "instrument_fixture.jsonl"), frame)...)
	if n := noticesOf(sink, notice.BookResync); len(n) != 0 {
		t.Fatalf("at depth 10: %+v", n)
	}
	if b := sink.Book("kraken:level2:BTC/USD"); b.Len(venue.Bid) != 10 || b.Len(venue.Ask) != 10 {
		t.Fatalf("depth 10 book %d×%d", b.Len(venue.Bid), b.Len(venue.Ask))
	}
}

// Kraken truncates to the subscribed depth without saying so; our update
// says it: a new best bid pushes the 10th bid out as an explicit removal.
func TestTruncationIsExplicit(t *testing.T) {
	pair := testdata.Frames(t, "book_doc_MATIC-USD_snapshot_update.jsonl")
	snap := pair[0]
	// The book after the update: new best bid 0.5667; 0.5657 falls out.
	sink0, _ := decode(t, 10, snap)
	b := sink0.Book("kraken:level2:MATIC/USD")
	b.Set(venue.Bid, dec("0.5667"), dec("12.5"))
	b.Truncate(nil, venue.Bid, 10)
	ck := krakentest.Checksum(b.Top(nil, venue.Bid, 0), b.Top(nil, venue.Ask, 0), 4, 8)
	up := fmt.Appendf(nil, `{"channel":"book","type":"update","data":[{"symbol":"MATIC/USD","bids":[{"price":0.5667,"qty":12.5}],"asks":[],"checksum":%d,"timestamp":"2023-10-06T17:35:56.000000Z"}]}`, ck)
	sink, _ := decode(t, 10, snap, up)
	if n := noticesOf(sink, notice.BookResync); len(n) != 0 {
		t.Fatalf("resync: %+v", n)
	}
	evs := sink.Events()
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	got := evs[1].Bids
	if len(got) != 2 || !got[0].Price.Equal(dec("0.5667")) || !got[1].Price.Equal(dec("0.5657")) || !got[1].Size.IsZero() {
		t.Fatalf("update bids = %v, want 0.5667 then 0.5657 removed", got)
	}
	if !sink.Book("kraken:level2:MATIC/USD").Equal(b) {
		t.Fatal("consumer book differs from the venue's")
	}
}

// A checksum that does not match stops publishing and names the sums.
func TestChecksumMismatchResyncs(t *testing.T) {
	pair := testdata.Frames(t, "book_doc_MATIC-USD_snapshot_update.jsonl")
	bad := bytes.Replace(pair[1], []byte("2114181697"), []byte("2114181698"), 1)
	sink, _ := decode(t, 10, pair[0], bad, pair[1])
	n := noticesOf(sink, notice.BookResync)
	if len(n) != 1 || n[0].Stream != "kraken:level2:MATIC/USD" || n[0].Details["venue_checksum"] != uint64(2114181698) {
		t.Fatalf("notices = %+v", n)
	}
	if evs := sink.Events(); len(evs) != 1 {
		t.Fatalf("%d events after a mismatch, want only the snapshot", len(evs))
	}
}

func TestGoldenTradeTicker(t *testing.T) {
	sink, d := decode(t, 10, append(testdata.Frames(t, "trade_doc.jsonl"), testdata.Frames(t, "ticker_doc.jsonl")...)...)
	evs := sink.Events()
	if len(evs) != 4 || d.BadFrames() != 0 {
		t.Fatalf("%d events, %d bad frames; want 3 trades and a ticker", len(evs), d.BadFrames())
	}
	tr := evs[2]
	if tr.Kind != venue.KindTrade || tr.Stream != "kraken:trades:MATIC/USD" || tr.TradeID != "4665906" || tr.Side != venue.SideSell ||
		!tr.Price.Equal(dec("0.5117")) || !tr.Size.Equal(dec("40")) || !tr.VenueTime.Equal(time.Date(2023, 9, 25, 7, 49, 37, 708706000, time.UTC)) {
		t.Errorf("trade = %+v", tr)
	}
	tk := evs[3]
	if tk.Kind != venue.KindTicker || tk.Stream != "kraken:ticker:ALGO/USD" || !tk.Bid.Equal(dec("0.10025")) || !tk.BidSize.Equal(dec("740")) ||
		!tk.Ask.Equal(dec("0.10036")) || !tk.AskSize.Equal(dec("1361.44813783")) || !tk.Last.Valid || !tk.Last.Decimal.Equal(dec("0.10035")) {
		t.Errorf("ticker = %+v", tk)
	}
}

// Control frames decode to nothing: no events, no notices, no bad frames.
func TestGoldenControlFrames(t *testing.T) {
	var fs [][]byte
	for _, f := range []string{"heartbeat_status_pong.jsonl", "subscribe_ack_doc.jsonl", "instrument_fixture.jsonl"} {
		fs = append(fs, testdata.Frames(t, f)...)
	}
	sink, d := decode(t, 10, fs...)
	if len(sink.Events()) != 0 || len(sink.Notices()) != 0 || d.BadFrames() != 0 {
		t.Fatalf("events %d notices %+v bad %d", len(sink.Events()), sink.Notices(), d.BadFrames())
	}
}

func TestGoldenRefusal(t *testing.T) {
	sink, _ := decode(t, 10, testdata.Frames(t, "error.jsonl")[0])
	n := noticesOf(sink, notice.Refusal)
	if len(n) != 1 || n[0].Details["symbol"] != "XBT/USD" || n[0].Details["message"] != "Currency pair not supported XBT/USD" {
		t.Fatalf("notices = %+v", sink.Notices())
	}
}

// Bad frames are counted, reported once per burst, and resync the book.
func TestBadFramesReportedOncePerBurst(t *testing.T) {
	pair := testdata.Frames(t, "book_doc_MATIC-USD_snapshot_update.jsonl")
	m := &krakentest.Mock{}
	fs := append([][]byte{pair[0]}, m.Garbage()...)
	sink, d := decode(t, 10, fs...)
	if q := noticesOf(sink, notice.DataQuality); len(q) != 1 {
		t.Fatalf("data_quality notices = %d, want 1 for the burst", len(q))
	}
	if d.BadFrames() != uint64(len(m.Garbage())) {
		t.Fatalf("bad frames = %d, want %d", d.BadFrames(), len(m.Garbage()))
	}
	if r := noticesOf(sink, notice.BookResync); len(r) != 1 {
		t.Fatalf("book_resync notices = %+v, want one", r)
	}
}

// Without instrument data a snapshot whose values are all coarse gives too
// coarse a precision; the first finer update resyncs, and the next
// snapshot is read at the finer precision.
func TestInferredPrecisionGrows(t *testing.T) {
	frame := func(typ, bids string, ck uint32) []byte {
		return fmt.Appendf(nil, `{"channel":"book","type":%q,"data":[{"symbol":"ABC/USD","bids":[%s],"asks":[{"price":2.5,"qty":1}],"checksum":%d}]}`, typ, bids, ck)
	}
	ck := func(bids, asks []venue.Level) uint32 { return krakentest.Checksum(bids, asks, 2, 1) }
	asks := levels("2.5", "1")
	snap1 := frame("snapshot", `{"price":1.5,"qty":3}`, krakentest.Checksum(levels("1.5", "3"), asks, 1, 0))
	up := frame("update", `{"price":1.25,"qty":2.5}`, ck(levels("1.5", "3", "1.25", "2.5"), asks))
	snap2 := frame("snapshot", `{"price":1.5,"qty":3},{"price":1.25,"qty":2.5}`, ck(levels("1.5", "3", "1.25", "2.5"), asks))
	sink, _ := decode(t, 10, snap1, up, snap2)
	if n := noticesOf(sink, notice.BookResync); len(n) != 1 {
		t.Fatalf("resyncs = %+v, want one", n)
	}
	want := bookOf(levels("1.5", "3", "1.25", "2.5"), asks)
	if got := sink.Book("kraken:level2:ABC/USD"); !got.Equal(want) {
		t.Fatalf("book:\n%s", dump(got))
	}
	if evs := sink.Events(); len(evs) != 2 || !evs[1].Snapshot {
		t.Fatalf("events = %d, want two snapshots", len(evs))
	}
}

// A bad frame that names no symbol resyncs every valid book, with the
// notices in symbol order whatever order the books came in, so that a
// capture always replays to the same notices.
func TestBadFrameResyncsAllBooksInOrder(t *testing.T) {
	asks := levels("2.5", "1")
	snap := func(sym string) []byte {
		return fmt.Appendf(nil, `{"channel":"book","type":"snapshot","data":[{"symbol":%q,"bids":[{"price":1.5,"qty":3}],"asks":[{"price":2.5,"qty":1}],"checksum":%d}]}`,
			sym, krakentest.Checksum(levels("1.5", "3"), asks, 1, 0))
	}
	syms := []string{"D/USD", "B/USD", "E/USD", "A/USD", "C/USD"}
	var fs [][]byte
	for _, s := range syms {
		fs = append(fs, snap(s))
	}
	sink, _ := decode(t, 10, append(fs, []byte(`{"channel":"book","type":"update","data":[{`))...)
	var got []string
	for _, n := range noticesOf(sink, notice.BookResync) {
		got = append(got, n.Stream)
	}
	want := []string{"kraken:level2:A/USD", "kraken:level2:B/USD", "kraken:level2:C/USD", "kraken:level2:D/USD", "kraken:level2:E/USD"}
	if !slices.Equal(got, want) {
		t.Fatalf("book_resync streams %v, want %v", got, want)
	}
}
