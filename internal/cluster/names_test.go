package cluster

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/nats-io/nats.go"
)

func testNATS(t testing.TB) *nats.Conn {
	t.Helper()
	s := natstest.Run(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestNamesClaim: a name has one owner and one holder cluster-wide; a
// claim on another node tells the holder's node; a stale release does not
// undo a newer claim.
func TestNamesClaim(t *testing.T) {
	nc := testNATS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	subj := Subjects{Prefix: "t"}
	n1, n2 := NewNames(subj, "edge", time.Hour, log), NewNames(subj, "edge", time.Hour, log)
	if n1.Instance() == n2.Instance() {
		t.Fatal("two processes with one node name share an instance")
	}
	taken := make(chan string, 1)
	n1.TakeOver = func(name, conn string) { taken <- name + " " + conn }
	for _, n := range []*Names{n1, n2} {
		if err := n.Start(nc); err != nil {
			t.Fatal(err)
		}
		defer n.Stop()
	}
	if rec, err := n1.Claim("desk.1", "a", "c1"); err != nil || rec != nil {
		t.Fatalf("first claim: %v %v", rec, err)
	}
	// A takeover message the bucket does not confirm closes nothing.
	forged, _ := json.Marshal(takeoverMsg{Name: "desk.1", Conn: "c1", By: n2.Instance()})
	n1.onTakeover(&nats.Msg{Subject: "t.names.takeover", Data: forged})
	select {
	case got := <-taken:
		t.Fatalf("a takeover the bucket does not confirm closed %q", got)
	default:
	}
	if _, err := n2.Claim("desk.1", "b", "c2"); !errors.Is(err, ErrNameOwned) {
		t.Fatalf("another owner: %v, want ErrNameOwned", err)
	}
	rec, err := n2.Claim("desk.1", "a", "c2")
	if err != nil || rec == nil || rec.Conn != "c1" || rec.Node != n1.Instance() {
		t.Fatalf("second claim: %+v %v", rec, err)
	}
	select {
	case got := <-taken:
		if got != "desk.1 c1" {
			t.Fatalf("takeover %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first holder was not told")
	}
	n1.Release(NamedState{Name: "desk.1", Owner: "a", Conn: "c1", Streams: []string{}, Last: map[string]uint64{}})
	n2.Release(NamedState{Name: "desk.1", Owner: "a", Conn: "c2", Streams: []string{"x:trades:y"}, Last: map[string]uint64{"x:trades:y": 7}})
	rec, err = n1.Claim("desk.1", "a", "c3")
	if err != nil || rec == nil || rec.Conn != "" || rec.Node != n2.Instance() || rec.Last["x:trades:y"] != 7 {
		t.Fatalf("after the releases: %+v %v", rec, err)
	}
}
