package wsapi

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"
	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		op   Op
		code api.Code
		id   string
	}{
		{`{"op":"ping","id":"4"}`, OpPing, "", "4"},
		{`{"op":"subscribe","id":"1","streams":["coinbase:level2:BTC-USD","kraken:trades:BTC/USD"]}`, OpSubscribe, "", "1"},
		{`{"op":"unsubscribe","id":"2","streams":["coinbase:level2:BTC-USD"]}`, OpUnsubscribe, "", "2"},
		{`{"op":"snapshot","id":"3","stream":"coinbase:level2:BTC-USD"}`, OpSnapshot, "", "3"},
		{`{"op":"snapshot","id":"3"}`, "", api.CodeBadRequest, "3"},
		{`{"op":"subscribe","id":"1","streams":"x"}`, "", api.CodeBadRequest, "1"},
		{`{"op":"subscribe","id":"1","streams":["a:b"]}`, "", api.CodeBadRequest, "1"},
		{`{"op":"frob","id":"9"}`, "", api.CodeUnknownOp, "9"},
		{`[]`, "", api.CodeBadRequest, ""},
		{`{"id":"5"}`, "", api.CodeBadRequest, "5"},
		{`{"op":"ping","id":"` + strings.Repeat("x", 65) + `"}`, "", api.CodeBadRequest, ""},
	} {
		c, err := ParseCommand([]byte(tc.in))
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.code != "" && (err == nil || err.Code != tc.code || err.ID != tc.id):
			t.Errorf("%s: got %v, want %s with id %q", tc.in, err, tc.code, tc.id)
		case tc.code == "" && (c.Op != tc.op || c.ID != tc.id):
			t.Errorf("%s: got %+v", tc.in, c)
		}
	}
}

// FuzzParseCommand: the parser never panics, and every refusal has a
// stable code and an id no longer than the bound.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		`{"op":"subscribe","id":"1","streams":["coinbase:level2:BTC-USD","kraken:trades:BTC/USD"]}`,
		`{"op":"unsubscribe","id":"2","streams":["coinbase:level2:BTC-USD"]}`,
		`{"op":"snapshot","id":"3","stream":"coinbase:level2:BTC-USD"}`,
		`{"op":"ping","id":"4"}`,
		`{"op":"recover","id":"5","stream":"coinbase:trades:BTC-USD","from":12}`,
		`{"op":"subscribe","id":"1","streams":["coinbase:level2:BTC-`, // truncated
		`{"op":"ping","id":4}`, `{"op":null}`, `{}`, `null`, `"x"`, ``, `{"op":"subscribe","streams":[null]}`,
	} {
		f.Add([]byte(s))
	}
	valid := map[api.Code]bool{}
	for _, c := range api.Codes {
		valid[c] = true
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCommand(b)
		if err != nil {
			if !valid[err.Code] || len(err.ID) > maxIDLen {
				t.Fatalf("bad refusal %+v", err)
			}
			return
		}
		switch c.Op {
		case OpPing:
		case OpRecover:
			if len(c.Streams) != 1 || c.From == 0 {
				t.Fatalf("recover %+v", c)
			}
		case OpSubscribe, OpUnsubscribe, OpSnapshot:
			if len(c.Streams) == 0 {
				t.Fatalf("%s with no streams", c.Op)
			}
			for _, st := range c.Streams {
				if _, err := venue.ParseStream(string(st)); err != nil {
					t.Fatalf("accepted bad stream %q", st)
				}
			}
		default:
			t.Fatalf("accepted op %q", c.Op)
		}
	})
}

// rawClient reads a websocket connection frame by frame without
// allocating, counting the '\n'-separated objects of each text message.
type rawClient struct {
	conn    net.Conn
	objects atomic.Int64
}

var nl = []byte{'\n'}

func (c *rawClient) read() {
	r := bufio.NewReaderSize(c.conn, 64<<10)
	var hdr [8]byte
	for {
		b0, err := r.ReadByte()
		if err != nil {
			return
		}
		b1, err := r.ReadByte()
		if err != nil {
			return
		}
		n := int64(b1 & 0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(r, hdr[:2]); err != nil {
				return
			}
			n = int64(binary.BigEndian.Uint16(hdr[:2]))
		case 127:
			if _, err := io.ReadFull(r, hdr[:8]); err != nil {
				return
			}
			n = int64(binary.BigEndian.Uint64(hdr[:8]))
		}
		op := b0 & 0x0f
		var count int64
		for n > 0 {
			p, err := r.Peek(int(min(n, int64(r.Buffered()), 64<<10)))
			if len(p) == 0 {
				if _, err = r.Peek(1); err != nil {
					return
				}
				continue
			}
			if op == 1 || op == 0 {
				// bytes.Count, not a byte loop: the loop's speed moved
				// with the code's alignment in the binary, by a tenth of
				// the benchmark's CPU (docs/design.md).
				count += int64(bytes.Count(p, nl))
			}
			r.Discard(len(p))
			n -= int64(len(p))
		}
		if op == 8 {
			return
		}
		if (op == 1 || op == 0) && b0&0x80 != 0 {
			count++
		}
		c.objects.Add(count)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBroadcast1000 publishes one ~200-byte event to 1000 websocket
// subscribers on loopback per op and waits, every 100 events, until every
// subscriber has read what was sent (centrifuge's broadcast benchmarks
// wait for queues to drain the same way). It reports the process CPU per
// delivered message — server and the 1000 allocation-free raw clients
// together, as they share the process — and the allocations per event
// (the clients allocate nothing, so these are the server's).
func BenchmarkBroadcast1000(b *testing.B) { benchmarkBroadcast(b, 0, false) }

// BenchmarkBroadcast1000WriteDelay is BenchmarkBroadcast1000 with the
// daemon's default write delay: the write pool writes the batches.
func BenchmarkBroadcast1000WriteDelay(b *testing.B) { benchmarkBroadcast(b, 2*time.Millisecond, false) }

// BenchmarkBroadcast1000Uring is BenchmarkBroadcast1000WriteDelay with
// the write pool's sends through io_uring.
func BenchmarkBroadcast1000Uring(b *testing.B) { benchmarkBroadcast(b, 2*time.Millisecond, true) }

func benchmarkBroadcast(b *testing.B, delay time.Duration, uring bool) {
	const subs = 1000
	hub := fanout.NewHub(subscriber.NewRegistry())
	feed, _ := hub.AddFeed(fanout.Options{Venue: "coinbase", MaxQueueLen: 1 << 20})
	srv := NewServer(Options{Hub: hub, Logger: discardLogger(), WriteDelay: delay, Uring: uring})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()
	st := venue.Stream("coinbase:trades:BTC-USD")
	clients := make([]*rawClient, subs)
	done := make(chan struct{}, subs)
	for i := range clients {
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/stream", nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","id":"1","streams":["coinbase:trades:BTC-USD"]}`)); err != nil {
			b.Fatal(err)
		}
		clients[i] = &rawClient{conn: ws.NetConn()}
		go func() { clients[i].read(); done <- struct{}{} }()
	}
	total := func() int64 {
		var n int64
		for _, c := range clients {
			n += c.objects.Load()
		}
		return n
	}
	waitFor := func(n int64) {
		for total() < n {
			runtime.Gosched()
			time.Sleep(50 * time.Microsecond)
		}
	}
	waitFor(subs) // the acks
	ev := func(i int) *venue.Event {
		return &venue.Event{Kind: venue.KindTrade, Stream: st, TradeID: "trade-0000000000000000000000000000000000000000000000000000",
			Price: decimal.New(int64(5000000+i), -2), Size: decimal.New(12345, -4), Side: venue.SideSell, RecvTime: time.Now(), VenueTime: time.Now()}
	}
	feed.Publish(ev(0))
	waitFor(2 * subs)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		feed.Publish(ev(i))
		if i%100 == 99 {
			waitFor(int64(i+3) * subs)
		}
	}
	waitFor(int64(b.N+2) * subs)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*subs), "cpu-ns/delivery")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/event")
	if d := feed.Counters().Dropped.Load(); d != 0 {
		b.Fatalf("%d dropped", d)
	}
	for _, c := range clients {
		c.conn.Close()
	}
	for range clients {
		<-done
	}
}
