package venue

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestParseStream(t *testing.T) {
	for _, s := range []string{"coinbase:level2:BTC-USD", "kraken:level2:BTC/USD", "binance:trades:BTCUSDT", "okx:ticker:BTC-USDT-SWAP", "x:level2:a:b"} {
		st, err := ParseStream(s)
		if err != nil {
			t.Errorf("ParseStream(%q): %v", s, err)
			continue
		}
		if NewStream(st.Venue(), st.Channel(), st.Symbol()) != st {
			t.Errorf("%q does not split and join", s)
		}
	}
	if st, _ := ParseStream("kraken:level2:BTC/USD"); st.Venue() != "kraken" || st.Channel() != Level2 || st.Symbol() != "BTC/USD" {
		t.Errorf("parts of kraken stream: %q %q %q", st.Venue(), st.Channel(), st.Symbol())
	}
	for _, s := range []string{"", "coinbase", "coinbase:level2", "coinbase:level3:BTC-USD", "Coinbase:level2:X", "coinbase:level2:", "coinbase:level2:A B", `coinbase:level2:A"`, "coinbase:level2:" + strings.Repeat("A", 65)} {
		if _, err := ParseStream(s); err == nil {
			t.Errorf("ParseStream(%q) accepted", s)
		}
	}
}

func TestBookSetAndOrder(t *testing.T) {
	var b Book
	b.Set(Bid, d("100"), d("1"))
	b.Set(Bid, d("101"), d("2"))
	b.Set(Bid, d("99"), d("3"))
	b.Set(Ask, d("103"), d("1"))
	b.Set(Ask, d("102"), d("5"))
	if best, _ := b.Best(Bid); !best.Price.Equal(d("101")) {
		t.Fatalf("best bid %s", best.Price)
	}
	if best, _ := b.Best(Ask); !best.Price.Equal(d("102")) {
		t.Fatalf("best ask %s", best.Price)
	}
	top := b.Top(nil, Bid, 2)
	if len(top) != 2 || !top[0].Price.Equal(d("101")) || !top[1].Price.Equal(d("100")) {
		t.Fatalf("top bids %v", top)
	}
	if !b.Set(Bid, d("101"), d("0")) || b.Set(Bid, d("555"), d("0")) {
		t.Fatal("removal reports wrong change")
	}
	if b.Len(Bid) != 2 || b.Crossed() {
		t.Fatalf("len %d crossed %v", b.Len(Bid), b.Crossed())
	}
	b.Set(Bid, d("102"), d("1"))
	if !b.Crossed() {
		t.Fatal("bid at the ask not crossed")
	}
	if sz, ok := b.Get(Ask, d("103")); !ok || !sz.Equal(d("1")) {
		t.Fatal("Get ask 103")
	}
}

func TestBookTruncateReportsRemovals(t *testing.T) {
	var b Book
	for i := 1; i <= 5; i++ {
		b.Set(Ask, decimal.NewFromInt(int64(100+i)), d("1"))
	}
	removed := b.Truncate(nil, Ask, 3)
	if b.Len(Ask) != 3 || len(removed) != 2 || !removed[0].Price.Equal(d("104")) || !removed[1].Size.IsZero() {
		t.Fatalf("truncate: len %d removed %v", b.Len(Ask), removed)
	}
}

// TestBookMatchesModel applies random updates to a Book and to a map and
// compares them.
func TestBookMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var b Book
	model := map[BookSide]map[int64]int64{Bid: {}, Ask: {}}
	for range 20000 {
		s := BookSide(r.IntN(2))
		p := int64(r.IntN(200))
		sz := int64(r.IntN(4))
		b.Set(s, decimal.New(p, -2), decimal.NewFromInt(sz))
		if sz == 0 {
			delete(model[s], p)
		} else {
			model[s][p] = sz
		}
	}
	for _, s := range []BookSide{Bid, Ask} {
		if b.Len(s) != len(model[s]) {
			t.Fatalf("side %d: %d levels, model %d", s, b.Len(s), len(model[s]))
		}
		top := b.Top(nil, s, 0)
		for i, l := range top {
			if i > 0 && !better(s, top[i-1].Price, l.Price) {
				t.Fatalf("side %d not sorted at %d", s, i)
			}
			p := l.Price.Shift(2).IntPart()
			if model[s][p] != l.Size.IntPart() {
				t.Fatalf("side %d price %d size %s model %d", s, p, l.Size, model[s][p])
			}
		}
	}
	var c Book
	c.Apply(b.Snapshot("x:level2:y"))
	if !c.Equal(&b) {
		t.Fatal("book rebuilt from its snapshot differs")
	}
	var unsorted Book
	unsorted.Replace([]Level{{d("1"), d("1")}, {d("3"), d("1")}, {d("2"), d("0")}, {d("2"), d("4")}}, nil)
	if got := unsorted.Top(nil, Bid, 0); len(got) != 3 || !got[0].Price.Equal(d("3")) || !got[1].Size.Equal(d("4")) {
		t.Fatalf("unsorted replace %v", got)
	}
}

func TestEventWireRoundTrip(t *testing.T) {
	vt := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	rt := vt.Add(time.Millisecond)
	evs := []*Event{
		{Kind: KindBook, Stream: "coinbase:level2:BTC-USD", Seq: 7, Snapshot: true, VenueSeq: 42, VenueTime: vt, RecvTime: rt,
			Bids: []Level{{d("50000.10"), d("0.5")}}, Asks: []Level{{d("50000.20"), d("0")}}},
		{Kind: KindBook, Stream: "kraken:level2:BTC/USD", Seq: 1, RecvTime: rt},
		{Kind: KindTrade, Stream: "binance:trades:BTCUSDT", Seq: 3, TradeID: "12\"3", Price: d("0.00001234"), Size: d("100"), Side: SideSell, VenueTime: vt, RecvTime: rt},
		{Kind: KindTicker, Stream: "okx:ticker:BTC-USDT", Seq: 9, Bid: d("1.5"), BidSize: d("2"), Ask: d("1.6"), AskSize: d("3"), Last: decimal.NewNullDecimal(d("1.55")), RecvTime: rt},
		{Kind: KindTicker, Stream: "bybit:ticker:BTCUSDT", Seq: 9, Bid: d("1.5"), BidSize: d("2"), Ask: d("1.6"), AskSize: d("3"), RecvTime: rt},
	}
	for _, ev := range evs {
		b := ev.AppendJSON(nil)
		if !json.Valid(b) {
			t.Fatalf("invalid JSON %s", b)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got := back.AppendJSON(nil); string(got) != string(b) {
			t.Fatalf("round trip\n got %s\nwant %s", got, b)
		}
	}
	want := `{"type":"book","stream":"coinbase:level2:BTC-USD","seq":7,"snapshot":true,"venue_seq":42,"venue_time":"2026-11-30T01:02:03.456789Z","recv_time":"2026-11-30T01:02:03.457789Z","bids":[["50000.1","0.5"]],"asks":[["50000.2","0"]]}`
	if got := string(evs[0].AppendJSON(nil)); got != want {
		t.Fatalf("book wire form\n got %s\nwant %s", got, want)
	}
}

func TestCoverageTracker(t *testing.T) {
	c := NewCoverageTracker("okx")
	t1 := time.Unix(100, 0)
	c.SetLink(LinkUp, t1)
	if !c.Observe("okx:level2:A", t1) || c.Observe("okx:level2:A", t1.Add(time.Second)) {
		t.Fatal("Observe change reporting")
	}
	cov := c.Snapshot()
	if cov.Link != "up" || len(cov.Streams) != 1 || cov.Streams[0].Events != 2 {
		t.Fatalf("coverage %+v", cov)
	}
	c.SetLink(LinkDown, t1.Add(2*time.Second))
	if cov := c.Snapshot(); len(cov.Streams) != 0 || cov.Link != "down" {
		t.Fatalf("coverage after link down %+v", cov)
	}
	// The stream observed last is new again after the link came back, and
	// after it was forgotten; the others keep their counts meanwhile.
	c.SetLink(LinkUp, t1.Add(3*time.Second))
	if !c.Observe("okx:level2:A", t1) || !c.Observe("okx:level2:B", t1) || c.Observe("okx:level2:A", t1) {
		t.Fatal("Observe after link up")
	}
	if !c.Forget("okx:level2:A") || !c.Observe("okx:level2:A", t1) {
		t.Fatal("Observe after Forget")
	}
	c.Observe("okx:level2:B", t1.Add(time.Second))
	if !c.Forget("okx:level2:B") || c.Observe("okx:level2:A", t1) || !c.Observe("okx:level2:B", t1) {
		t.Fatal("Observe after forgetting the last stream observed")
	}
	if cov := c.Snapshot(); len(cov.Streams) != 2 || cov.Streams[0].Events != 2 || cov.Streams[1].Events != 1 {
		t.Fatalf("coverage %+v", cov)
	}
}

func TestBackoff(t *testing.T) {
	var b Backoff
	if b.Next() != 0 {
		t.Fatal("first retry not immediate")
	}
	wantMax := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range wantMax {
		got := b.Next()
		if got > w || got < w*4/5 {
			t.Fatalf("delay %d = %v, want in [%v, %v]", i+1, got, w*4/5, w)
		}
	}
	b.Reset()
	if b.Next() != 0 {
		t.Fatal("reset did not restart")
	}
}

// TestCanonicalDerived: equal derivations have one name, in the largest
// unit that divides the interval; the names the docs use are already it.
func TestCanonicalDerived(t *testing.T) {
	for in, want := range map[string]string{
		"book_snapshot_10_1000ms":   "book_snapshot_10_1s",
		"book_snapshot_10_100ms":    "book_snapshot_10_100ms",
		"book_snapshot_25_1s":       "book_snapshot_25_1s",
		"book_snapshot_25_60s":      "book_snapshot_25_1m",
		"book_snapshot_25_120000ms": "book_snapshot_25_2m",
		"book_snapshot_5_1500ms":    "book_snapshot_5_1500ms",
		"book_snapshot_5_90s":       "book_snapshot_5_90s",
		"book_snapshot_1_0ms":       "book_snapshot_1_0ms",
		"trade_bar_1000ms":          "trade_bar_1s",
		"trade_bar_1s":              "trade_bar_1s",
		"trade_bar_3600s":           "trade_bar_60m",
		"trade_bar_86400000ms":      "trade_bar_1440m",
		"quote":                     "quote",
		"level2":                    "level2",
	} {
		c, err := ParseChannel(in)
		if err != nil || string(c) != want {
			t.Errorf("ParseChannel(%q) = %q, %v; want %q", in, c, err, want)
		}
		if got := Channel(in).Canonical(); string(got) != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
		st, err := ParseStream("binance:" + in + ":BTCUSDT")
		if err != nil || string(st) != "binance:"+want+":BTCUSDT" {
			t.Errorf("ParseStream of %q = %q, %v", in, st, err)
		}
	}
	a, _ := ParseStream("okx:book_snapshot_3_1000ms:BTC-USDT")
	b, _ := ParseStream("okx:book_snapshot_3_1s:BTC-USDT")
	if a != b {
		t.Errorf("1000ms and 1s are two streams: %q, %q", a, b)
	}
}

func FuzzParseStream(f *testing.F) {
	for _, s := range []string{"coinbase:level2:BTC-USD", "kraken:level2:BTC/USD", "a:b:c", "::", "x:trades:\xff", "x:book_snapshot_5_60000ms:Y", "x:trade_bar_120s:Y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStream(s)
		if err != nil {
			return
		}
		if NewStream(st.Venue(), st.Channel(), st.Symbol()) != st {
			t.Fatalf("%q does not split and join", s)
		}
		// The one name: s itself, or s with its derived channel rewritten
		// to the same derivation; parsing it again changes nothing.
		if again, err := ParseStream(string(st)); err != nil || again != st {
			t.Fatalf("%q parsed to %q, which parses to %q, %v", s, st, again, err)
		}
		if string(st) != s {
			want, _ := Stream(s).Channel().Derivation()
			got, err := st.Channel().Derivation()
			if err != nil || got != want || st.Venue() != Stream(s).Venue() || st.Symbol() != Stream(s).Symbol() {
				t.Fatalf("%q rewritten to %q: %+v, want %+v", s, st, got, want)
			}
		}
	})
}

func FuzzEventUnmarshal(f *testing.F) {
	f.Add([]byte(`{"type":"book","stream":"coinbase:level2:BTC-USD","seq":7,"snapshot":true,"recv_time":"2026-11-30T01:02:03Z","bids":[["1","2"]],"asks":[]}`))
	f.Add([]byte(`{"type":"trade","stream":"binance:trades:BTCUSDT","seq":3,"id":"1","price":"1","size":"2","side":"buy","recv_time":"2026-11-30T01:02:03Z"}`))
	f.Add([]byte(`{"type":"ticker","stream":"okx:ticker:X","bid":"1","bid_size":"1","ask":"2","ask_size":"1","recv_time":"2026-11-30T01:02:03Z"}`))
	f.Add([]byte(`{"type":"book"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev Event
		if err := ev.UnmarshalJSON(b); err != nil {
			return
		}
		out := ev.AppendJSON(nil)
		var back Event
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("re-encoded event does not parse: %v\n%s", err, out)
		}
		if again := back.AppendJSON(nil); string(again) != string(out) {
			t.Fatalf("not stable:\n%s\n%s", out, again)
		}
	})
}

func BenchmarkBookUpdateNearTop(b *testing.B) {
	var book Book
	for i := range 1000 {
		book.Set(Bid, decimal.New(int64(50000_00-i), -2), d("1.00000000"))
		book.Set(Ask, decimal.New(int64(50001_00+i), -2), d("1.00000000"))
	}
	prices := make([]decimal.Decimal, 64)
	for i := range prices {
		prices[i] = decimal.New(int64(50000_00-i%10), -2)
	}
	sizes := []decimal.Decimal{d("0.50000000"), d("0"), d("2.00000000")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		book.Set(Bid, prices[i%64], sizes[i%3])
	}
}

func TestAppendDecimalMatchesString(t *testing.T) {
	for _, s := range []string{"0", "0.0", "1", "-1", "10", "100.00", "0.5", "0.50000000", "0.00001234", "-0.000100", "50000.10",
		"123456789012345678", "1234567890123456789", "99999999999999999999.5", "1e5", "1.5e-20", "-7.25e3", "0.000000000000000001"} {
		dd := d(s)
		if got, want := string(AppendDecimal(nil, dd)), dd.String(); got != want {
			t.Errorf("AppendDecimal(%s) = %q, String() = %q", s, got, want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		dd := decimal.New(r.Int64N(2e12)-1e12, int32(r.IntN(30)-20))
		if got, want := string(AppendDecimal(nil, dd)), dd.String(); got != want {
			t.Fatalf("AppendDecimal(%v) = %q, String() = %q", dd, got, want)
		}
	}
}

func FuzzAppendDecimal(f *testing.F) {
	f.Add(int64(5), int32(-1))
	f.Fuzz(func(t *testing.T, c int64, exp int32) {
		if exp > 40 || exp < -40 {
			return
		}
		dd := decimal.New(c, exp)
		if got, want := string(AppendDecimal(nil, dd)), dd.String(); got != want {
			t.Fatalf("AppendDecimal(%d e%d) = %q, String() = %q", c, exp, got, want)
		}
	})
}

func BenchmarkAppendDecimal(b *testing.B) {
	dd := d("50123.45000000")
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendDecimal(buf[:0], dd)
	}
}

func TestLifecycle(t *testing.T) {
	var l Lifecycle
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	ran := make(chan struct{}, 2)
	run := func(ctx context.Context) { ran <- struct{}{}; <-ctx.Done() }
	l.Init("x", run, run)
	if l.Venue() != "x" {
		t.Fatalf("Venue() = %q", l.Venue())
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	<-ran
	<-ran
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var stuck Lifecycle
	release := make(chan struct{})
	stuck.Init("y", func(context.Context) { <-release })
	stuck.Start(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := stuck.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop of a goroutine that ignores cancellation: %v", err)
	}
	close(release)
	stuck.Stop(context.Background())
}

func TestValidSymbol(t *testing.T) {
	for s, want := range map[string]bool{
		"BTC-USD": true, "BTC/USD": true, "btcusdt": true, "BTC-USDT-SWAP": true, strings.Repeat("A", 64): true,
		"": false, strings.Repeat("A", 65): false, "BTC USD": false, `BTC"USD`: false, `BTC\USD`: false, "BTC\x7fUSD": false, "BTC\nUSD": false, "BTC€": false,
	} {
		if got := ValidSymbol(s); got != want {
			t.Errorf("ValidSymbol(%q) = %v, want %v", s, got, want)
		}
		if got := ValidSymbol([]byte(s)); got != want {
			t.Errorf("ValidSymbol([]byte(%q)) = %v, want %v", s, got, want)
		}
	}
}

// errReader returns its data, then err.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadFrame(t *testing.T) {
	big := strings.Repeat("x", 100_000)
	buf := make([]byte, 0, 16)
	buf, err := ReadFrame(strings.NewReader("old frame, longer"), buf)
	if err != nil || string(buf) != "old frame, longer" {
		t.Fatalf("first frame %q, %v", buf, err)
	}
	// A shorter frame reuses the memory and holds nothing of the last.
	p := &buf[:1][0]
	buf, err = ReadFrame(strings.NewReader("new"), buf)
	if err != nil || string(buf) != "new" || &buf[0] != p {
		t.Fatalf("second frame %q, %v, reused %v", buf, err, &buf[0] == p)
	}
	buf, err = ReadFrame(strings.NewReader(big), buf)
	if err != nil || string(buf) != big {
		t.Fatalf("large frame: %d bytes, %v", len(buf), err)
	}
	boom := errors.New("boom")
	if _, err := ReadFrame(&errReader{data: []byte("part"), err: boom}, buf); err != boom {
		t.Fatalf("a failing reader: %v, want boom", err)
	}
}

// BenchmarkAppendJSON measures the wire encoder on a trade: a venue time in
// milliseconds and a receive time in nanoseconds, as replay --export writes.
func BenchmarkAppendJSON(b *testing.B) {
	recv := time.Date(2026, 11, 30, 5, 42, 48, 123456789, time.UTC)
	ev := Event{Kind: KindTrade, Stream: "bybit:trades:BTCUSDT", Seq: 12345, TradeID: "a1b2c3d4-0001",
		Price: d("50123.45"), Size: d("0.012"), Side: SideBuy,
		VenueTime: recv.Truncate(time.Millisecond).Add(-3 * time.Millisecond), RecvTime: recv}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = ev.AppendJSON(buf[:0])
	}
}
