//go:build linux

package bench

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/testutil"
)

// TestEpollRead: the epoll readers count every event of every connection
// over real sockets (messages of one event and of many, one larger than
// 64 KiB, split across reads), answer a websocket ping with a pong and
// Centrifugo's "{}" with "{}", and end when the server closes.
func TestEpollRead(t *testing.T) {
	const conns, events = 5, 300
	var pongs, appPongs sync.WaitGroup
	pongs.Add(conns)
	appPongs.Add(conns)
	release, finished := make(chan struct{}), make(chan struct{})
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ws.SetPongHandler(func(string) error { pongs.Done(); return nil })
		go func() {
			for {
				_, m, err := ws.ReadMessage()
				if err != nil {
					return
				}
				if string(m) == "{}" {
					appPongs.Done()
				}
			}
		}()
		<-release
		now := time.Now().UTC()
		ev := `{"type":"trade","recv_time":"` + now.Format(time.RFC3339Nano) + `"}`
		ws.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second))
		ws.WriteMessage(websocket.TextMessage, []byte("{}"))
		for i := 0; i < events-100; i++ {
			ws.WriteMessage(websocket.TextMessage, []byte(ev))
		}
		ws.WriteMessage(websocket.TextMessage, []byte(strings.Repeat(ev+"\n", 99)+ev+strings.Repeat(" ", 70<<10)))
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		<-finished // the socket stays open until the client has read all
	}))
	defer srv.Close()
	defer close(finished)
	var cs []*websocket.Conn
	for range conns {
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		cs = append(cs, ws)
	}
	from := time.Now().Add(-time.Minute)
	to := time.Now().Add(time.Minute)
	results := make([]latResult, conns)
	for i := range results {
		results[i] = latResult{hist: make([]int64, latBuckets+1), from: from, to: to, last: to}
	}
	var wg sync.WaitGroup
	if !epollRead(cs, results, time.Now(), func() {}, &wg) {
		t.Fatal("epollRead did not start")
	}
	close(release)
	wg.Wait()
	for i, r := range results {
		if r.total != events || r.received != events {
			t.Errorf("connection %d: read %d events, %d in the window; want %d", i, r.total, r.received, events)
		}
	}
	done := make(chan struct{})
	go func() { pongs.Wait(); appPongs.Wait(); close(done) }()
	testutil.WaitFor(t, 10*time.Second, "every connection answered the ping and Centrifugo's {}", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// TestServerFrames: frames split anywhere are kept for the next read.
func TestServerFrames(t *testing.T) {
	var all []byte
	for _, n := range []int{0, 5, 125, 126, 300, 70000} {
		all = appendTestFrame(all, websocket.TextMessage, bytes.Repeat([]byte("x"), n))
	}
	for cut := range len(all) {
		var got []int
		rest, _ := serverFrames(all[:cut], func(_ byte, p []byte) { got = append(got, len(p)) })
		rest2, closed := serverFrames(append(append([]byte(nil), rest...), all[cut:]...), func(_ byte, p []byte) { got = append(got, len(p)) })
		if len(rest2) != 0 || closed || len(got) != 6 || got[5] != 70000 || got[3] != 126 {
			t.Fatalf("cut at %d: frames %v, rest %d", cut, got, len(rest2))
		}
		if cut > 200 {
			cut += 997 // every cut near the headers, a sample of the rest
		}
	}
}

func appendTestFrame(dst []byte, op byte, p []byte) []byte {
	switch n := len(p); {
	case n <= 125:
		dst = append(dst, 0x80|op, byte(n))
	case n <= 0xffff:
		dst = append(dst, 0x80|op, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0x80|op, 127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, p...)
}
