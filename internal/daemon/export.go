package daemon

import (
	"strings"
	"sync"

	"github.com/fanoutd/fanoutd/derive"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
)

// exportTap is replay --export --streams: it passes on the raw events of
// the streams the patterns match, and computes the derived streams they
// name from their sources, as a feed does (Advance before the book takes
// an event, Apply after), on the capture's receive times.
type exportTap struct {
	mu       sync.Mutex // guards the fields below: the player may call from several goroutines
	out      *replay.ExportSink
	patterns []string
	srcs     map[venue.Stream]*tapSource // by source stream, resolved once
	last     *tapSource                  // the last event's (a decoder's events mostly repeat a stream)
	seq      map[venue.Stream]uint64     // bars' seq (events take theirs from out)
	hit      map[string]bool             // the patterns that matched a stream, raw or derived
	buf      []byte
}

// tapSource is what the patterns want of one source stream.
type tapSource struct {
	stream  venue.Stream
	raw     bool             // a pattern matches the stream itself
	derived []derive.Deriver // the derived streams computed from it
	book    *venue.Book      // its book, for the derived streams of a level2 stream
}

// unmatched returns the patterns that matched no stream of the captures.
func (t *exportTap) unmatched() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, p := range t.patterns {
		if !t.hit[p] {
			out = append(out, p)
		}
	}
	return out
}

func newExportTap(out *replay.ExportSink, patterns []string) *exportTap {
	return &exportTap{out: out, patterns: patterns, srcs: map[venue.Stream]*tapSource{},
		seq: map[venue.Stream]uint64{}, hit: map[string]bool{}}
}

// resolve finds what the patterns want of source stream src: itself, and
// the derived streams a pattern names with an exact derived channel whose
// source is src's channel, for src's venue and symbol.
func (t *exportTap) resolve(src venue.Stream) *tapSource {
	if ts := t.last; ts != nil && ts.stream == src {
		return ts
	}
	if ts := t.srcs[src]; ts != nil {
		t.last = ts
		return ts
	}
	matched := false
	var ds []derive.Deriver
	for _, p := range t.patterns {
		if api.MatchGlob(p, string(src)) {
			matched = true
			t.hit[p] = true
		}
		parts := strings.SplitN(p, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ch := venue.Channel(parts[1])
		if !ch.Derived() || ch.Source() != src.Channel() || !api.MatchGlob(parts[0], src.Venue()) || !api.MatchGlob(parts[2], src.Symbol()) {
			continue
		}
		id := venue.NewStream(src.Venue(), ch, src.Symbol())
		if d, err := derive.New(id); err == nil && !hasDeriver(ds, id) {
			ds = append(ds, d)
			t.hit[p] = true
		}
	}
	ts := &tapSource{stream: src, raw: matched, derived: ds}
	if len(ds) > 0 && src.Channel() == venue.Level2 {
		ts.book = &venue.Book{}
	}
	t.srcs[src], t.last = ts, ts
	return ts
}

func hasDeriver(ds []derive.Deriver, id venue.Stream) bool {
	for _, d := range ds {
		if d.Stream() == id {
			return true
		}
	}
	return false
}

func (t *exportTap) emit(o derive.Out) {
	if o.Event != nil {
		t.out.Event(o.Event)
		return
	}
	t.seq[o.Bar.Stream]++
	o.Bar.Seq = t.seq[o.Bar.Stream]
	t.buf = o.Bar.AppendJSON(t.buf[:0])
	t.out.Line(t.buf)
}

// Event is the venue.Sink method.
func (t *exportTap) Event(ev *venue.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := t.resolve(ev.Stream)
	ds, book := ts.derived, ts.book
	for _, d := range ds {
		d.Advance(ev.RecvTime, book, t.emit)
	}
	if ts.raw {
		t.out.Event(ev)
	}
	if book != nil {
		book.Apply(ev)
	}
	for _, d := range ds {
		d.Apply(ev, book, t.emit)
	}
}

// Notice is the venue.Sink method: notices pass, a book_resync is also
// said of the derived streams of its stream, and a link drop marks the
// open trade bars.
func (t *exportTap) Notice(n notice.Notice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.out.Notice(n)
	switch {
	case n.Kind == notice.BookResync && n.Stream != "":
		var ds []derive.Deriver
		if ts := t.srcs[venue.Stream(n.Stream)]; ts != nil {
			ds = ts.derived
		}
		for _, d := range ds {
			dn := n
			dn.Stream = string(d.Stream())
			t.out.Notice(dn)
		}
	case n.Kind == notice.LinkDown:
		for _, ts := range t.srcs {
			for _, d := range ts.derived {
				if d.Stream().Venue() == n.Venue {
					d.Break(n.At)
				}
			}
		}
	}
}

var _ venue.Sink = (*exportTap)(nil)
