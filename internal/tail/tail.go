// Package tail is the client of `fanoutd tail`: it subscribes to streams
// with the Go client (package client) and prints what arrives, one line
// per event, notice, loss and book state change.
package tail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/fanoutd/fanoutd/client"
)

// Options say what to tail and how.
type Options struct {
	URLs      []string // the daemon's websocket URLs, tried in turn
	Token     string   // bearer token; "" sends none
	Name      string   // attach as this named subscriber; "" is ephemeral
	Raw       bool     // print the JSON objects as received
	Reconnect bool     // stay: reconnect when the daemon closes, instead of ending
	Streams   []string // required
}

// Run tails until ctx is done (nil) or the daemon closes the connection
// (its close code is printed; nil), or, with Reconnect, until ctx is done.
// It returns the daemon's refusal (a refused token, a refused subscribe)
// as a *client.Error.
func Run(ctx context.Context, o Options, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex // serializes stdout between the handler and Run
	print := func(s string) {
		mu.Lock()
		fmt.Fprintln(stdout, s)
		mu.Unlock()
	}
	var c *client.Client
	var closed error
	opts := client.Options{URLs: o.URLs, Token: o.Token, Name: o.Name}
	if o.Raw {
		opts.Raw = func(line []byte) { print(string(line)) }
	}
	opts.Handler = func(m client.Message) {
		if d, ok := m.(*client.Disconnected); ok {
			var ce *client.ClosedError
			var fe *client.Error
			switch {
			case errors.As(d.Err, &ce):
				print(fmt.Sprintf("closed: %d %s", ce.Code, ce.Reason))
			case errors.As(d.Err, &fe):
				return // Run returns it if it is fatal
			default:
				print("disconnected: " + d.Err.Error())
			}
			if !o.Reconnect {
				closed = d.Err
				cancel()
			}
			return
		}
		if o.Raw {
			return
		}
		if s := readable(c, m); s != "" {
			print(s)
		}
	}
	c, err := client.New(opts)
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	if err := c.Subscribe(ctx, o.Streams...); err != nil {
		var fe *client.Error
		if errors.As(err, &fe) && !o.Raw {
			print(fmt.Sprintf("ERROR %s (id %s): %s", fe.Code, fe.ID, fe.Message))
		}
		cancel()
		<-runErr
		if ctx.Err() != nil && closed != nil {
			return nil
		}
		return err
	}
	err = <-runErr
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// readable renders one message for a terminal; "" prints nothing.
func readable(c *client.Client, m client.Message) string {
	switch m := m.(type) {
	case *client.BookEvent:
		kind := "update"
		if m.Snapshot {
			kind = "SNAPSHOT"
		}
		best := "best - / -"
		if b := c.Book(m.Stream); b != nil {
			// The book's best levels after this event, not the event's
			// first levels (which may be removals).
			bids, asks := b.TopRaw(1)
			best = "best " + top(bids) + " / " + top(asks)
		} else {
			best = "best " + top(m.Bids) + " / " + top(m.Asks) // a book_snapshot_* is whole
		}
		return fmt.Sprintf("%s #%d book %s bids=%d asks=%d %s", m.Stream, m.Seq, kind, len(m.Bids), len(m.Asks), best)
	case *client.Trade:
		return fmt.Sprintf("%s #%d trade %s %s @ %s", m.Stream, m.Seq, orDash(m.Side), m.Size, m.Price)
	case *client.Ticker:
		last := "-"
		if m.HasLast {
			last = m.Last.String()
		}
		return fmt.Sprintf("%s #%d ticker %s x %s | %s x %s last %s", m.Stream, m.Seq, m.BidSize, m.Bid, m.Ask, m.AskSize, last)
	case *client.Quote:
		return fmt.Sprintf("%s #%d quote %s x %s | %s x %s", m.Stream, m.Seq, m.BidSize, m.Bid, m.Ask, m.AskSize)
	case *client.TradeBar:
		return fmt.Sprintf("%s #%d bar %s o %s h %s l %s c %s v %s n %d", m.Stream, m.Seq, m.End.Format("15:04:05.000"), m.Open, m.High, m.Low, m.Close, m.Volume, m.Trades)
	case *client.Notice:
		d, _ := json.Marshal(m.Details)
		return fmt.Sprintf("NOTICE %s (%s) %s %s: %s %s", strings.ToUpper(m.Kind), m.Severity, m.Venue, m.Stream, m.Message, d)
	case *client.Gap:
		if m.Reason == "restart" {
			return fmt.Sprintf("GAP %s numbering restarted (losses unknown)", m.Stream)
		}
		return fmt.Sprintf("GAP %s %d..%d (%s)", m.Stream, m.First, m.Last, m.Reason)
	case *client.BookState:
		if m.State == client.Valid {
			return fmt.Sprintf("BOOK %s valid at #%d", m.Stream, m.Seq)
		}
		if m.Reason == client.ReasonGap {
			return fmt.Sprintf("BOOK %s invalid: gap %d..%d", m.Stream, m.GapFirst, m.GapLast)
		}
		return fmt.Sprintf("BOOK %s invalid: %s", m.Stream, m.Reason)
	case *client.Connected:
		return "connected: " + m.URL
	}
	return ""
}

func top(levels []client.RawLevel) string {
	if len(levels) == 0 {
		return "-"
	}
	return levels[0].Size + " x " + levels[0].Price
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
