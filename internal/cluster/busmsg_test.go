package cluster

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
)

var busStreams = []venue.Stream{"coinbase:level2:BTC-USD", "kraken:trades:XBT/USD", "okx:ticker:BTC-USDT"}

// busEvents are events as an ingest publishes them (venue.Event.AppendJSON).
func busEvents() []*venue.Event {
	at := time.Date(2026, 12, 1, 22, 0, 0, 123456789, time.UTC)
	d := func(s string) decimal.Decimal { return decimal.RequireFromString(s) }
	return []*venue.Event{
		{Kind: venue.KindBook, Stream: busStreams[0], Seq: 18460, Snapshot: true, RecvTime: at, VenueTime: at,
			Bids: []venue.Level{{Price: d("97000.5"), Size: d("0.25")}}, Asks: []venue.Level{{Price: d("97001"), Size: d("1.5")}}},
		{Kind: venue.KindBook, Stream: busStreams[0], Seq: 18461, RecvTime: at, VenueSeq: 77,
			Bids: []venue.Level{{Price: d("97000.5"), Size: d("0")}}},
		{Kind: venue.KindTrade, Stream: busStreams[1], Seq: 9, TradeID: `id "with" \quotes\ and "seq":1`, Price: d("97000.1"), Size: d("0.01"),
			Side: venue.SideSell, RecvTime: at},
		{Kind: venue.KindTicker, Stream: busStreams[2], Seq: 1, Bid: d("1"), BidSize: d("2"), Ask: d("3"), AskSize: d("4"), RecvTime: at},
	}
}

func TestEventCheck(t *testing.T) {
	checks := map[venue.Stream]*eventCheck{}
	for _, st := range busStreams {
		c := newEventCheck(st)
		checks[st] = &c
	}
	for _, ev := range busEvents() {
		b := ev.AppendJSON(nil)
		c := checks[ev.Stream]
		if why := c.check(b, ev.Seq, false); why != "" {
			t.Errorf("%s rejected (%s): %s", ev.Stream, why, b)
		}
		if why := c.check(b, ev.Seq+1, false); why != badSeq {
			t.Errorf("another seq: %q", why)
		}
		if why := c.check(b, ev.Seq, true); (why == "") != (ev.Kind == venue.KindBook && ev.Snapshot) {
			t.Errorf("as a book answer %s: %q", b, why)
		}
		for other, oc := range checks {
			if other != ev.Stream && oc.check(b, ev.Seq, false) == "" {
				t.Errorf("%s accepted on %s's subject", ev.Stream, other)
			}
		}
	}
	trade := busEvents()[2].AppendJSON(nil)
	st := busStreams[1]
	c := checks[st]
	head := `{"type":"trade","stream":"kraken:trades:XBT/USD","seq":9`
	for _, tc := range []struct{ data, why string }{
		{string(trade) + "\n" + `{"type":"notice","kind":"shutdown"}`, badNewline},
		{string(trade[:len(trade)-1]) + "\r}", badNewline},
		{string(trade) + string(trade), badJSON},
		{string(trade) + " ", badJSON},
		{string(trade[:len(trade)-1]), badJSON},
		{head + `}`, ""},
		{head + `,"x":}`, badJSON},
		{head + `0}`, badSeq},
		{`{"type":"trade","stream":"kraken:trades:XBT/USD","seq":09}`, badSeq},
		{`{"type":"trade","stream":"kraken:trades:XBT/USD","seq":-9}`, badSeq},
		{`{"type":"trade","stream":"kraken:trades:XBT/USD","seq":99999999999999999999999}`, badSeq},
		{`{"type":"trade","stream":"kraken:trades:XBT/USDT","seq":9}`, badStream},
		{`{"type":"book","stream":"kraken:trades:XBT/USD","seq":9}`, badStream},
		{`{ "type":"trade","stream":"kraken:trades:XBT/USD","seq":9}`, badStream},
		{head + `,"stream":"kraken:trades:ETH/USD"}`, badKey},
		{head + `,"seq" : 10}`, badKey},
		{head + `,"type":"notice"}`, badKey},
		{head + `,"id":"\"seq\":1"}`, ""},
		{"", badStream},
	} {
		if why := c.check([]byte(tc.data), 9, false); why != tc.why {
			t.Errorf("%q: %q, want %q", tc.data, why, tc.why)
		}
	}
}

func TestEventCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates (sync.Pool drops json.Valid's scanners)")
	}
	ev := busEvents()[0]
	b := ev.AppendJSON(nil)
	c := newEventCheck(ev.Stream)
	if n := testing.AllocsPerRun(1000, func() { c.check(b, ev.Seq, false) }); n != 0 {
		t.Fatalf("%v allocations per check", n)
	}
}

// FuzzBusMessage: whatever eventCheck accepts is one JSON object on one
// line whose type, stream and seq (each once) are the subject's, and
// which a subscriber decodes as the stream's event.
func FuzzBusMessage(f *testing.F) {
	for _, ev := range busEvents() {
		b := ev.AppendJSON(nil)
		f.Add(b, ev.Seq)
		f.Add(b[:len(b)/2], ev.Seq)
		f.Add(append(append([]byte{}, b...), '\n'), ev.Seq)
		f.Add(append(b[:len(b)-1:len(b)-1], []byte(`,"seq":1}`)...), ev.Seq)
	}
	f.Fuzz(func(t *testing.T, data []byte, seq uint64) {
		for _, st := range busStreams {
			c := newEventCheck(st)
			if c.check(data, seq, false) != "" {
				continue
			}
			for _, b := range data {
				if b == '\n' || b == '\r' {
					t.Fatalf("accepted a newline: %q", data)
				}
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("accepted %q: %v", data, err)
			}
			var stream string
			if json.Unmarshal(m["stream"], &stream) != nil || venue.Stream(stream) != st || string(m["seq"]) != strconv.FormatUint(seq, 10) {
				t.Fatalf("accepted %q on %s at seq %d", data, st, seq)
			}
			if st.Channel() == venue.Level2 && string(m["type"]) != `"book"` {
				t.Fatalf("accepted %q as a book", data)
			}
		}
	})
}

func BenchmarkEventCheck(b *testing.B) {
	for _, ev := range busEvents()[:3] {
		data := ev.AppendJSON(nil)
		c := newEventCheck(ev.Stream)
		b.Run(ev.Kind.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				c.check(data, ev.Seq, false)
			}
		})
	}
}
