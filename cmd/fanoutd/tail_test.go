package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// A refused subscribe ends tail with the refusal, not an error printed
// and a wait for ever.
func TestTailRefusedSubscribeExits(t *testing.T) {
	td := startDaemon(t, baseConfig)
	var out, errb syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := tailCmd(ctx, []string{"--url", td.url(""), "nosuchvenue:level2:BTC-USD"}, &out, &errb)
	if ctx.Err() != nil {
		t.Fatal("tail hung after a refused subscribe")
	}
	if code != 1 || !strings.Contains(out.String(), "ERROR unknown_stream") || !strings.Contains(errb.String(), "unknown_stream") {
		t.Fatalf("exit %d, out %q, err %q: want 1 and the unknown_stream refusal", code, out.String(), errb.String())
	}
	// A flag after the streams is a flag, not a stream: the refused stream
	// still ends tail with 1.
	var out2, errb2 syncBuffer
	if code := tailCmd(ctx, []string{"nosuchvenue:level2:BTC-USD", "--url", td.url("")}, &out2, &errb2); code != 1 || ctx.Err() != nil {
		t.Fatalf("--url after the stream: exit %d (ctx %v), err %q: want 1, the unknown_stream refusal", code, ctx.Err(), errb2.String())
	}
}

// tail STREAM --raw: the flag after the stream is taken, and the objects
// are printed as received.
func TestTailFlagAfterStream(t *testing.T) {
	td := startDaemon(t, baseConfig)
	td.bookSnapshot()
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- tailCmd(ctx, []string{"--url", td.url(""), string(l2), "--raw"}, &out, &errb) }()
	checkFor(t, 10*time.Second, "tail's raw snapshot", func() bool {
		return strings.Contains(out.String(), `"stream":"`+string(l2)+`"`) && strings.Contains(out.String(), `"snapshot":true`)
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), "book SNAPSHOT") {
		t.Fatalf("--raw after the stream printed the summary form: %q", out.String())
	}
}

// best is the book's best bid and offer after the event, not the event's
// first level (a removal here).
func TestTailBestIsTheBooks(t *testing.T) {
	td := startDaemon(t, baseConfig)
	td.bookSnapshot() // bids 99x1, 98x2; asks 101x1, 102x2
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- tailCmd(ctx, []string{"--url", td.url(""), string(l2)}, &out, &errb) }()
	checkFor(t, 10*time.Second, "tail's snapshot", func() bool { return strings.Contains(out.String(), "book SNAPSHOT") })
	td.src.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2, RecvTime: t0,
		Bids: []venue.Level{lvl(99, 0)}, Asks: []venue.Level{lvl(101, 0)}})
	checkFor(t, 10*time.Second, "tail's update", func() bool { return strings.Contains(out.String(), "#2 book update") })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "#2 book update") {
			line = l
		}
	}
	if !strings.HasSuffix(line, "best 2 x 98 / 2 x 102") {
		t.Fatalf("update line %q: want the book's best, 2 x 98 / 2 x 102", line)
	}
}
