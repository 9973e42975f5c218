package wsconn

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/fanoutd/fanoutd/venue"
)

// venueServer serves websocket connections that get the frames sent on
// frames, in order, each as one text message.
func venueServer(t testing.TB, frames <-chan []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := ws.CloseRead(r.Context()) // answers pings and closes; done when the client closes
		for {
			select {
			case f, ok := <-frames:
				// A context that cannot end: the write allocates nothing,
				// so BenchmarkRead's allocations are the reader's.
				if !ok || ws.Write(context.Background(), websocket.MessageText, f) != nil {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func dial(t testing.TB, url string) venue.Conn {
	t.Helper()
	c, err := Dialer(1<<20)(context.Background(), url, func() {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReadFrames reads frames with one context for the connection, as a
// link does, and then with another: every frame arrives whole and in
// order.
func TestReadFrames(t *testing.T) {
	frames := make(chan []byte, 100)
	c := dial(t, venueServer(t, frames))
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	var buf []byte
	for i := range 100 {
		want := `{"topic":"publicTrade.BTCUSDT","i":` + strconv.Itoa(i) + strings.Repeat("x", i*37) + `}`
		frames <- []byte(want)
		ctx := ctx1
		if i >= 50 {
			ctx = ctx2
		}
		var err error
		if buf, err = c.Read(ctx, buf); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if string(buf) != want {
			t.Fatalf("frame %d: %q, want %q", i, buf, want)
		}
	}
	// The first context ending no longer concerns the connection.
	cancel1()
	frames <- []byte("after")
	var err error
	if buf, err = c.Read(ctx2, buf); err != nil || string(buf) != "after" {
		t.Fatalf("after the first context ended: %q, %v", buf, err)
	}
}

// TestReadContextEnds checks that a Read waiting for a frame returns its
// context's error when the context ends, as coder/websocket's own Read
// does, and that the connection is closed then.
func TestReadContextEnds(t *testing.T) {
	frames := make(chan []byte, 1)
	c := dial(t, venueServer(t, frames))
	ctx, cancel := context.WithCancel(context.Background())
	frames <- []byte("first")
	if buf, err := c.Read(ctx, nil); err != nil || string(buf) != "first" {
		t.Fatalf("first frame: %q, %v", buf, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(ctx, nil)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Read after its context ended: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return when its context ended")
	}
	if _, err := c.Read(context.Background(), nil); err == nil {
		t.Fatal("the connection is still open after Read's context ended")
	}
}

// BenchmarkRead reads 300-byte frames from a websocket on loopback with
// one cancellable context, as a link does; the server is in the process.
// Reading allocates nothing per frame (8 allocations, 304 bytes, when
// coder/websocket was given the link's context: see conn).
func BenchmarkRead(b *testing.B) {
	frames := make(chan []byte, 1024)
	c := dial(b, venueServer(b, frames))
	f := []byte(strings.Repeat("x", 300))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for range b.N {
			frames <- f
		}
	}()
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var err error
		if buf, err = c.Read(ctx, buf); err != nil {
			b.Fatal(err)
		}
	}
}
