package faults_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor is testutil.WaitFor, the one polling helper of the tests.
var waitFor = testutil.WaitFor

// line is one object a subscriber received.
type line struct {
	Type     string          `json:"type"`
	Kind     string          `json:"kind"`
	Stream   string          `json:"stream"`
	Seq      uint64          `json:"seq"`
	Snapshot bool            `json:"snapshot"`
	Code     string          `json:"code"`
	ID       string          `json:"id"`
	Details  json.RawMessage `json:"details"`
	raw      string
}

// subscriber is a websocket client that reads everything the daemon sends.
type subscriber struct {
	ws    *websocket.Conn
	mu    sync.Mutex // protects lines
	lines []line
	done  chan struct{}
}

func subscribe(t *testing.T, url string, streams ...string) *subscriber {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &subscriber{ws: ws, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			_, m, err := ws.ReadMessage()
			if err != nil {
				return
			}
			for _, b := range bytes.Split(m, []byte{'\n'}) {
				var l line
				if json.Unmarshal(b, &l) != nil {
					l.Type = "unparsed"
				}
				l.raw = string(b)
				s.mu.Lock()
				s.lines = append(s.lines, l)
				s.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { ws.Close(); <-s.done })
	s.send(t, "sub", streams...)
	return s
}

func (s *subscriber) send(t *testing.T, id string, streams ...string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"op": "subscribe", "id": id, "streams": streams})
	if err := s.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatal(err)
	}
}

func (s *subscriber) snapshot() []line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]line(nil), s.lines...)
}

// has reports whether a line from index from on matches pred.
func (s *subscriber) has(from int, pred func(line) bool) bool {
	for _, l := range s.snapshot()[min(from, len(s.snapshot())):] {
		if pred(l) {
			return true
		}
	}
	return false
}

func notice(kind string) func(line) bool {
	return func(l line) bool { return l.Type == "notice" && l.Kind == kind }
}

// gapless checks that stream's seqs go 1 by 1 from the first received, and
// that nothing was dropped: the subscriber reads everything.
func (s *subscriber) gapless(t *testing.T, stream string) int {
	t.Helper()
	var last uint64
	n := 0
	for _, l := range s.snapshot() {
		if l.Type == "notice" && (l.Kind == "dropping" || l.Kind == "resumed") {
			t.Errorf("a reading subscriber got %s", l.raw)
		}
		if l.Stream != stream || l.Type == "notice" {
			continue
		}
		if last != 0 && l.Seq != last+1 {
			t.Errorf("%s: seq %d after %d: a hole no notice can explain (this subscriber reads everything)", stream, l.Seq, last)
		}
		last = l.Seq
		n++
	}
	return n
}

func httpGet(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(b))
}
