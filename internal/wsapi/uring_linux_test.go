//go:build linux && (amd64 || arm64)

package wsapi

import (
	"bytes"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/rawio"
	"github.com/fanoutd/fanoutd/venue"
)

// TestWritePoolRingFails breaks every worker's ring under live
// connections: those whose sends were in the failed submission end
// (write_failed), the workers go on with write(2), and a new connection
// gets its events.
func TestWritePoolRingFails(t *testing.T) {
	var mu sync.Mutex
	var rings []*rawio.Ring
	defer func(f func(uint32) (*rawio.Ring, error)) { openRing = f }(openRing)
	openRing = func(n uint32) (*rawio.Ring, error) {
		r, err := rawio.NewRing(n)
		if err == nil {
			mu.Lock()
			rings = append(rings, r)
			mu.Unlock()
		}
		return r, err
	}
	feed, url, metrics := poolServer(t, Options{WriteDelay: time.Millisecond, Uring: true}, 0)
	mu.Lock()
	n := len(rings)
	mu.Unlock()
	if n == 0 {
		t.Skip("io_uring unavailable here")
	}
	workers := func() (uring, write float64) {
		return testutil.ToFloat64(metrics.writeWorkers.WithLabelValues("io_uring")), testutil.ToFloat64(metrics.writeWorkers.WithLabelValues("write"))
	}
	if u, w := workers(); u != float64(n) || w != 0 {
		t.Fatalf("fanoutd_write_workers io_uring %v, write %v; want %d, 0", u, w, n)
	}
	pub := func(i int) {
		feed.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: "t",
			Price: decimal.New(int64(i), -2), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Now(), VenueTime: time.Now()})
	}
	readTrade := func(ws *websocket.Conn) error {
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, m, err := ws.ReadMessage()
		if err == nil && !bytes.Contains(m, []byte(`"trade"`)) {
			err = fmt.Errorf("read %q, want a trade", m)
		}
		return err
	}
	// One connection per worker (they are dealt round-robin), so that
	// every ring has a send when it fails.
	var conns []*websocket.Conn
	for range n {
		conns = append(conns, dialSubscribed(t, url))
	}
	pub(1)
	for _, ws := range conns {
		if err := readTrade(ws); err != nil {
			t.Fatalf("before the failure: %v", err)
		}
	}
	// /dev/null takes each ring's descriptor number: the next
	// io_uring_enter fails, and closing the ring closes only that.
	null, err := syscall.Open("/dev/null", syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(null)
	mu.Lock()
	for _, r := range rings {
		if err := syscall.Dup2(null, r.FD()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Unlock()
	pub(2)
	for i, ws := range conns {
		if err := readTrade(ws); err == nil {
			t.Fatalf("connection %d, whose send failed with its ring, is still open", i)
		}
	}
	if u, w := workers(); u != 0 || w != float64(n) {
		t.Fatalf("after the failure fanoutd_write_workers io_uring %v, write %v; want 0, %d", u, w, n)
	}
	ws2 := dialSubscribed(t, url)
	pub(3)
	if err := readTrade(ws2); err != nil {
		t.Fatalf("a connection after the ring failed: %v", err)
	}
}
