package wsapi

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fanoutd/fanoutd/venue"
)

// TestPanicEndsOnlyItsConnection: a panic while answering a client's
// command closes that connection (internal_error) and the server goes on
// serving the others.
func TestPanicEndsOnlyItsConnection(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	_, _, url := testServer(t, Options{Metrics: m, Check: func(st venue.Stream) error {
		if st.Symbol() == "PANIC" {
			panic("a bug in a check")
		}
		return nil
	}})
	d := websocket.Dialer{}
	bad, _, err := dial(t, &d, url, "")
	if err != nil {
		t.Fatal(err)
	}
	bad.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","id":"1","streams":["coinbase:level2:PANIC"]}`))
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := bad.ReadMessage(); err != nil {
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
				t.Fatal("the connection whose command panicked is still open")
			}
			break
		}
	}
	good, _, err := dial(t, &d, url, "")
	if err != nil {
		t.Fatal(err)
	}
	if r := command(t, good, `{"op":"subscribe","id":"2","streams":["coinbase:level2:BTC-USD"]}`); r[0]["type"] != "ack" {
		t.Fatalf("another connection after the panic: %v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(m.closes.WithLabelValues("internal_error")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("fanoutd_closes_total{reason=internal_error} is not 1")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
