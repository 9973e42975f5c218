package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

const recTrades = venue.Stream("coinbase:trades:BTC-USD")

func recTrade(seq uint64) *venue.Event {
	return &venue.Event{Kind: venue.KindTrade, Stream: recTrades, Seq: seq, TradeID: strconv.FormatUint(seq, 10),
		Price: decimal.New(100, 0), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Unix(1, 0).UTC()}
}

// TestParseRange: a recover reply's body is the stream's events from the
// first seq asked for, one a line, each as eventCheck accepts it on the
// stream's subject; anything else is refused whole.
func TestParseRange(t *testing.T) {
	c := newEventCheck(recTrades)
	var lines [][]byte
	for seq := uint64(5); seq <= 8; seq++ {
		lines = append(lines, recTrade(seq).AppendJSON(nil))
	}
	body := bytes.Join(lines, []byte{'\n'})
	got, why := parseRange(body, &c, 5, 10)
	if why != "" || len(got) != 4 || !bytes.Equal(got[3], lines[3]) {
		t.Fatalf("%q, %d events", why, len(got))
	}
	other := recTrade(7)
	other.Stream = "coinbase:trades:ETH-USD"
	for _, tc := range []struct {
		name        string
		body        []byte
		first, last uint64
		why         string
	}{
		{"empty", nil, 5, 10, badJSON},
		{"from another seq", body, 4, 10, badSeq},
		{"more than asked", body, 5, 7, badSeq},
		{"trailing newline", append(slices.Clone(body), '\n'), 5, 10, badJSON},
		{"an empty line", bytes.Join([][]byte{lines[0], nil, lines[1]}, []byte{'\n'}), 5, 10, badStream},
		{"a CR", bytes.Join(lines, []byte("\r\n")), 5, 10, badNewline},
		{"a hole", bytes.Join([][]byte{lines[0], lines[2]}, []byte{'\n'}), 5, 10, badSeq},
		{"another stream", bytes.Join([][]byte{lines[0], lines[1], other.AppendJSON(nil)}, []byte{'\n'}), 5, 10, badStream},
		{"too long", bytes.Repeat(append(slices.Clone(lines[0]), '\n'), MaxRecoverReply/len(lines[0])+1), 5, 1 << 20, badSize},
		{"no range", body, 5, 4, badSeq},
	} {
		if _, why := parseRange(tc.body, &c, tc.first, tc.last); why != tc.why {
			t.Errorf("%s: %q, want %q", tc.name, why, tc.why)
		}
	}
}

// FuzzRecoverReply: whatever parseRange accepts is a run of the stream's
// events at consecutive seqs from the first asked for, none past the last,
// each one JSON object on one line.
func FuzzRecoverReply(f *testing.F) {
	var lines [][]byte
	for seq := uint64(5); seq <= 8; seq++ {
		lines = append(lines, recTrade(seq).AppendJSON(nil))
	}
	body := bytes.Join(lines, []byte{'\n'})
	f.Add(body, uint64(5), uint64(8))
	f.Add(body[:len(body)/2], uint64(5), uint64(8))
	f.Add(append(slices.Clone(body), '\n'), uint64(5), uint64(9))
	f.Add(lines[0], uint64(5), uint64(5))
	f.Fuzz(func(t *testing.T, data []byte, first, last uint64) {
		c := newEventCheck(recTrades)
		got, why := parseRange(data, &c, first, last)
		if why != "" {
			return
		}
		if len(got) == 0 || first+uint64(len(got))-1 > last || first == 0 {
			t.Fatalf("accepted %d events for %d..%d", len(got), first, last)
		}
		for i, ev := range got {
			var m map[string]json.RawMessage
			if bytes.ContainsAny(ev, "\r\n") || json.Unmarshal(ev, &m) != nil || string(m["seq"]) != strconv.FormatUint(first+uint64(i), 10) ||
				string(m["stream"]) != `"`+string(recTrades)+`"` {
				t.Fatalf("accepted %q as seq %d", ev, first+uint64(i))
			}
		}
	})
}

// TestRecoverAnsweredFromTheWindow: the leading ingest answers a range of
// its feed's window, in pieces of at most MaxRecoverReply, and an edge's
// fetchRange joins them into the whole range; a range the window does not
// hold is refused with the oldest seq held, a standby does not answer.
func TestRecoverAnsweredFromTheWindow(t *testing.T) {
	nc := testNATS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	subj := Subjects{Prefix: "t"}
	h := fanout.NewHub(subscriber.NewRegistry())
	h.SetRecovery(fanout.RecoveryOptions{MaxEventsPerStream: 5000, MaxBytes: 1 << 30, MaxAge: time.Hour})
	var ingests []*Ingest
	for _, lead := range []bool{true, false} {
		in := NewIngest(subj, "in", log)
		tap := in.Tap("coinbase")
		f, _ := h.AddFeed(fanout.Options{Venue: "coinbase", KeepWindows: true, Tap: tap})
		if lead {
			for range 4000 {
				f.Publish(recTrade(0))
			}
		}
		in.pubs["coinbase"].lead.Store(lead)
		in.feeds = map[string]*fanout.Feed{"coinbase": f}
		in.nc = nc
		sub, err := nc.Subscribe(subj.Recover("coinbase"), in.answerRecover) // as Start does
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Unsubscribe() })
		ingests = append(ingests, in)
		h = fanout.NewHub(subscriber.NewRegistry())
		h.SetRecovery(fanout.RecoveryOptions{MaxEventsPerStream: 5000, MaxBytes: 1 << 30, MaxAge: time.Hour})
	}
	nc.Flush()
	ask := func(from, to uint64) *nats.Msg {
		t.Helper()
		b, _ := json.Marshal(RecoverRequest{Stream: string(recTrades), From: from, To: to})
		r, err := nc.Request(subj.Recover("coinbase"), b, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := ask(1, 4000)
	c := newEventCheck(recTrades)
	got, why := parseRange(r.Data, &c, 1, 4000)
	if why != "" || len(got) == 0 || len(got) == 4000 || len(r.Data) > MaxRecoverReply || r.Header.Get(HeaderEpoch) != ingests[0].Epoch() {
		t.Fatalf("first piece: %q, %d events, %d bytes", why, len(got), len(r.Data))
	}
	e := NewEdge(subj, "edge", log)
	e.nc = nc
	es := &edgeStream{e: e, v: &edgeVenue{e: e, name: "coinbase"}, id: recTrades, check: newEventCheck(recTrades)}
	all, ok := es.fetchRange(2, 4000, ingests[0].Epoch(), func() bool { return false })
	if !ok || len(all) != 3999 {
		t.Fatalf("fetchRange: %v, %d events", ok, len(all))
	}
	for i, ev := range all {
		if !bytes.Contains(ev, []byte(`"seq":`+strconv.Itoa(i+2)+`,`)) {
			t.Fatalf("event %d: %s", i, ev)
		}
	}
	if _, ok := es.fetchRange(2, 4000, "another epoch", func() bool { return false }); ok {
		t.Fatal("a range of another epoch accepted")
	}
	if r := ask(4001, 4005); r.Header.Get(HeaderError) != recoverRefused || r.Header.Get(HeaderOldest) != "1" {
		t.Fatalf("past the newest: %v", r.Header)
	}
	b, _ := json.Marshal(RecoverRequest{Stream: "kraken:trades:XBT/USD", From: 1, To: 2})
	if r, err := nc.Request(subj.Recover("coinbase"), b, 2*time.Second); err != nil || r.Header.Get(HeaderError) != recoverBad {
		t.Fatalf("a kraken stream: %v %v", r, err)
	}
}
