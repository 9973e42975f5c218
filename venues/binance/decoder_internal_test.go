package binance

import (
	"fmt"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
)

// fetchLog is a decoder with a fetch hook that records what it asked for.
func newTestDecoder() (*Decoder, *venuetest.Sink, *[]string) {
	sink := venuetest.NewSink()
	d := NewDecoder(venue.Config{Sink: sink})
	var fetched []string
	d.hooks.fetch = func(lower string) { fetched = append(fetched, lower) }
	return d, sink, &fetched
}

func depthFrame(first, last int64, bids, asks string) []byte {
	return fmt.Appendf(nil, `{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":1700000000000,"s":"BTCUSDT","U":%d,"u":%d,"b":%s,"a":%s}}`, first, last, bids, asks)
}

func snapFrame(id int64) []byte {
	return fmt.Appendf(nil, `{"stream":"btcusdt@depthSnapshot","generated":true,"data":{"lastUpdateId":%d,"bids":[["99.00000000","1.00000000"],["98.00000000","2.00000000"]],"asks":[["101.00000000","1.00000000"]]}}`, id)
}

func TestGapResyncNamesSequences(t *testing.T) {
	d, sink, fetched := newTestDecoder()
	now := time.Now()
	d.Want("BTCUSDT")
	if len(*fetched) != 1 {
		t.Fatalf("fetches = %v, want one", *fetched)
	}
	d.Frame(now, snapFrame(100))
	d.Frame(now, depthFrame(99, 101, `[["99.00000000","3.00000000"]]`, `[]`)) // straddles 101
	d.Frame(now, depthFrame(102, 102, `[]`, `[["101.00000000","0.00000000"]]`))
	d.Frame(now, depthFrame(100, 102, `[]`, `[]`)) // stale: ignored
	d.Frame(now, depthFrame(105, 106, `[]`, `[]`)) // gap: 103 expected
	var resync *notice.Notice
	for _, n := range sink.NoticesExcept(notice.CoverageChange) {
		if n.Kind == notice.BookResync {
			resync = &n
		}
	}
	if resync == nil {
		t.Fatal("no book_resync")
	}
	if resync.Stream != "binance:level2:BTCUSDT" || resync.Details["reason"] != "gap" ||
		resync.Details["last_u"] != int64(102) || resync.Details["U"] != int64(105) || resync.Details["u"] != int64(106) {
		t.Errorf("book_resync = %+v", resync)
	}
	if len(*fetched) != 2 {
		t.Errorf("fetches = %v, want a second after the gap", *fetched)
	}
	// A snapshot older than the buffered event cannot bridge: ask again.
	d.Frame(now, snapFrame(103))
	if len(*fetched) != 3 {
		t.Errorf("fetches = %v, want a third for a snapshot that does not bridge", *fetched)
	}
	// One that does: the buffered event (105..106) straddles 105.
	d.Frame(now, snapFrame(104))
	evs := sink.Events()
	last := evs[len(evs)-1]
	if !last.Snapshot || last.VenueSeq != 106 {
		t.Errorf("last event = snapshot %v venue_seq %d, want the bridged snapshot at 106", last.Snapshot, last.VenueSeq)
	}
	d.Frame(now, depthFrame(107, 107, `[["98.00000000","0.00000000"]]`, `[]`))
	b := sink.Book("binance:level2:BTCUSDT")
	if b.Len(venue.Bid) != 1 || b.Len(venue.Ask) != 1 {
		t.Errorf("book has %d bids %d asks, want 1 and 1", b.Len(venue.Bid), b.Len(venue.Ask))
	}
	sink.Check(t)
}

func TestFirstEventMustStraddle(t *testing.T) {
	d, sink, fetched := newTestDecoder()
	now := time.Now()
	d.Frame(now, snapFrame(100))
	d.Frame(now, depthFrame(103, 104, `[]`, `[]`)) // 101 and 102 missing
	if n := sink.NoticesExcept(notice.CoverageChange); len(n) != 1 || n[0].Kind != notice.BookResync || n[0].Details["straddle"] != true {
		t.Fatalf("notices = %+v, want one book_resync (straddle)", n)
	}
	if len(*fetched) != 1 {
		t.Errorf("fetches = %v", *fetched)
	}
	sink.Check(t)
}

func TestImpossibleUpdatesResync(t *testing.T) {
	for name, frame := range map[string][]byte{
		"crossed":  depthFrame(101, 101, `[["102.00000000","1.00000000"]]`, `[]`),
		"negative": depthFrame(101, 101, `[["99.00000000","-1.00000000"]]`, `[]`),
		"bad size": depthFrame(101, 101, `[["99.00000000","1e3"]]`, `[]`),
		"U > u":    depthFrame(102, 101, `[]`, `[]`),
	} {
		t.Run(name, func(t *testing.T) {
			d, sink, fetched := newTestDecoder()
			now := time.Now()
			d.Frame(now, snapFrame(100))
			d.Frame(now, frame)
			kinds := map[notice.Kind]int{}
			for _, n := range sink.NoticesExcept(notice.CoverageChange) {
				kinds[n.Kind]++
			}
			if kinds[notice.DataQuality] != 1 || kinds[notice.BookResync] != 1 {
				t.Errorf("notices by kind = %v, want one data_quality and one book_resync", kinds)
			}
			if len(*fetched) != 1 {
				t.Errorf("fetches = %v, want one", *fetched)
			}
			if d.BadFrames() != 1 {
				t.Errorf("bad frames = %d", d.BadFrames())
			}
			sink.Check(t)
		})
	}
}

func TestDataQualityOncePerBurst(t *testing.T) {
	d, sink, _ := newTestDecoder()
	t0 := time.Now()
	for i := range 50 {
		d.Frame(t0.Add(time.Duration(i)*time.Millisecond), []byte("garbage"))
	}
	d.Frame(t0.Add(time.Minute), []byte("{"))
	n := 0
	for _, x := range sink.NoticesExcept(notice.CoverageChange) {
		if x.Kind == notice.DataQuality {
			n++
		}
	}
	if n != 2 || d.BadFrames() != 51 {
		t.Errorf("%d data_quality notices for %d bad frames, want 2 for 51", n, d.BadFrames())
	}
}

func TestLinkDownWaitsForSnapshot(t *testing.T) {
	d, sink, _ := newTestDecoder()
	now := time.Now()
	d.Frame(now, snapFrame(100))
	d.LinkDown(now)
	d.Frame(now, depthFrame(101, 101, `[]`, `[]`)) // buffered, not published
	if n := sink.NumEvents(); n != 1 {
		t.Fatalf("%d events, want only the first snapshot", n)
	}
	d.Frame(now, snapFrame(100))
	if evs := sink.Events(); len(evs) != 2 || !evs[1].Snapshot || evs[1].VenueSeq != 101 {
		t.Fatalf("events after the new snapshot: %d", len(evs))
	}
	sink.Check(t)
}

func TestResponsesAndShutdown(t *testing.T) {
	d, _, _ := newTestDecoder()
	type resp struct {
		id, code int64
		msg      string
	}
	var got []resp
	shut := 0
	d.hooks.response = func(id, code int64, msg string) { got = append(got, resp{id, code, msg}) }
	d.hooks.shutdown = func() { shut++ }
	now := time.Now()
	d.Frame(now, []byte(`{"result":null,"id":1}`))
	d.Frame(now, []byte(`{"error":{"code":2,"msg":"Invalid request: invalid stream"},"id":2}`))
	d.Frame(now, []byte(`{"stream":"!serverShutdown","data":{"e":"serverShutdown","E":1}}`))
	d.Frame(now, []byte(`{"e":"serverShutdown","E":1}`))
	want := []resp{{1, 0, ""}, {2, 2, "Invalid request: invalid stream"}}
	if fmt.Sprint(got) != fmt.Sprint(want) || shut != 2 {
		t.Errorf("responses %v shutdowns %d, want %v and 2", got, shut, want)
	}
}

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"0.35130000": "0.3513", "100": "100", "0.00000000": "0", "0": "0",
		"12345678901234567890.5": "12345678901234567890.5", "-1.5": "-1.5",
	} {
		d, ok := parseDecimal([]byte(in))
		if !ok || d.String() != want {
			t.Errorf("parseDecimal(%q) = %s, %v; want %s", in, d, ok, want)
		}
	}
	for _, in := range []string{"", "-", ".", "1.", ".5", "1.2.3", "1e5", "+1", " 1", "0x10", "1.0000000000000000000000000001"} {
		if _, ok := parseDecimal([]byte(in)); ok {
			t.Errorf("parseDecimal(%q) accepted", in)
		}
	}
}

func venueConfigForBench() venue.Config { return venue.Config{Sink: venuetest.NewSink()} }
