package daemon_test

// The second round of the hostile-clients suite: names, rebinding, limits,
// scopes and error bodies, each against a daemon on real sockets (the
// helpers are hostile_test.go's).

import (
	"net/http"
	"testing"

	"github.com/gorilla/websocket"
)

// TestHostileScopeAcrossColons: a token scoped to "*:trades:*" subscribes
// to a Coinbase level2 stream whose symbol spells ":trades:". Promise: each
// part of a pattern matches its own part of the stream, so '*' never
// reaches across a ':' — unauthorized; its real trades stream is acked.
func TestHostileScopeAcrossColons(t *testing.T) {
	h := startHostile(t, twoVenues+"tokens:\n  - {name: t, token: secret-t, streams: [\"*:trades:*\"]}\n")
	ws, _, err := wsDial(t, websocket.DefaultDialer, h, "", "secret-t")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{"coinbase:level2:X:trades:Y", "coinbase:level2:BTC-USD:trades:BTC-USD", "kraken:level2:BTC/USD:trades:"} {
		if r := replyTo(t, ws, "x", `{"op":"subscribe","id":"x","streams":["`+st+`"]}`); r["code"] != "unauthorized" {
			t.Errorf("%s under *:trades:*: %v, want unauthorized", st, r)
		}
	}
	if r := replyTo(t, ws, "ok", `{"op":"subscribe","id":"ok","streams":["coinbase:trades:BTC-USD"]}`); r["type"] != "ack" {
		t.Errorf("coinbase:trades:BTC-USD under *:trades:*: %v, want ack", r)
	}
	resp, body := get(t, h.URL("http")+"/v1/books/coinbase/X:trades:Y", "secret-t")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/v1/books/coinbase/X:trades:Y under *:trades:*: %s %s, want 403", resp.Status, body)
	}
}
