package fanout

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

const (
	l2  = venue.Stream("coinbase:level2:BTC-USD")
	tr  = venue.Stream("coinbase:trades:BTC-USD")
	tr2 = venue.Stream("coinbase:trades:ETH-USD")
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newHub(t testing.TB, bound int) (*Hub, *Feed) {
	t.Helper()
	h := NewHub(subscriber.NewRegistry())
	f, err := h.AddFeed(Options{Venue: "coinbase", MaxQueueLen: bound, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	return h, f
}

func trade(st venue.Stream, i int) *venue.Event {
	return &venue.Event{Kind: venue.KindTrade, Stream: st, TradeID: "t", Price: decimal.New(int64(100+i), -2),
		Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: t0}
}

func lvl(p, s int64) venue.Level {
	return venue.Level{Price: decimal.New(p, 0), Size: decimal.New(s, 0)}
}

func bookSnap(st venue.Stream) *venue.Event {
	return &venue.Event{Kind: venue.KindBook, Stream: st, Snapshot: true, RecvTime: t0,
		Bids: []venue.Level{lvl(99, 1), lvl(98, 2)}, Asks: []venue.Level{lvl(101, 1), lvl(102, 2)}}
}

func bookUpd(st venue.Stream, i int) *venue.Event {
	return &venue.Event{Kind: venue.KindBook, Stream: st, RecvTime: t0,
		Bids: []venue.Level{lvl(97, int64(i%5))}, Asks: []venue.Level{lvl(103+int64(i%3), int64(1+i%4))}}
}

// msg is one decoded message of a subscriber's queues.
type msg struct {
	Type     string         `json:"type"`
	Kind     string         `json:"kind"`
	Stream   string         `json:"stream"`
	Seq      uint64         `json:"seq"`
	Snapshot bool           `json:"snapshot"`
	Details  map[string]any `json:"details"`
	raw      []byte
}

// drain takes everything queued on c, notices first, and decodes it.
func drain(t testing.TB, c *subscriber.Mailbox) []msg {
	t.Helper()
	ms, _ := c.Drain(nil, math.MaxInt, math.MaxInt)
	out := make([]msg, len(ms))
	for i, m := range ms {
		if err := json.Unmarshal(m.Data, &out[i]); err != nil {
			t.Fatalf("message %d %q: %v", i, m.Data, err)
		}
		out[i].raw = m.Data
	}
	return out
}

// drainN takes at most n data messages (and every notice) from c.
func drainN(t testing.TB, c *subscriber.Mailbox, n int) []msg {
	t.Helper()
	ms, _ := c.Drain(nil, n, math.MaxInt)
	out := make([]msg, len(ms))
	for i, m := range ms {
		if err := json.Unmarshal(m.Data, &out[i]); err != nil {
			t.Fatalf("message %d %q: %v", i, m.Data, err)
		}
	}
	return out
}

func notices(ms []msg) []msg {
	var out []msg
	for _, m := range ms {
		if m.Type == "notice" {
			out = append(out, m)
		}
	}
	return out
}

func kinds(ms []msg) []string {
	var out []string
	for _, m := range notices(ms) {
		out = append(out, m.Kind)
	}
	return out
}

// gapsOf returns the gaps detail of a resumed notice as stream → [first, last].
func gapsOf(t testing.TB, m msg) map[string][2]uint64 {
	t.Helper()
	raw, ok := m.Details["gaps"].(map[string]any)
	if !ok {
		t.Fatalf("resumed notice without gaps: %+v", m.Details)
	}
	out := map[string][2]uint64{}
	for k, v := range raw {
		arr := v.([]any)
		out[k] = [2]uint64{uint64(arr[0].(float64)), uint64(arr[1].(float64))}
	}
	return out
}

func num(t testing.TB, m msg, key string) int {
	t.Helper()
	v, ok := m.Details[key].(float64)
	if !ok {
		t.Fatalf("notice %s has no numeric %q: %+v", m.Kind, key, m.Details)
	}
	return int(v)
}
