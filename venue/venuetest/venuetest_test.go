package venuetest

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/shopspring/decimal"
	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type echo struct{}

func (echo) Connected(c *Conn)           { c.Send([]byte(`{"hello":1}`)) }
func (echo) Message(c *Conn, msg []byte) { c.Send(msg) }

func TestServerEchoSilenceAndClose(t *testing.T) {
	s := NewServer(t, echo{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, b, err := ws.Read(ctx); err != nil || string(b) != `{"hello":1}` {
		t.Fatalf("greeting %q %v", b, err)
	}
	ws.Write(ctx, websocket.MessageText, []byte("ping"))
	if _, b, _ := ws.Read(ctx); string(b) != "ping" {
		t.Fatalf("echo %q", b)
	}
	s.WaitAccepted(t, 1, time.Second)
	s.SetSilent(true)
	pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer pcancel()
	go ws.Read(ctx) // pings are answered only while reading
	if err := ws.Ping(pctx); err == nil {
		t.Fatal("a silent server answered a ping")
	}
	s.SetSilent(false)
	s.CloseAll()
}

func TestSinkInvariants(t *testing.T) {
	st := venue.Stream("x:level2:Y")
	one := decimal.New(1, 0)
	s := NewSink()
	s.Event(&venue.Event{Kind: venue.KindBook, Stream: st, Bids: []venue.Level{{Price: one, Size: one}}})
	s.Notice(notice.Must(notice.LinkDown, "x", "", time.Now(), "down", map[string]any{"reason": "test"}))
	s.Event(&venue.Event{Kind: venue.KindBook, Stream: st})
	s.Event(&venue.Event{Kind: venue.KindTrade, Stream: st, Seq: 3})
	s.mu.Lock()
	got := len(s.problems)
	s.mu.Unlock()
	if ev, i := s.WaitEvent(t, time.Second, 0, "a trade", func(e *venue.Event) bool { return e.Kind == venue.KindTrade }); ev == nil || i != 2 {
		t.Fatalf("WaitEvent = %v, %d", ev, i)
	}
	if got != 4 { // first event not a snapshot; update after link_down; trade on a level2 stream; seq set
		t.Fatalf("%d problems, want 4: %q", got, s.problems)
	}
}
