package coinbase_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

const testdata venuetest.Dir = "../../testdata/venues/coinbase"

// readFrames returns the received frames of a JSON-lines capture: the
// client's own requests ("type":"subscribe") are left out.
func readFrames(t testing.TB, name string) [][]byte {
	t.Helper()
	return slices.DeleteFunc(testdata.Frames(t, name), func(f []byte) bool {
		return bytes.Contains(f, []byte(`"type":"subscribe"`))
	})
}

var t0 = time.Date(2026, 9, 7, 0, 0, 0, 0, time.UTC)

// decode runs frames through a fresh decoder, frame i received i ms after t0.
func decode(frames [][]byte) (*coinbase.Decoder, *venuetest.Sink) {
	return venuetest.Decode(coinbase.NewDecoder, venue.Config{}, t0, time.Millisecond, frames...)
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func levels(pairs ...string) []venue.Level {
	var out []venue.Level
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, venue.Level{Price: dec(pairs[i]), Size: dec(pairs[i+1])})
	}
	return out
}

func sameLevels(t *testing.T, what string, got, want []venue.Level) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d levels %v, want %d %v", what, len(got), got, len(want), want)
		return
	}
	for i := range got {
		if !got[i].Price.Equal(want[i].Price) || !got[i].Size.Equal(want[i].Size) {
			t.Errorf("%s[%d] = %s@%s, want %s@%s", what, i, got[i].Size, got[i].Price, want[i].Size, want[i].Price)
		}
	}
}

func countNotices(s *venuetest.Sink, k notice.Kind) int {
	n := 0
	for _, x := range s.Notices() {
		if x.Kind == k {
			n++
		}
	}
	return n
}

// The 2026 live capture: an interleaved, unsorted l2_data snapshot with
// mixed price formatting, two acks, a heartbeat with a numeric counter,
// and the error an unknown channel drew.
func TestGoldenLiveLevel2(t *testing.T) {
	d, sink := decode(readFrames(t, "advanced_trade_live_2026-09-07_l2_acks_heartbeat_error.jsonl"))
	sink.Check(t)
	evs := sink.Events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1 snapshot", len(evs))
	}
	ev := evs[0]
	if ev.Stream != "coinbase:level2:BTC-PERP-INTX" || !ev.Snapshot || ev.VenueSeq != 0 {
		t.Errorf("event = %s snapshot=%v venue_seq=%d", ev.Stream, ev.Snapshot, ev.VenueSeq)
	}
	if want := time.Date(2026, 9, 7, 1, 57, 58, 894355000, time.UTC); !ev.VenueTime.Equal(want) {
		t.Errorf("venue time %v, want %v", ev.VenueTime, want)
	}
	sameLevels(t, "bids", ev.Bids, levels("79943.9", "3.0105", "79943.8", "0.5"))
	sameLevels(t, "asks", ev.Asks, levels("79944", "0.048", "79944.1", "1.2"))
	if b, ok := d.Book("BTC-PERP-INTX"); !ok || b.Len(venue.Bid) != 2 || b.Len(venue.Ask) != 2 {
		t.Errorf("book valid=%v", ok)
	}
	if d.BadFrames() != 0 || countNotices(sink, notice.BookResync) != 0 {
		t.Errorf("bad frames %d, resyncs %d; want none (sequence 0,1,2,3 is unbroken)", d.BadFrames(), countNotices(sink, notice.BookResync))
	}
	// The error answers no request of ours (replay): reported, not dropped.
	if n := countNotices(sink, notice.Refusal); n != 1 {
		t.Errorf("%d refusal notices for the error frame, want 1", n)
	}
	// The wire form round-trips and keeps the venue's digits.
	js := string(ev.AppendJSON(nil))
	want := `"bids":[["79943.9","3.0105"],["79943.8","0.5"]],"asks":[["79944","0.048"],["79944.1","1.2"]]`
	if !bytes.Contains([]byte(js), []byte(want)) {
		t.Errorf("wire form %s lacks %s", js, want)
	}
}

func TestGoldenMarketTrades(t *testing.T) {
	_, sink := decode(readFrames(t, "advanced_trade_market_trades_2026.jsonl"))
	sink.Check(t)
	evs := sink.Events()
	// The snapshot on subscribe is history and is not published; the
	// update's two trades are, oldest first, the maker's BUY a taker sell.
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	for i, want := range []struct{ id, size, tm string }{
		{"1069726292", "0.00000012", "2026-08-12T19:27:48.266642Z"},
		{"1069726293", "0.00000012", "2026-08-12T19:27:48.298771Z"},
	} {
		ev := evs[i]
		tm, _ := time.Parse(time.RFC3339Nano, want.tm)
		if ev.Kind != venue.KindTrade || ev.Stream != "coinbase:trades:BTC-USD" || ev.TradeID != want.id ||
			!ev.Price.Equal(dec("63310.25")) || !ev.Size.Equal(dec(want.size)) || ev.Side != venue.SideSell || !ev.VenueTime.Equal(tm) {
			t.Errorf("trade %d = %+v, want id %s", i, ev, want.id)
		}
	}
}

func TestGoldenTicker(t *testing.T) {
	_, sink := decode(readFrames(t, "advanced_trade_ticker_2026.jsonl"))
	sink.Check(t)
	evs := sink.Events()
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	for i, w := range [][5]string{
		{"63320.73", "0.12636254", "63320.74", "0.49679101", "63320.73"},
		{"63318.86", "0.2275291", "63318.87", "0.49990114", "63320.73"},
	} {
		ev := evs[i]
		if ev.Stream != "coinbase:ticker:BTC-USD" || !ev.Bid.Equal(dec(w[0])) || !ev.BidSize.Equal(dec(w[1])) ||
			!ev.Ask.Equal(dec(w[2])) || !ev.AskSize.Equal(dec(w[3])) || !ev.Last.Valid || !ev.Last.Decimal.Equal(dec(w[4])) {
			t.Errorf("ticker %d = %+v, want %v", i, ev, w)
		}
	}
}

// The documentation's examples: each is a first frame (sequence_num 0) of
// its own connection, and the heartbeat counter is a string there.
func TestGoldenDocExamples(t *testing.T) {
	sink := venuetest.NewSink()
	d := coinbase.NewDecoder(venue.Config{Sink: sink})
	for i, f := range readFrames(t, "advanced_trade_doc_examples.jsonl") {
		d.LinkDown(t0)
		d.Frame(t0.Add(time.Duration(i)*time.Second), f)
	}
	sink.Check(t)
	if d.BadFrames() != 0 {
		t.Fatalf("%d bad frames in the doc examples", d.BadFrames())
	}
	var books, tickers int
	for _, ev := range sink.Events() {
		switch ev.Kind {
		case venue.KindBook:
			books++
			sameLevels(t, "doc bids", ev.Bids, levels("21921.73", "0.06317902", "21921.3", "0.02"))
		case venue.KindTicker:
			tickers++
		case venue.KindTrade:
			t.Errorf("doc trade snapshot published: %+v", ev)
		}
	}
	if books != 1 || tickers != 1 {
		t.Errorf("books %d tickers %d, want 1 and 1", books, tickers)
	}
}

// legacyToAdvanced turns the recorded 2021 Exchange-feed level2 stream
// (real SKL-BTC data: a snapshot and 1,539 l2updates) into the Advanced
// Trade frames that carry the same changes, numbered from 0.
func legacyToAdvanced(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for i, f := range readFrames(t, "exchange_legacy_level2_SKL-BTC_2021.jsonl") {
		var m struct {
			Type    string      `json:"type"`
			Product string      `json:"product_id"`
			Bids    [][2]string `json:"bids"`
			Asks    [][2]string `json:"asks"`
			Changes [][3]string `json:"changes"`
			Time    string      `json:"time"`
		}
		if err := json.Unmarshal(f, &m); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		ts := m.Time
		if ts == "" {
			ts = "2021-04-17T16:43:37.000000Z"
		}
		typ := "update"
		if m.Type == "snapshot" {
			typ = "snapshot"
		}
		fmt.Fprintf(&b, `{"channel":"l2_data","client_id":"","timestamp":%q,"sequence_num":%d,"events":[{"type":%q,"product_id":%q,"updates":[`, ts, i, typ, m.Product)
		n := 0
		add := func(side, p, q string) {
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			fmt.Fprintf(&b, `{"side":%q,"event_time":%q,"price_level":%q,"new_quantity":%q}`, side, ts, p, q)
		}
		for _, l := range m.Bids {
			add("bid", l[0], l[1])
		}
		for _, l := range m.Asks {
			add("offer", l[0], l[1])
		}
		for _, c := range m.Changes {
			side := "bid"
			if c[0] == "sell" {
				side = "offer"
			}
			add(side, c[1], c[2])
		}
		b.WriteString(`]}]}`)
		out = append(out, b.Bytes())
	}
	return out
}

// The real SKL-BTC stream replays into the book an independent model of
// the same changes holds, the consumer of our events holds the same, and
// the book never crosses.
func TestGoldenLegacyStreamBook(t *testing.T) {
	frames := legacyToAdvanced(t)
	d, sink := decode(frames)
	sink.Check(t)
	if d.BadFrames() != 0 || countNotices(sink, notice.BookResync) != 0 {
		t.Fatalf("bad frames %d, resyncs %d", d.BadFrames(), countNotices(sink, notice.BookResync))
	}
	// The model: maps from the price's value to its size string.
	model := map[venue.BookSide]map[string]decimal.Decimal{venue.Bid: {}, venue.Ask: {}}
	for _, f := range readFrames(t, "exchange_legacy_level2_SKL-BTC_2021.jsonl") {
		var m struct {
			Bids, Asks [][2]string
			Changes    [][3]string
		}
		json.Unmarshal(f, &m)
		set := func(s venue.BookSide, p, q string) {
			k := dec(p).String()
			if dec(q).IsZero() {
				delete(model[s], k)
			} else {
				model[s][k] = dec(q)
			}
		}
		for _, l := range m.Bids {
			set(venue.Bid, l[0], l[1])
		}
		for _, l := range m.Asks {
			set(venue.Ask, l[0], l[1])
		}
		for _, c := range m.Changes {
			s := venue.Bid
			if c[0] == "sell" {
				s = venue.Ask
			}
			set(s, c[1], c[2])
		}
	}
	want := &venue.Book{}
	for s, m := range model {
		for p, q := range m {
			want.Set(s, dec(p), q)
		}
	}
	got, ok := d.Book("SKL-BTC")
	if !ok || !got.Equal(want) {
		t.Fatalf("decoder book (valid=%v, %d bids %d asks) differs from the model (%d bids %d asks)",
			ok, got.Len(venue.Bid), got.Len(venue.Ask), want.Len(venue.Bid), want.Len(venue.Ask))
	}
	if consumer := sink.Book("coinbase:level2:SKL-BTC"); !consumer.Equal(want) {
		t.Fatal("the consumer's book, built from our events, differs from the model")
	}
	if n := sink.NumEvents(); n != len(frames) {
		t.Errorf("%d events for %d frames", n, len(frames))
	}
	bid, _ := want.Best(venue.Bid)
	ask, _ := want.Best(venue.Ask)
	t.Logf("SKL-BTC after %d frames: %d bids, %d asks, best %s / %s", len(frames), want.Len(venue.Bid), want.Len(venue.Ask), bid.Price, ask.Price)
}
