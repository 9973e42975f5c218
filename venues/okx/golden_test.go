package okx_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/okx"
	"github.com/fanoutd/fanoutd/venues/okx/okxtest"
)

var update = flag.Bool("update", false, "rewrite golden files")

const testdata venuetest.Dir = "../../testdata/venues/okx"

// recv is the receive time the golden tests stamp on every frame.
var recv = time.Date(2022, 5, 13, 16, 27, 0, 0, time.UTC)

// decode runs frames through a fresh decoder, every one received at recv,
// and checks the sink's invariants.
func decode(t testing.TB, frames ...[]byte) (*okx.Decoder, *venuetest.Sink) {
	t.Helper()
	d, sink := venuetest.Decode(okx.NewDecoder, venue.Config{}, recv, 0, frames...)
	sink.Check(t)
	return d, sink
}

func kinds(ns []notice.Notice) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Kind.String())
	}
	return out
}

func TestChecksumDocVectors(t *testing.T) {
	for i, line := range testdata.Frames(t, "checksum_doc_vectors.jsonl") {
		var v struct {
			Bids, Asks  [][]string
			CheckString string `json:"check_string"`
			Checksum    int32
		}
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatal(err)
		}
		if got := okx.Checksum([]byte(v.CheckString)); got != v.Checksum {
			t.Errorf("vector %d: Checksum(%q) = %d, want %d", i, v.CheckString, got, v.Checksum)
		}
		// The same vector as a books snapshot: the decoder builds the string
		// from its book and must accept the checksum.
		f := fmt.Sprintf(`{"arg":{"channel":"books","instId":"ETH-USDT"},"action":"snapshot","data":[{"asks":%s,"bids":%s,"ts":"1","checksum":%d}]}`,
			levels(v.Asks), levels(v.Bids), v.Checksum)
		d, sink := decode(t, []byte(f))
		if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 0 || d.Stats().Checksums != 1 {
			t.Errorf("vector %d: notices %v, %d checksums verified; want none and 1", i, kinds(n), d.Stats().Checksums)
		}
	}
}

func levels(ls [][]string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `[%q,%q,"0","1"]`, l[0], l[1])
	}
	b.WriteByte(']')
	return b.String()
}

// TestRecorded2022 replays the real 2022-05-13 BTC-USDT books capture
// (snapshot + 97 updates, checksums but no seqId yet): every checksum
// verifies, and the book matches one rebuilt independently from the
// frames' strings.
func TestRecorded2022(t *testing.T) {
	frames := testdata.Frames(t, "books_sequence_BTC-USDT_2022.jsonl")
	d, sink := decode(t, frames...)
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 0 {
		t.Fatalf("notices %v, want none", kinds(n))
	}
	st := d.Stats()
	if st.Checksums != uint64(len(frames)) || st.BadFrames != 0 || st.Resyncs != 0 {
		t.Fatalf("stats %+v, want %d checksums and nothing bad", st, len(frames))
	}
	stream := venue.NewStream("okx", venue.Level2, "BTC-USDT")
	if n := sink.NumEvents(); n != len(frames) {
		t.Fatalf("%d events, want %d", n, len(frames))
	}
	got := sink.Book(stream)
	if want := naiveBook(t, frames); !got.Equal(want) {
		t.Fatalf("book differs from the naive rebuild")
	}
	snap := got.Snapshot(stream)
	snap.RecvTime = recv
	testdata.Golden(t, "books_sequence_BTC-USDT_2022.final.golden.json", append(snap.AppendJSON(nil), '\n'), *update)
}

// naiveBook rebuilds a book from books frames with encoding/json and
// decimal.NewFromString: slow, obviously right.
func naiveBook(t testing.TB, frames [][]byte) *venue.Book {
	b := &venue.Book{}
	for _, f := range frames {
		var m struct {
			Action string
			Data   []struct{ Bids, Asks [][]string }
		}
		if err := json.Unmarshal(f, &m); err != nil {
			t.Fatal(err)
		}
		if m.Action == "snapshot" {
			b.Reset()
		}
		for _, x := range m.Data {
			for _, l := range x.Bids {
				b.Set(venue.Bid, decimal.RequireFromString(l[0]), decimal.RequireFromString(l[1]))
			}
			for _, l := range x.Asks {
				b.Set(venue.Ask, decimal.RequireFromString(l[0]), decimal.RequireFromString(l[1]))
			}
		}
	}
	return b
}

// TestTradesTickersGolden decodes the recorded trades and tickers (2022
// and 2026) and compares the events' wire form with golden files.
func TestTradesTickersGolden(t *testing.T) {
	for _, name := range []string{"trades_cryptofeed_2022", "tickers_cryptofeed_2022", "recorded_2026_ccxt_tickers_trades_books5", "subscribe_ack_cryptofeed_2022"} {
		t.Run(name, func(t *testing.T) {
			frames := testdata.Frames(t, name+".jsonl")
			_, sink := decode(t, frames...)
			if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 0 {
				t.Fatalf("notices %v, want none", kinds(n))
			}
			testdata.Golden(t, name+".events.golden.jsonl", sink.AppendJSONLines(nil), *update)
		})
	}
}

func TestErrorFramesAreRefusals(t *testing.T) {
	_, sink := decode(t, testdata.Frames(t, "error.jsonl")...)
	ns := sink.NoticesExcept(notice.CoverageChange)
	want := []string{"okx:ticker:ETH-USD-SWAP", "okx:ticker:FOO-USDT-SWAP"}
	if len(ns) != len(want) {
		t.Fatalf("notices %v, want 2 refusals", kinds(ns))
	}
	for i, n := range ns {
		if n.Kind != notice.Refusal || n.Stream != want[i] || n.Details["code"] != "60018" {
			t.Errorf("notice %d = %v %q %v, want refusal on %s code 60018", i, n.Kind, n.Stream, n.Details, want[i])
		}
	}
}

func TestPingPong(t *testing.T) {
	_, sink := decode(t, []byte("pong"), []byte("pong\n"))
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 0 {
		t.Fatalf("pong gave notices %v", kinds(n))
	}
	_, sink = decode(t, []byte("ping"))
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 1 || n[0].Kind != notice.DataQuality {
		t.Fatalf("a text frame other than pong gave %v, want data_quality", kinds(n))
	}
}

func bookFrame(action string, asks, bids string, cs int32, prev, seq int64) []byte {
	return fmt.Appendf(nil, `{"arg":{"channel":"books","instId":"BTC-USDT"},"action":%q,"data":[{"asks":%s,"bids":%s,"ts":"1597026383085","checksum":%d,"prevSeqId":%d,"seqId":%d}]}`,
		action, asks, bids, cs, prev, seq)
}

// TestSequenceDocExample follows the docs' sequence: snapshot (-1,10),
// update (10,15), no-change (15,15), reset after maintenance (15,3),
// update (3,5); then a gap (7 after 5).
func TestSequenceDocExample(t *testing.T) {
	frames := [][]byte{
		bookFrame("snapshot", `[["8476.98","415","0","13"]]`, `[["8476.97","256","0","12"]]`, 0, -1, 10),
		bookFrame("update", `[["8477","7","0","2"]]`, `[]`, 0, 10, 15),
		bookFrame("update", `[]`, `[]`, 0, 15, 15),
		bookFrame("update", `[]`, `[["8475.5","1","0","1"]]`, 0, 15, 3),
		bookFrame("update", `[["8476.98","0","0","0"]]`, `[]`, 0, 3, 5),
	}
	d, sink := decode(t, frames...)
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 0 {
		t.Fatalf("notices %v, want none", kinds(n))
	}
	var seqs []int64
	for _, e := range sink.Events() {
		seqs = append(seqs, e.VenueSeq)
	}
	if fmt.Sprint(seqs) != "[10 15 3 5]" || d.Stats().Keepalives != 1 {
		t.Fatalf("venue seqs %v, keepalives %d; want [10 15 3 5] and 1", seqs, d.Stats().Keepalives)
	}
	b := sink.Book(venue.NewStream("okx", venue.Level2, "BTC-USDT"))
	if best, _ := b.Best(venue.Ask); best.Price.String() != "8477" || b.Len(venue.Bid) != 2 {
		t.Fatalf("book after the example: best ask %v, %d bids", best, b.Len(venue.Bid))
	}

	d.Frame(recv, bookFrame("update", `[["8478","1","0","1"]]`, `[]`, 0, 7, 9))
	ns := sink.NoticesExcept(notice.CoverageChange)
	if len(ns) != 1 || ns[0].Kind != notice.BookResync || ns[0].Details["reason"] != "gap" ||
		ns[0].Details["last_seq_id"] != int64(5) || ns[0].Details["prev_seq_id"] != int64(7) || ns[0].Details["seq_id"] != int64(9) {
		t.Fatalf("after a gap: %+v, want one book_resync naming reason gap, 5, 7 and 9", ns)
	}
	// Updates are withheld until a new snapshot.
	d.Frame(recv, bookFrame("update", `[["8479","1","0","1"]]`, `[]`, 0, 9, 11))
	d.Frame(recv, bookFrame("snapshot", `[["8480","1","0","1"]]`, `[["8470","1","0","1"]]`, 0, -1, 20))
	d.Frame(recv, bookFrame("update", `[["8481","1","0","1"]]`, `[]`, 0, 20, 21))
	sink.Check(t)
	evs := sink.Events()
	if n := len(evs); n != 6 || !evs[4].Snapshot || evs[5].VenueSeq != 21 {
		t.Fatalf("%d events after the resync, want snapshot 20 then update 21", n-4)
	}
}

// TestDocExampleChecksumIllustrative: the docs' books example carries a
// checksum that does not match its own levels (-855196043; the levels give
// -2102840145), so the decoder rejects it; with the checksum zeroed, as
// OKX sends it, it is a valid snapshot with seqId 123456.
func TestDocExampleChecksumIllustrative(t *testing.T) {
	frames := testdata.Frames(t, "books_doc_example_seqid.jsonl")
	_, sink := decode(t, frames[0])
	ns := sink.NoticesExcept(notice.CoverageChange)
	if len(ns) != 1 || ns[0].Kind != notice.BookResync || ns[0].Details["computed"] != int64(-2102840145) {
		t.Fatalf("doc example: %+v, want a checksum book_resync computing -2102840145", ns)
	}
	zeroed := bytes.Replace(frames[0], []byte(`"checksum":-855196043`), []byte(`"checksum":0`), 1)
	_, sink = decode(t, zeroed, frames[1])
	evs := sink.Events()
	if len(sink.NoticesExcept(notice.CoverageChange)) != 0 || len(evs) != 2 || !evs[0].Snapshot || evs[0].VenueSeq != 123456 || len(evs[0].Bids) != 8 {
		t.Fatalf("zeroed doc example: notices %v, events %d", kinds(sink.NoticesExcept(notice.CoverageChange)), len(evs))
	}
	if evs[1].Kind != venue.KindTicker || evs[1].Stream != "okx:ticker:BCH-USDT-SWAP" || evs[1].Bid.String() != "111.05" {
		t.Fatalf("bbo-tbt event = %+v, want a ticker with bid 111.05", evs[1])
	}
}

// TestChecksumUsesOriginalStrings: a book whose strings carry trailing
// zeros ("0.5000") verifies only over the original text.
func TestChecksumUsesOriginalStrings(t *testing.T) {
	bids := [][2]string{{"100.10", "0.5000"}, {"100", "2"}}
	asks := [][2]string{{"100.2", "1.0"}}
	cs := okxtest.ChecksumOf(bids, asks)
	snap := bookFrame("snapshot", `[["100.2","1.0","0","1"]]`, `[["100.10","0.5000","0","1"],["100","2","0","1"]]`, cs, -1, 1)
	bids[0][1] = "0.25000"
	upd := bookFrame("update", `[]`, `[["100.10","0.25000","0","1"]]`, okxtest.ChecksumOf(bids, asks), 1, 2)
	d, sink := decode(t, snap, upd)
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 0 || d.Stats().Checksums != 2 {
		t.Fatalf("notices %v, %d checksums; want none and 2", kinds(n), d.Stats().Checksums)
	}
}

// TestRescale: a price with more decimals than any before rescales the
// book; events keep one exponent per book so consumers compare cheaply.
func TestRescale(t *testing.T) {
	_, sink := decode(t,
		bookFrame("snapshot", `[["101","1","0","1"]]`, `[["100","1","0","1"]]`, 0, -1, 1),
		bookFrame("update", `[["100.55","3","0","1"]]`, `[]`, 0, 1, 2),
		bookFrame("update", `[["101","0","0","1"]]`, `[["100.1","1","0","1"]]`, 0, 2, 3),
	)
	b := sink.Book(venue.NewStream("okx", venue.Level2, "BTC-USDT"))
	if b.Len(venue.Ask) != 1 || b.Len(venue.Bid) != 2 {
		t.Fatalf("book has %d bids %d asks, want 2 and 1", b.Len(venue.Bid), b.Len(venue.Ask))
	}
	if best, _ := b.Best(venue.Bid); best.Price.String() != "100.1" || best.Price.Exponent() != -2 {
		t.Fatalf("best bid %v exponent %d, want 100.1 at -2", best.Price, best.Price.Exponent())
	}
}

// TestImpossibleFrames: bad numbers, negative sizes and crossing updates
// are counted, reported once per burst, and resync the book.
func TestImpossibleFrames(t *testing.T) {
	snap := bookFrame("snapshot", `[["101","1","0","1"]]`, `[["100","1","0","1"]]`, 0, -1, 1)
	for name, f := range map[string][]byte{
		"negative size": bookFrame("update", `[["101","-1","0","1"]]`, `[]`, 0, 1, 2),
		"bad price":     bookFrame("update", `[["1e5","1","0","1"]]`, `[]`, 0, 1, 2),
		"crossing":      bookFrame("update", `[]`, `[["102","1","0","1"]]`, 0, 1, 2),
		"truncated":     bookFrame("update", `[]`, `[]`, 0, 1, 2)[:60],
		"no action":     []byte(`{"arg":{"channel":"books","instId":"BTC-USDT"},"data":[{"asks":[],"bids":[]}]}`),
		"zero price":    bookFrame("update", `[["0","1","0","1"]]`, `[]`, 0, 1, 2),
	} {
		t.Run(name, func(t *testing.T) {
			d, sink := decode(t, snap, f, f)
			got := kinds(sink.NoticesExcept(notice.CoverageChange))
			if fmt.Sprint(got) != "[data_quality book_resync]" || d.Stats().BadFrames < 1 {
				t.Fatalf("notices %v, bad frames %d; want one data_quality and one book_resync", got, d.Stats().BadFrames)
			}
		})
	}
}

// TestChecksumWithoutKeptText: a snapshot without a checksum keeps no
// text; a later non-zero checksum is checked against the decimals'
// canonical form, which is how OKX writes them.
func TestChecksumWithoutKeptText(t *testing.T) {
	bids := [][2]string{{"100.1", "0.5"}}
	asks := [][2]string{{"100.2", "1"}}
	snap := bookFrame("snapshot", `[["100.2","1","0","1"]]`, `[["100.1","0.5","0","1"]]`, 0, -1, 1)
	asks = append(asks, [2]string{"100.3", "2.25"})
	upd := bookFrame("update", `[["100.3","2.25","0","1"]]`, `[]`, okxtest.ChecksumOf(bids, asks), 1, 2)
	bad := bookFrame("update", `[["100.4","1","0","1"]]`, `[]`, 12345, 2, 3)
	d, sink := decode(t, snap, upd)
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 0 || d.Stats().Checksums != 1 {
		t.Fatalf("notices %v, %d checksums; want none and 1", kinds(n), d.Stats().Checksums)
	}
	d.Frame(recv, bad)
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 1 || n[0].Details["reason"] != "checksum" {
		t.Fatalf("a wrong checksum gave %v", kinds(n))
	}
}

// TestFieldOrder: data before arg and action, and several books elements
// in one push, decode the same as OKX's usual order.
func TestFieldOrder(t *testing.T) {
	f := []byte(`{"data":[{"asks":[["101","1","0","1"]],"bids":[["100","1","0","1"]],"ts":"1","seqId":1,"prevSeqId":-1}],"action":"snapshot","arg":{"instId":"BTC-USDT","channel":"books"}}`)
	two := []byte(`{"arg":{"channel":"books","instId":"BTC-USDT"},"action":"update","data":[{"asks":[["102","1","0","1"]],"bids":[],"prevSeqId":1,"seqId":2},{"asks":[],"bids":[["99","1","0","1"]],"prevSeqId":2,"seqId":3}]}`)
	_, sink := decode(t, f, two)
	evs := sink.Events()
	if len(sink.NoticesExcept(notice.CoverageChange)) != 0 || len(evs) != 3 || !evs[0].Snapshot || evs[2].VenueSeq != 3 {
		t.Fatalf("notices %v, %d events", kinds(sink.NoticesExcept(notice.CoverageChange)), len(evs))
	}
}

// A bad frame that names no instrument resyncs the valid books that could
// not notice a lost frame themselves (no seqId, no checksum: the 2022
// captures), in instrument order whatever order the books came in, so that
// a capture always replays to the same notices.
func TestBadFrameResyncsUncheckedBooksInOrder(t *testing.T) {
	var fs [][]byte
	for _, id := range []string{"D-USDT", "B-USDT", "E-USDT", "A-USDT", "C-USDT"} {
		fs = append(fs, fmt.Appendf(nil, `{"arg":{"channel":"books","instId":%q},"action":"snapshot","data":[{"asks":[["101","1","0","1"]],"bids":[["100","1","0","1"]],"ts":"1597026383085","checksum":0}]}`, id))
	}
	_, sink := decode(t, append(fs, []byte(`{"arg":{"channel":"books","instId":`))...)
	if got, want := resynced(sink), []string{"okx:level2:A-USDT", "okx:level2:B-USDT", "okx:level2:C-USDT", "okx:level2:D-USDT", "okx:level2:E-USDT"}; !slices.Equal(got, want) {
		t.Fatalf("book_resync streams %v, want %v", got, want)
	}
}

// A bad frame that names no instrument costs only the book it concerned:
// books with a seqId chain are left alone, and the one whose frame it was
// finds the gap at its next update.
func TestBadFrameCostsOnlyItsBook(t *testing.T) {
	var fs [][]byte
	for _, id := range []string{"A-USDT", "B-USDT", "C-USDT"} {
		fs = append(fs, fmt.Appendf(nil, `{"arg":{"channel":"books","instId":%q},"action":"snapshot","data":[{"asks":[["101","1","0","1"]],"bids":[["100","1","0","1"]],"ts":"1597026383085","checksum":0,"prevSeqId":-1,"seqId":1}]}`, id))
	}
	fs = append(fs, []byte(`{"arg":{"channel":"books","instId":`)) // B's update 1→2, cut short
	for _, id := range []string{"A-USDT", "B-USDT", "C-USDT"} {
		prev := 1
		if id == "B-USDT" {
			prev = 2
		}
		fs = append(fs, fmt.Appendf(nil, `{"arg":{"channel":"books","instId":%q},"action":"update","data":[{"asks":[["101","2","0","1"]],"bids":[],"ts":"1597026383086","checksum":0,"prevSeqId":%d,"seqId":3}]}`, id, prev))
	}
	_, sink := decode(t, fs...)
	if got, want := resynced(sink), []string{"okx:level2:B-USDT"}; !slices.Equal(got, want) {
		t.Fatalf("book_resync streams %v, want %v", got, want)
	}
}

func resynced(sink *venuetest.Sink) []string {
	var got []string
	for _, n := range sink.NoticesExcept(notice.CoverageChange) {
		if n.Kind == notice.BookResync {
			got = append(got, n.Stream)
		}
	}
	return got
}
