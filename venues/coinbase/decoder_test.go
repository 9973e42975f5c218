package coinbase_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

func l2(seq int, typ string, updates ...string) []byte {
	body := ""
	for i := 0; i+2 < len(updates); i += 3 {
		if body != "" {
			body += ","
		}
		body += fmt.Sprintf(`{"side":%q,"event_time":"2026-09-07T01:57:58.894355Z","price_level":%q,"new_quantity":%q}`, updates[i], updates[i+1], updates[i+2])
	}
	return fmt.Appendf(nil, `{"channel":"l2_data","client_id":"","timestamp":"2026-09-07T01:57:58.894355Z","sequence_num":%d,"events":[{"type":%q,"product_id":"BTC-USD","updates":[%s]}]}`, seq, typ, body)
}

func heartbeat(seq int) []byte {
	return fmt.Appendf(nil, `{"channel":"heartbeats","timestamp":"2026-09-07T23:37:22.675755362Z","sequence_num":%d,"events":[{"current_time":"x","heartbeat_counter":%d}]}`, seq, seq)
}

func newDecoder() (*coinbase.Decoder, *venuetest.Sink) {
	sink := venuetest.NewSink()
	return coinbase.NewDecoder(venue.Config{Sink: sink}), sink
}

func TestGapResyncsEveryBook(t *testing.T) {
	d, sink := newDecoder()
	d.Frame(t0, l2(0, "snapshot", "bid", "100", "1", "offer", "101", "2"))
	d.Frame(t0, heartbeat(1))
	d.Frame(t0, l2(3, "update", "bid", "100.5", "1")) // 2 is missing
	sink.Check(t)
	var got notice.Notice
	for _, n := range sink.Notices() {
		if n.Kind == notice.BookResync {
			got = n
		}
	}
	if got.Stream != "coinbase:level2:BTC-USD" || got.Details["reason"] != "sequence_gap" ||
		got.Details["expected_sequence_num"] != int64(2) || got.Details["sequence_num"] != int64(3) {
		t.Fatalf("book_resync = %+v", got)
	}
	if _, ok := d.Book("BTC-USD"); ok {
		t.Fatal("book still valid after a gap")
	}
	if n := sink.NumEvents(); n != 1 {
		t.Fatalf("%d events: the update after the gap was published", n)
	}
	// The next connection's snapshot makes it whole again.
	d.LinkDown(t0)
	d.Frame(t0, l2(0, "snapshot", "bid", "99", "1", "offer", "101", "2"))
	d.Frame(t0, l2(1, "update", "bid", "99", "0"))
	sink.Check(t)
	b, ok := d.Book("BTC-USD")
	if !ok || b.Len(venue.Bid) != 0 || b.Len(venue.Ask) != 1 {
		t.Fatalf("book after resync: valid=%v bids=%d asks=%d", ok, b.Len(venue.Bid), b.Len(venue.Ask))
	}
}

func TestBadFramesOneNoticePerBurst(t *testing.T) {
	d, sink := newDecoder()
	d.Frame(t0, l2(0, "snapshot", "bid", "100", "1", "offer", "101", "2"))
	for i, g := range [][]byte{l2(1, "update", "bid", "100", "-1"), []byte(`nope`), []byte(`{"channel":`), []byte(`[]`)} {
		d.Frame(t0.Add(time.Duration(i)*time.Millisecond), g)
	}
	sink.Check(t)
	if d.BadFrames() != 4 {
		t.Fatalf("BadFrames = %d, want 4", d.BadFrames())
	}
	if n := countNotices(sink, notice.DataQuality); n != 1 {
		t.Fatalf("%d data_quality notices for one burst, want 1", n)
	}
	if n := countNotices(sink, notice.BookResync); n != 1 {
		t.Fatalf("%d book_resync notices, want 1", n)
	}
	// A bad frame after a quiet spell starts a new burst.
	d.Frame(t0.Add(time.Minute), []byte(`nope`))
	if n := countNotices(sink, notice.DataQuality); n != 2 {
		t.Fatalf("%d data_quality notices after a second burst, want 2", n)
	}
}

func TestCrossingUpdateIsBad(t *testing.T) {
	d, sink := newDecoder()
	d.Frame(t0, l2(0, "snapshot", "bid", "100", "1", "offer", "101", "2"))
	d.Frame(t0, l2(1, "update", "bid", "101.5", "1"))
	sink.Check(t)
	if d.BadFrames() != 1 || countNotices(sink, notice.BookResync) != 1 || sink.NumEvents() != 1 {
		t.Fatalf("bad %d resyncs %d events %d", d.BadFrames(), countNotices(sink, notice.BookResync), sink.NumEvents())
	}
}

func TestSnapshotSortsAndDedupes(t *testing.T) {
	d, sink := newDecoder()
	d.Frame(t0, l2(0, "snapshot", "bid", "99", "1", "offer", "102", "1", "bid", "100", "1", "offer", "101", "3",
		"bid", "99.00", "5", "bid", "98", "0"))
	sink.Check(t)
	ev := sink.Events()[0]
	sameLevels(t, "bids", ev.Bids, levels("100", "1", "99", "5"))
	sameLevels(t, "asks", ev.Asks, levels("101", "3", "102", "1"))
}

func TestTradesAfterReconnectFillTheGap(t *testing.T) {
	d, sink := newDecoder()
	trades := func(seq int, typ string, ids ...int) []byte {
		body := ""
		for i := len(ids) - 1; i >= 0; i-- { // newest first, as the venue sends
			if body != "" {
				body += ","
			}
			body += fmt.Sprintf(`{"product_id":"BTC-USD","trade_id":"%d","price":"1","size":"1","time":"2026-08-12T19:27:47.532655Z","side":"SELL"}`, ids[i])
		}
		return fmt.Appendf(nil, `{"channel":"market_trades","timestamp":"2026-08-12T19:27:48.098821666Z","sequence_num":%d,"events":[{"type":%q,"trades":[%s]}]}`, seq, typ, body)
	}
	d.Frame(t0, trades(0, "snapshot", 1, 2, 3))
	d.Frame(t0, trades(1, "update", 4))
	d.LinkDown(t0)
	d.Frame(t0, trades(0, "snapshot", 3, 4, 5, 6))
	var ids []string
	for _, ev := range sink.Events() {
		ids = append(ids, ev.TradeID)
		if ev.Side != venue.SideBuy {
			t.Errorf("trade %s side %v: a maker SELL is a taker buy", ev.TradeID, ev.Side)
		}
	}
	if fmt.Sprint(ids) != "[4 5 6]" {
		t.Fatalf("trades published %v, want [4 5 6]", ids)
	}
}

// Truncations of every recorded frame never panic and never publish a
// book that the sink finds wrong.
func TestTruncatedFrames(t *testing.T) {
	frames := append(readFrames(t, "advanced_trade_live_2026-09-07_l2_acks_heartbeat_error.jsonl"),
		readFrames(t, "advanced_trade_market_trades_2026.jsonl")...)
	frames = append(frames, readFrames(t, "advanced_trade_ticker_2026.jsonl")...)
	for _, f := range frames {
		for n := range len(f) {
			d, sink := newDecoder()
			d.Frame(t0, f[:n])
			sink.Check(t)
		}
	}
}

func TestErrorNamesWholeProduct(t *testing.T) {
	sink := venuetest.NewSink()
	d := coinbase.NewDecoder(venue.Config{Sink: sink})
	coinbase.Expect(d, "level2", "BTC-USD", "BTC-USDC")
	d.Frame(t0, []byte(`{"type":"error","message":"Failed to subscribe","reason":"BTC-USDC is not a valid product"}`))
	var refused []any
	for _, n := range sink.Notices() {
		if n.Kind == notice.Refusal {
			refused = append(refused, n.Details["symbol"])
		}
	}
	if fmt.Sprint(refused) != "[BTC-USDC]" {
		t.Fatalf("refused %v, want [BTC-USDC]", refused)
	}
}

// An ack that lacks a requested product refuses it, once, even when an
// error frame named it first.
func TestAckRefusesMissingProduct(t *testing.T) {
	sink := venuetest.NewSink()
	d := coinbase.NewDecoder(venue.Config{Sink: sink})
	coinbase.Expect(d, "heartbeats")
	coinbase.Expect(d, "level2", "BTC-USD", "NOPE-USD")
	coinbase.Expect(d, "ticker", "NOPE-USD")
	d.Frame(t0, []byte(`{"channel":"subscriptions","timestamp":"2026-09-07T23:37:22.278662782Z","sequence_num":0,"events":[{"subscriptions":{"heartbeats":["heartbeats"]}}]}`))
	d.Frame(t0, []byte(`{"channel":"subscriptions","timestamp":"2026-09-07T23:37:22.278662782Z","sequence_num":1,"events":[{"subscriptions":{"heartbeats":["heartbeats"],"level2":["BTC-USD"]}}]}`))
	d.Frame(t0, []byte(`{"type":"error","message":"Failed to subscribe","reason":"NOPE-USD is not a valid product"}`))
	d.Frame(t0, []byte(`{"channel":"subscriptions","timestamp":"2026-09-07T23:37:22.278662782Z","sequence_num":2,"events":[{"subscriptions":{"heartbeats":["heartbeats"],"level2":["BTC-USD"]}}]}`))
	var refused []string
	for _, n := range sink.Notices() {
		if n.Kind == notice.Refusal {
			refused = append(refused, n.Stream)
		}
	}
	if fmt.Sprint(refused) != "[coinbase:level2:NOPE-USD]" {
		t.Fatalf("refusals on %v, want one on coinbase:level2:NOPE-USD", refused)
	}
	if d.BadFrames() != 0 {
		t.Fatalf("%d bad frames", d.BadFrames())
	}
}
