package replay

import (
	"container/heap"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// The parallel player (PlayerOptions.Parallel): each capture's reading,
// gunzip and decoding runs on a goroutine of its own (a worker), which
// records what its decoder emits for each record into batches; the calling
// goroutine merges the captures by receive time, as Play does, and hands
// each record's outputs to the sinks in that order. A capture's decoder is
// its own (Play builds one per capture), so its outputs for a record do not
// depend on the other captures: the sinks see the same calls in the same
// order as from the serial player, which is what keeps the output
// identical.

// batchRecords is how many records a worker puts in a batch, and
// batchesAhead how many full batches it may have waiting for the merge.
const (
	batchRecords = 256
	batchesAhead = 4
)

type outKind uint8

const (
	outEvent outKind = iota + 1
	outNotice
	outBadLine
)

// output is one thing a worker recorded: an event (with its levels in
// the batch's arenas, from l0 to l1 the bids, to l2 the asks), a notice,
// or a bad line.
type output struct {
	kind       outKind
	fixed      bool // the levels are in the fixed arena, else in dec
	idx        int32
	l0, l1, l2 int32
}

// mark ends a record: the outputs from the previous mark's end to end are
// its own, then the bad lines read after it.
type mark struct {
	at         time.Time
	end        int32
	disconnect bool
}

// batch is a run of a capture's records and their outputs. A batch with
// done set is the capture's last; err is what ended it, nil at the end of
// the file.
type batch struct {
	recs    []mark
	outs    []output
	events  []venue.Event
	notices []notice.Notice
	errs    []error
	fixed   []venue.FixedLevel
	dec     []venue.Level
	done    bool
	err     error
}

func (b *batch) reset() {
	clear(b.events) // drop references to strings and decimals
	clear(b.notices)
	clear(b.dec)
	b.recs, b.outs, b.events, b.notices = b.recs[:0], b.outs[:0], b.events[:0], b.notices[:0]
	b.errs, b.fixed, b.dec, b.done, b.err = b.errs[:0], b.fixed[:0], b.dec[:0], false, nil
}

// Event records a copy of ev (a sink has ev only during the call).
func (b *batch) Event(ev *venue.Event) {
	o := output{kind: outEvent, idx: int32(len(b.events))}
	e := *ev
	e.Bids, e.Asks, e.FixedBids, e.FixedAsks = nil, nil, nil, nil
	if ev.HasFixed() {
		o.fixed = true
		o.l0 = int32(len(b.fixed))
		b.fixed = append(b.fixed, ev.FixedBids...)
		o.l1 = int32(len(b.fixed))
		b.fixed = append(b.fixed, ev.FixedAsks...)
		o.l2 = int32(len(b.fixed))
	} else {
		o.l0 = int32(len(b.dec))
		b.dec = append(b.dec, ev.Bids...)
		o.l1 = int32(len(b.dec))
		b.dec = append(b.dec, ev.Asks...)
		o.l2 = int32(len(b.dec))
	}
	b.events = append(b.events, e)
	b.outs = append(b.outs, o)
}

// Notice records n.
func (b *batch) Notice(n notice.Notice) {
	b.outs = append(b.outs, output{kind: outNotice, idx: int32(len(b.notices))})
	b.notices = append(b.notices, n)
}

func (b *batch) badLine(err error) {
	b.outs = append(b.outs, output{kind: outBadLine, idx: int32(len(b.errs))})
	b.errs = append(b.errs, err)
}

// event returns the i-th output's event with its levels.
func (b *batch) event(o *output) *venue.Event {
	e := &b.events[o.idx]
	if o.fixed {
		e.FixedBids, e.FixedAsks = b.fixed[o.l0:o.l1:o.l1], b.fixed[o.l1:o.l2:o.l2]
		return e
	}
	if o.l1 > o.l0 {
		e.Bids = b.dec[o.l0:o.l1:o.l1]
	}
	if o.l2 > o.l1 {
		e.Asks = b.dec[o.l1:o.l2:o.l2]
	}
	return e
}

// capSink is the sink a worker's decoder emits to: the worker's current
// batch.
type capSink struct {
	b    *batch
	seen *streamSet // the streams emitted, when the cursor is shared; else nil
}

func (s *capSink) Event(ev *venue.Event) {
	if s.seen != nil {
		s.seen.add(ev.Stream)
	}
	s.b.Event(ev)
}
func (s *capSink) Notice(n notice.Notice) { s.b.Notice(n) }

// rawBatch is a run of a capture's lines as its reader read them: records
// (with their frames copied into data) and bad lines, in file order. A
// rawBatch with done set is the capture's last; err is what ended it.
type rawBatch struct {
	items []rawItem
	data  []byte
	errs  []error
	done  bool
	err   error
}

// rawItem is a record (frame data[off:end]), or a bad line (errs[off]).
type rawItem struct {
	at         time.Time
	off, end   int32
	line       int
	bad        bool
	disconnect bool
}

func (r *rawBatch) reset() {
	clear(r.errs)
	r.items, r.data, r.errs, r.done, r.err = r.items[:0], r.data[:0], r.errs[:0], false, nil
}

// worker is one capture's pair of goroutines: read reads and gunzips, run
// decodes. It owns c.f and c.dec once started.
type worker struct {
	c       *cursor
	o       PlayerOptions
	sink    *capSink
	out     chan *batch
	free    chan *batch
	raw     chan *rawBatch
	rawFree chan *rawBatch
	stop    <-chan struct{}
}

func (w *worker) newBatch() *batch {
	select {
	case b := <-w.free:
		b.reset()
		return b
	default:
		return &batch{}
	}
}

// send hands b to the merge; false if the merge stopped.
func (w *worker) send(b *batch) bool {
	select {
	case w.out <- b:
		return true
	case <-w.stop:
		return false
	}
}

// read reads the capture into raw batches, as cursor.next reads it.
func (w *worker) read() {
	defer close(w.raw)
	defer w.c.f.Close()
	var prev time.Time // the last record's time, for a disconnect without one
	newRaw := func() *rawBatch {
		select {
		case r := <-w.rawFree:
			r.reset()
			return r
		default:
			return &rawBatch{}
		}
	}
	r := newRaw()
	for {
		rec, err := w.c.f.Next()
		if err != nil && !errors.Is(err, io.EOF) {
			var le *LineError
			if errors.As(err, &le) && w.o.OnBadLine != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				r.items = append(r.items, rawItem{bad: true, off: int32(len(r.errs))})
				r.errs = append(r.errs, err)
				continue
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			r.done = true
			select {
			case w.raw <- r:
			case <-w.stop:
			}
			return
		}
		if rec.Disconnect && rec.Time.IsZero() {
			rec.Time = prev
		}
		prev = rec.Time
		off := int32(len(r.data))
		r.data = append(r.data, rec.Frame...)
		r.items = append(r.items, rawItem{at: rec.Time, off: off, end: int32(len(r.data)), line: rec.Line, disconnect: rec.Disconnect})
		if len(r.items) >= batchRecords || len(r.data) >= 1<<20 {
			select {
			case w.raw <- r:
			case <-w.stop:
				return
			}
			r = newRaw()
		}
	}
}

// run decodes the raw batches. Its first batch holds only what was read
// before the first record (bad lines); every record is followed by the bad
// lines read after it.
func (w *worker) run() {
	b := w.newBatch()
	w.sink.b = b
	first, pending := true, false
	var cur mark
	// finish closes the pending record's mark; it may start a new batch.
	finish := func() bool {
		cur.end = int32(len(b.outs))
		b.recs = append(b.recs, cur)
		pending = false
		if len(b.recs) >= batchRecords {
			if !w.send(b) {
				return false
			}
			b = w.newBatch()
			w.sink.b = b
		}
		return true
	}
	for r := range w.raw {
		for i := range r.items {
			it := &r.items[i]
			if it.bad {
				b.badLine(r.errs[it.off])
				continue
			}
			if first {
				if !w.send(b) { // the lead batch
					return
				}
				b = w.newBatch()
				w.sink.b = b
				first = false
			}
			if pending && !finish() {
				return
			}
			cur, pending = mark{at: it.at, disconnect: it.disconnect}, true
			if it.disconnect {
				var seen []venue.Stream
				if w.sink.seen != nil {
					seen = w.sink.seen.order
				}
				b.Notice(w.c.linkDown(it.at, it.line, seen))
				w.c.dec.LinkDown(it.at)
			} else {
				w.c.dec.Frame(it.at, r.data[it.off:it.end])
			}
		}
		if r.done {
			if pending {
				cur.end = int32(len(b.outs))
				b.recs = append(b.recs, cur)
			}
			b.done, b.err = true, r.err
			w.send(b)
			return
		}
		select {
		case w.rawFree <- r:
		default:
		}
	}
}

// feed is the merge's view of one capture: its worker's channel and the
// batch being delivered.
type feed struct {
	out  chan *batch
	free chan *batch
	b    *batch
	ri   int   // the record of b at the head
	next int32 // the first output of b not yet delivered
}

// playParallel is Play for o.Parallel (Speed 0, no Loop).
func playParallel(ctx context.Context, o PlayerOptions, srcs []Source) (Stats, error) {
	var st Stats
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop) // workers blocked on a send return, and close their files
		wg.Wait()
	}()
	feeds := map[*cursor]*feed{}
	// recv waits for c's next batch.
	recv := func(f *feed) error {
		if f.b != nil {
			select {
			case f.free <- f.b:
			default:
			}
		}
		select {
		case f.b = <-f.out:
		case <-ctx.Done():
			return ctx.Err()
		}
		f.ri, f.next = 0, 0
		return nil
	}
	// deliver hands f's outputs up to end to c's sinks.
	deliver := func(c *cursor, f *feed, end int32) {
		b := f.b
		for i := f.next; i < end; i++ {
			out := &b.outs[i]
			switch out.kind {
			case outEvent:
				c.sink.Event(b.event(out))
			case outNotice:
				c.sink.Notice(b.notices[out.idx])
			case outBadLine:
				st.BadLines++
				o.OnBadLine(b.errs[out.idx])
			}
		}
		f.next = end
	}
	var h cursorHeap
	// Every capture is opened before any is decoded: whether a capture
	// shares its venue with another decides its link_down notices.
	curs := make([]*cursor, len(srcs))
	sinks := make([]*capSink, len(srcs))
	for i, src := range srcs {
		c := &cursor{src: src, ordinal: i}
		cs := &capSink{}
		if err := c.openWith(o, cs); err != nil {
			for _, c := range curs[:i] {
				c.f.Close()
			}
			return st, err
		}
		curs[i], sinks[i] = c, cs
	}
	markShared(curs)
	started := 0
	defer func() {
		for _, c := range curs[started:] { // a worker closes its own
			c.f.Close()
		}
	}()
	for i, c := range curs {
		started = i + 1
		cs := sinks[i]
		if c.shared {
			cs.seen = newStreamSet()
		}
		f := &feed{out: make(chan *batch, batchesAhead), free: make(chan *batch, batchesAhead+2)}
		feeds[c] = f
		w := &worker{c: c, o: o, sink: cs, out: f.out, free: f.free, stop: stop,
			raw: make(chan *rawBatch, batchesAhead), rawFree: make(chan *rawBatch, batchesAhead+2)}
		wg.Add(2)
		go func() {
			defer wg.Done()
			w.read()
		}()
		go func() {
			defer wg.Done()
			w.run()
		}()
		// What was read before the first record, as Play's first next.
		if err := recv(f); err != nil {
			return st, err
		}
		deliver(c, f, int32(len(f.b.outs)))
		if f.b.done {
			if f.b.err != nil {
				return st, f.b.err
			}
			c.end(o)
			continue
		}
		if err := recv(f); err != nil {
			return st, err
		}
		c.rec.Time = f.b.recs[0].at
		h = append(h, c)
	}
	heap.Init(&h)
	for h.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		c := h[0]
		f := feeds[c]
		m := f.b.recs[f.ri]
		if m.disconnect {
			st.Disconnects++
		} else {
			st.Frames++
		}
		deliver(c, f, m.end)
		f.ri++
		if f.ri == len(f.b.recs) {
			if f.b.done {
				if f.b.err != nil {
					return st, f.b.err
				}
				c.rec.Time = m.at
				c.end(o)
				heap.Pop(&h)
				continue
			}
			if err := recv(f); err != nil {
				return st, err
			}
		}
		c.rec.Time = f.b.recs[f.ri].at
		heap.Fix(&h, 0)
	}
	return st, nil
}
