package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/fanoutd/fanoutd/replay"
)

// Fetch reads a segment's stored bytes by its claim reference.
type Fetch func(ctx context.Context, claim string) ([]byte, error)

// Range is what is recorded of one venue and symbol: the span from the
// first receive time of its first segment to the last of its last.
type Range struct {
	Venue    string    `json:"venue"`
	Symbol   string    `json:"symbol"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Segments int       `json:"segments"`
}

// Ranges lists es per venue and symbol, in that order.
func Ranges(es []Entry) []Range {
	type vs struct{ v, s string }
	m := map[vs]*Range{}
	for _, e := range es {
		for _, s := range e.Symbols {
			r := m[vs{e.Venue, s}]
			if r == nil {
				r = &Range{Venue: e.Venue, Symbol: s, From: e.First, To: e.Last}
				m[vs{e.Venue, s}] = r
			}
			if e.First.Before(r.From) {
				r.From = e.First
			}
			if e.Last.After(r.To) {
				r.To = e.Last
			}
			r.Segments++
		}
	}
	out := make([]Range, 0, len(m))
	for _, r := range m {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Range) int {
		if a.Venue != b.Venue {
			if a.Venue < b.Venue {
				return -1
			}
			return 1
		}
		if a.Symbol < b.Symbol {
			return -1
		}
		if a.Symbol > b.Symbol {
			return 1
		}
		return 0
	})
	return out
}

// Chains picks the segments of es that a query of [from, to) over the
// given venues and symbols plays: per venue connection, those whose span
// overlaps the range and that carry one of the venue's wanted symbols (a
// segment listing no symbols is taken), in receive-time order. want maps a
// venue to its symbols; a nil set takes every symbol of the venue.
func Chains(es []Entry, want map[string]map[string]bool, from, to time.Time) [][]Entry {
	type vc struct {
		v string
		c int
	}
	m := map[vc][]Entry{}
	var order []vc
	for _, e := range es {
		syms, ok := want[e.Venue]
		if !ok || e.Last.Before(from) || !e.First.Before(to) {
			continue
		}
		if syms != nil && len(e.Symbols) > 0 && !slices.ContainsFunc(e.Symbols, func(s string) bool { return syms[s] }) {
			continue
		}
		k := vc{e.Venue, e.Connection}
		if _, seen := m[k]; !seen {
			order = append(order, k)
		}
		m[k] = append(m[k], e)
	}
	out := make([][]Entry, 0, len(order))
	for _, k := range order {
		c := m[k]
		slices.SortStableFunc(c, func(a, b Entry) int { return a.First.Compare(b.First) })
		out = append(out, c)
	}
	return out
}

// Source plays one venue connection's segments as one capture, read
// lazily in order: each segment is fetched when the one before it is
// exhausted, so a query holds at most one segment's stored bytes per
// connection and its first lines play before the later segments are read.
// One decoder runs over the whole chain, as one ran live across the
// segments' rotation.
func Source(ctx context.Context, chain []Entry, fetch Fetch) replay.Source {
	first := chain[0]
	name := fmt.Sprintf("history:%s:c%d", first.Venue, first.Connection)
	return replay.Source{Name: name, Venue: first.Venue, Open: func() (*replay.File, error) {
		cr := &chainReader{ctx: ctx, chain: chain, fetch: fetch}
		return &replay.File{Reader: replay.NewReader(cr, name),
			Meta: replay.Meta{Venue: first.Venue, Connection: first.Connection, Subscriptions: first.Symbols}}, nil
	}}
}

// chainReader is the concatenated lines of a chain of segments.
type chainReader struct {
	ctx   context.Context
	chain []Entry
	fetch Fetch
	cur   io.Reader
	nl    bool // the current segment's last byte was a newline
}

func (c *chainReader) Read(p []byte) (int, error) {
	for {
		if c.cur != nil {
			n, err := c.cur.Read(p)
			if n > 0 {
				c.nl = p[n-1] == '\n'
				return n, nil
			}
			if err == nil {
				continue
			}
			if !errors.Is(err, io.EOF) {
				return 0, err
			}
			c.cur = nil
			if !c.nl {
				// A segment whose last line has no newline must not run
				// into the next segment's first.
				c.nl = true
				p[0] = '\n'
				return 1, nil
			}
		}
		if len(c.chain) == 0 {
			return 0, io.EOF
		}
		e := c.chain[0]
		c.chain = c.chain[1:]
		data, err := c.fetch(c.ctx, e.Claim)
		if err != nil {
			return 0, fmt.Errorf("segment %s: %w", e.Claim, err)
		}
		if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				return 0, fmt.Errorf("segment %s: %w", e.Claim, err)
			}
			c.cur = zr
		} else {
			c.cur = bytes.NewReader(data)
		}
		c.nl = true
	}
}
