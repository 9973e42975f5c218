package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venues"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

// TestDerivedStreamsOverWebsocket: derived streams of any depth and
// interval are served without configuration, with their own seq; a
// derived channel that venues.<v>.channels does not list is refused when
// it lists some.
func TestDerivedStreamsOverWebsocket(t *testing.T) {
	mock := &coinbasetest.Mock{}
	mock.Start(t)
	cb, _ := venues.Lookup("coinbase")
	d := daemontest.Start(t, "venues:\n  coinbase:\n    ws_url: "+mock.Server().URL+"\n    symbols: []\n    channels: [level2, trades, quote, book_snapshot_7_0ms]\n",
		daemon.Options{Venues: []venues.Venue{cb}})
	ws, _, err := websocket.DefaultDialer.Dial(d.URL("ws")+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	snap := "coinbase:book_snapshot_7_0ms:" + mock.Symbol()
	quote := "coinbase:quote:" + mock.Symbol()
	refused := "coinbase:book_snapshot_10_100ms:" + mock.Symbol()
	ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": []string{snap, quote}})
	ws.WriteJSON(map[string]any{"op": "subscribe", "id": "2", "streams": []string{refused}})
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := map[string]int{}
	var refusal map[string]any
	for got[snap] == 0 || got[quote] == 0 || refusal == nil {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("got %v, refusal %v: %v", got, refusal, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(msg)), "\n") {
			var m map[string]any
			json.Unmarshal([]byte(line), &m)
			if m["id"] == "2" {
				refusal = m
			}
			st, _ := m["stream"].(string)
			if st == snap || st == quote {
				got[st]++
				if seq, _ := m["seq"].(float64); int(seq) != got[st] {
					t.Fatalf("%s: seq %v, want %d", st, m["seq"], got[st])
				}
				if st == snap && (m["type"] != "book" || m["snapshot"] != true) || st == quote && m["type"] != "quote" {
					t.Fatalf("message %s", line)
				}
			}
		}
	}
	if refusal["type"] != "error" {
		t.Fatalf("subscribe to an unlisted derived channel: %v", refusal)
	}
}
