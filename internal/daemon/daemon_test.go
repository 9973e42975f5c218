package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { natstest.RemoveBinary() }))
}

func TestNewNeedsConfig(t *testing.T) {
	if _, err := daemon.New(daemon.Options{}); err == nil {
		t.Fatal("New without Config succeeded")
	}
}

// TestStartWithChosenVenues starts a daemon on one venue (Coinbase, against
// its mock over a real websocket) in a few lines and reads a book through
// the websocket API.
func TestStartWithChosenVenues(t *testing.T) {
	mock := &coinbasetest.Mock{}
	mock.Start(t)
	cb, _ := venues.Lookup("coinbase")
	d := daemontest.Start(t, "venues:\n  coinbase:\n    ws_url: "+mock.Server().URL+"\n    symbols: []\n",
		daemon.Options{Venues: []venues.Venue{cb}})

	ws, _, err := websocket.DefaultDialer.Dial(d.URL("ws")+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	stream := "coinbase:level2:" + mock.Symbol()
	if err := ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": []string{stream}}); err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("no snapshot of %s: %v", stream, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(msg)), "\n") {
			var ev struct {
				Type, Stream string
				Snapshot     bool
			}
			json.Unmarshal([]byte(line), &ev)
			if ev.Stream == stream && ev.Snapshot {
				return
			}
		}
	}
}

// TestTooManySymbolsIsAnErrorReply: past venues.<v>.max_symbols a subscribe
// to a new symbol gets a too_many_symbols error reply, and the connection
// stays usable.
func TestTooManySymbolsIsAnErrorReply(t *testing.T) {
	src := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) { return testsource.New("coinbase", c), nil }}
	d := daemontest.Start(t, "venues:\n  coinbase:\n    symbols: [BTC-USD]\n    max_symbols: 2\n", daemon.Options{Venues: []venues.Venue{src}})
	ws, _, err := websocket.DefaultDialer.Dial(d.URL("ws")+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	reply := func(id string, cmd map[string]any) map[string]any {
		t.Helper()
		cmd["id"] = id
		if err := ws.WriteJSON(cmd); err != nil {
			t.Fatal(err)
		}
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("no reply to %s: %v", id, err)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(msg)), "\n") {
				var m map[string]any
				json.Unmarshal([]byte(line), &m)
				if m["id"] == id {
					return m
				}
			}
		}
	}
	if r := reply("1", map[string]any{"op": "subscribe", "streams": []string{"coinbase:trades:ETH-USD"}}); r["type"] != "ack" {
		t.Fatalf("second symbol: %v", r)
	}
	if r := reply("2", map[string]any{"op": "subscribe", "streams": []string{"coinbase:trades:SOL-USD"}}); r["type"] != "error" || r["code"] != "too_many_symbols" {
		t.Fatalf("third symbol past max_symbols 2: %v", r)
	}
	if r := reply("3", map[string]any{"op": "ping"}); r["type"] != "pong" {
		t.Fatalf("after the refusal: %v", r)
	}
}
