package wsapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

func TestParseRecover(t *testing.T) {
	c, err := ParseCommand([]byte(`{"op":"recover","id":"r","stream":"coinbase:trades:BTC-USD","from":42}`))
	if err != nil || c.Op != OpRecover || c.From != 42 || len(c.Streams) != 1 || c.Streams[0] != "coinbase:trades:BTC-USD" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, in := range []string{
		`{"op":"recover","id":"r","stream":"coinbase:trades:BTC-USD"}`,
		`{"op":"recover","id":"r","stream":"coinbase:trades:BTC-USD","from":0}`,
		`{"op":"recover","id":"r","stream":"coinbase:trades:BTC-USD","from":-3}`,
		`{"op":"recover","id":"r","stream":"coinbase:trades:BTC-USD","from":1.5}`,
		`{"op":"recover","id":"r","stream":"coinbase:trades:BTC-USD","from":"x"}`,
		`{"op":"recover","id":"r","from":3}`,
		`{"op":"recover","id":"r","stream":"nope","from":3}`,
	} {
		if _, err := ParseCommand([]byte(in)); err == nil || err.Code != api.CodeBadRequest || err.ID != "r" {
			t.Errorf("%s: %v, want bad_request with its id", in, err)
		}
	}
}

// TestRecoverOp: over a real websocket, recover answers with its reply and
// then the events from the seq asked for, in order; a seq the window no
// longer holds is an error reply naming the oldest seq held; bad requests
// get error replies and the connection stays.
func TestRecoverOp(t *testing.T) {
	hub := fanout.NewHub(subscriber.NewRegistry())
	hub.SetRecovery(fanout.RecoveryOptions{MaxEventsPerStream: 10, MaxBytes: 1 << 20, MaxAge: time.Hour})
	feed, _ := hub.AddFeed(fanout.Options{Venue: "coinbase", MaxQueueLen: 100})
	srv := NewServer(Options{Hub: hub, Logger: discardLogger()})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	type obj struct {
		Type, ID, Code, Message, Stream string
		Seq, From, To                   uint64
	}
	var pending []obj
	next := func() obj {
		t.Helper()
		for len(pending) == 0 {
			ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, b, err := ws.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var o obj
				if err := json.Unmarshal([]byte(l), &o); err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				pending = append(pending, o)
			}
		}
		o := pending[0]
		pending = pending[1:]
		return o
	}
	send := func(v string) {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	const tr = "coinbase:trades:BTC-USD"
	send(`{"op":"subscribe","id":"s","streams":["` + tr + `"]}`)
	if o := next(); o.Type != "ack" {
		t.Fatalf("%+v", o)
	}
	for i := range 15 {
		feed.Publish(&venue.Event{Kind: venue.KindTrade, Stream: tr, TradeID: "t", Price: decimal.New(int64(100+i), 0), Size: decimal.New(1, 0), Side: venue.SideBuy})
	}
	for s := uint64(1); s <= 15; s++ {
		if o := next(); o.Seq != s {
			t.Fatalf("live seq %d, want %d", o.Seq, s)
		}
	}
	send(`{"op":"recover","id":"r1","stream":"` + tr + `","from":9}`)
	if o := next(); o.Type != "recover" || o.ID != "r1" || o.Stream != tr || o.From != 9 || o.To != 15 {
		t.Fatalf("reply %+v", o)
	}
	for s := uint64(9); s <= 15; s++ {
		if o := next(); o.Type != "trade" || o.Seq != s {
			t.Fatalf("recovered %+v, want seq %d", o, s)
		}
	}
	for _, tc := range []struct{ cmd, code, msg string }{
		{`{"op":"recover","id":"r2","stream":"` + tr + `","from":3}`, "not_recoverable", "oldest seq held: 6"},
		{`{"op":"recover","id":"r2","stream":"coinbase:trades:ETH-USD","from":3}`, "not_subscribed", ""},
		{`{"op":"recover","id":"r2","stream":"` + tr + `","from":0}`, "bad_request", ""},
	} {
		send(tc.cmd)
		if o := next(); o.Type != "error" || o.ID != "r2" || o.Code != tc.code || !strings.Contains(o.Message, tc.msg) {
			t.Fatalf("%s: %+v, want %s", tc.cmd, o, tc.code)
		}
	}
	send(`{"op":"recover","id":"r3","stream":"` + tr + `","from":16}`)
	if o := next(); o.Type != "recover" || o.From != 16 || o.To != 15 {
		t.Fatalf("recover from the next seq: %+v, want an empty range", o)
	}
	send(`{"op":"ping","id":"p"}`)
	if o := next(); o.Type != "pong" {
		t.Fatalf("after the errors: %+v", o)
	}
	if k := feed.RecoveryCounters(); k.Served.Load() != 1 || k.RefusedWindow.Load() != 1 {
		t.Fatalf("served %d, refused %d", k.Served.Load(), k.RefusedWindow.Load())
	}
}
