package cluster

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/venue"
)

// wantRecorder is an OnWant that records what it is given and refuses
// the symbol NOPE-USD as not an instrument.
type wantRecorder struct {
	mu  sync.Mutex
	got []venue.Stream
}

func (r *wantRecorder) onWant(st venue.Stream) (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, st)
	if st.Symbol() == "NOPE-USD" {
		return "unknown_symbol", "not an instrument of coinbase"
	}
	return "", ""
}

func (r *wantRecorder) streams() []venue.Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestWantAnsweredByTheLeader: a want request on P.want.<venue> goes to
// OnWant on every ingest serving the venue, and only the leader answers:
// no error header if accepted, else Fanoutd-Error with OnWant's code and
// its message as the body; a stream of another venue is refused; a venue
// no ingest serves has no responder; a renewal (no reply subject) goes to
// OnWant stream by stream.
func TestWantAnsweredByTheLeader(t *testing.T) {
	nc := testNATS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	subj := Subjects{Prefix: "t"}
	var recs [2]*wantRecorder
	for i, lead := range []bool{true, false} {
		in := NewIngest(subj, "in", log)
		in.Tap("coinbase")
		in.pubs["coinbase"].lead.Store(lead)
		recs[i] = &wantRecorder{}
		in.OnWant = recs[i].onWant
		sub, err := nc.Subscribe(subj.Want("coinbase"), in.answerWant) // as Start does
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Unsubscribe() })
	}
	nc.Flush()
	ask := func(venueName string, streams ...string) (*nats.Msg, error) {
		b, _ := json.Marshal(Want{Node: "edge-1", Streams: streams})
		return nc.Request(subj.Want(venueName), b, 2*time.Second)
	}

	r, err := ask("coinbase", "coinbase:level2:ETH-USD")
	if err != nil || r.Header.Get(HeaderError) != "" || len(r.Data) != 0 {
		t.Fatalf("ETH-USD: %v %v", r, err)
	}
	r, err = ask("coinbase", "coinbase:trades:NOPE-USD")
	if err != nil || r.Header.Get(HeaderError) != "unknown_symbol" || string(r.Data) != "not an instrument of coinbase" {
		t.Fatalf("NOPE-USD: %+v %v", r, err)
	}
	r, err = ask("coinbase", "kraken:level2:XBT/USD")
	if err != nil || r.Header.Get(HeaderError) != "unknown_stream" {
		t.Fatalf("a kraken stream asked of coinbase: %+v %v", r, err)
	}
	if _, err := ask("kraken", "kraken:level2:XBT/USD"); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a venue no ingest serves: %v, want no responders", err)
	}
	b, _ := json.Marshal(Want{Node: "edge-1", Streams: []string{"coinbase:level2:ETH-USD", "coinbase:trades:SOL-USD"}})
	if err := nc.Publish(subj.Want("coinbase"), b); err != nil {
		t.Fatal(err)
	}
	want := []venue.Stream{"coinbase:level2:ETH-USD", "coinbase:trades:NOPE-USD", "coinbase:level2:ETH-USD", "coinbase:trades:SOL-USD"}
	for i, rec := range recs {
		testutil.Poll(5*time.Second, func() bool { return len(rec.streams()) >= len(want) })
		if got := rec.streams(); !slices.Equal(got, want) {
			t.Fatalf("ingest %d's OnWant got %v, want %v", i, got, want)
		}
	}
}

// BenchmarkWantRequest: what asking the ingest adds to the first subscribe
// of a stream on an edge: one request/reply through an embedded NATS
// server on loopback, with an OnWant that accepts at once.
func BenchmarkWantRequest(b *testing.B) {
	nc := testNATS(b)
	in := NewIngest(Subjects{Prefix: "t"}, "in", slog.New(slog.NewTextHandler(io.Discard, nil)))
	in.Tap("coinbase")
	in.pubs["coinbase"].lead.Store(true)
	in.OnWant = func(venue.Stream) (string, string) { return "", "" }
	sub, err := nc.Subscribe(in.subj.Want("coinbase"), in.answerWant)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(Want{Node: "edge-1", Streams: []string{"coinbase:level2:ETH-USD"}})
	for b.Loop() {
		if _, err := nc.Request(in.subj.Want("coinbase"), body, 2*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
