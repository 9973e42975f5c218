package replay

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Source is one capture to play.
type Source struct {
	// Name is what errors and notices call it (the path, usually).
	Name string
	// Venue overrides the venue in the capture's metadata.
	Venue string
	// Open opens the capture; it is called again for every loop.
	Open func() (*File, error)
}

// FileSource plays the capture file at path.
func FileSource(path, venueOverride string) Source {
	return Source{Name: path, Venue: venueOverride, Open: func() (*File, error) { return Open(path) }}
}

// MinSpeed is the slowest pace Play takes: a thousand times slower than
// recorded (a second of capture in 16m40s). Slower paces only freeze a
// replay, and the pacing arithmetic must stay within a time.Duration.
const MinSpeed = 1e-3

// paced is d of capture time at speed, in wall time: at most the largest
// time.Duration, never negative (a long capture at a slow pace would
// otherwise overflow into the past and play at full speed).
func paced(d time.Duration, speed float64) time.Duration {
	w := float64(d) / speed
	switch {
	case w >= math.MaxInt64:
		return math.MaxInt64
	case w <= 0:
		return 0
	}
	return time.Duration(w)
}

// PlayerOptions configure Play.
type PlayerOptions struct {
	// Speed is the pace: 1 keeps the recorded pacing, N plays N times
	// faster, 0 (max) as fast as the process can go. Below MinSpeed (other
	// than 0), NaN or infinite, Play refuses it.
	Speed float64
	// Loop plays the captures again from the start when they end, forever
	// (until ctx ends).
	Loop bool
	// NewDecoder builds the decoder for a capture of venueName that emits
	// to sink: the venue adapter's own decoder. Required.
	NewDecoder func(venueName string, sink venue.Sink) (venue.Decoder, error)
	// Sink returns where the events and notices of venueName go (the
	// daemon's feed for that venue). Required.
	Sink func(venueName string) (venue.Sink, error)
	// Start, if set, holds the clock until it is closed (--wait).
	Start <-chan struct{}
	// OnBadLine is called for a malformed line (which is skipped); nil
	// makes a malformed line end the replay with its error.
	OnBadLine func(err error)
	// Align shifts each venue's captures in time so that every venue's
	// first record plays at the earliest first record of all of them:
	// captures recorded at different times play together. A venue's own
	// captures (its segments, its connections) keep their relative times.
	// It does not apply to the parallel player.
	Align bool
	// LiveLinks replays a disconnect line as a live link reports one: a
	// link_down, then a link_up at the capture's next frame; a disconnect
	// that ends a capture is the end of the recording and sends no
	// link_down. Without it every disconnect line is a link_down (the
	// form replay --export writes). It does not apply to the parallel
	// player.
	LiveLinks bool
	// Parallel reads, gunzips and decodes each capture on a goroutine of
	// its own, merging their outputs by receive time on the caller's: the
	// sinks get the same calls in the same order as without it, from the
	// calling goroutine. It applies when Speed is 0 and Loop and Start are
	// not set (replay --export), and is ignored otherwise.
	Parallel bool
}

// Stats are what Play did.
type Stats struct {
	Frames      int64
	Disconnects int64
	BadLines    int64
}

type cursor struct {
	src     Source
	venue   string
	f       *File
	dec     venue.Decoder
	sink    *trackingSink
	rec     Record
	offset  time.Duration // added to record times on loops
	ordinal int           // tie-break: keep source order for equal times
	conn    int           // the venue connection the capture holds (Meta.Connection)
	shared  bool          // another capture of its venue plays too
	down    bool          // LiveLinks: a link_down was sent, the link_up not yet
}

// align sets the cursors' offsets so that each venue's first record plays
// at the earliest first record of all; every cursor holds its first
// record.
func align(cs []*cursor) {
	first := map[string]time.Time{}
	var t0 time.Time
	for _, c := range cs {
		t := c.rec.Time
		if f, ok := first[c.venue]; !ok || t.Before(f) {
			first[c.venue] = t
		}
		if t0.IsZero() || t.Before(t0) {
			t0 = t
		}
	}
	for _, c := range cs {
		c.offset = t0.Sub(first[c.venue])
	}
}

// markShared marks the cursors whose venue has several captures in play:
// a venue recorded over several connections, one capture each.
func markShared(cs []*cursor) {
	n := map[string]int{}
	for _, c := range cs {
		n[c.venue]++
	}
	for _, c := range cs {
		c.shared = n[c.venue] > 1
	}
}

// linkDown is the notice for c's disconnect line at (line) of a capture
// that emitted streams so far. A capture that shares its venue names its
// connection and streams, as the live link_down of one connection of
// several does: the other captures' books stay valid.
func (c *cursor) linkDown(at time.Time, line int, streams []venue.Stream) notice.Notice {
	d := map[string]any{"reason": "recorded", "capture": c.src.Name, "line": line}
	if c.shared {
		ss := make([]string, len(streams))
		for i, s := range streams {
			ss[i] = string(s)
		}
		slices.Sort(ss)
		d["connection"], d["streams"] = c.conn, ss
	}
	return notice.Must(notice.LinkDown, c.venue, "", at, "replayed capture: link dropped here", d)
}

// linkUp is the notice for the frame at line after a disconnect line: the
// link came up again, as a live link's link_up after a reconnect.
func (c *cursor) linkUp(at time.Time, line int) notice.Notice {
	url := c.f.Meta.Endpoint
	if url == "" {
		url = c.src.Name
	}
	d := map[string]any{"url": url, "capture": c.src.Name, "line": line}
	if c.shared {
		d["connection"] = c.conn
	}
	return notice.Must(notice.LinkUp, c.venue, "", at, "replayed capture: link up again", d)
}

// streamSet is the streams seen, in the order first seen.
type streamSet struct {
	m     map[venue.Stream]struct{}
	order []venue.Stream
}

func newStreamSet() *streamSet { return &streamSet{m: map[venue.Stream]struct{}{}} }

func (s *streamSet) add(st venue.Stream) {
	if _, ok := s.m[st]; !ok {
		s.m[st] = struct{}{}
		s.order = append(s.order, st)
	}
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	ti, tj := h[i].rec.Time.Add(h[i].offset), h[j].rec.Time.Add(h[j].offset)
	if !ti.Equal(tj) {
		return ti.Before(tj)
	}
	return h[i].ordinal < h[j].ordinal
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// trackingSink passes everything on and remembers the streams it saw, for
// the replay_end notices.
type trackingSink struct {
	inner   venue.Sink
	mu      sync.Mutex
	streams map[venue.Stream]struct{}
	order   []venue.Stream
	last    venue.Stream // the stream of the last event (in streams)
}

func (s *trackingSink) Event(ev *venue.Event) {
	s.mu.Lock()
	if ev.Stream != s.last || len(s.order) == 0 {
		if _, ok := s.streams[ev.Stream]; !ok {
			s.streams[ev.Stream] = struct{}{}
			s.order = append(s.order, ev.Stream)
		}
		s.last = ev.Stream
	}
	s.mu.Unlock()
	s.inner.Event(ev)
}

func (s *trackingSink) Notice(n notice.Notice) { s.inner.Notice(n) }

// Play plays srcs merged in receive-time order through the venues'
// decoders into their sinks, paced by o.Speed. Without Loop it returns
// when every capture ended (each stream getting a replay_end notice); with
// Loop, when ctx ends. A disconnect line is a link drop: a link_down
// notice, then the decoder's books wait for the next snapshot.
func Play(ctx context.Context, o PlayerOptions, srcs []Source) (Stats, error) {
	var st Stats
	if len(srcs) == 0 {
		return st, errors.New("replay: no capture to play")
	}
	if o.Speed != 0 && !(o.Speed >= MinSpeed && o.Speed <= math.MaxFloat64) {
		return st, fmt.Errorf("replay: speed %g is not 0 (max) or a number from %g", o.Speed, MinSpeed)
	}
	if o.Parallel && o.Speed == 0 && !o.Loop && o.Start == nil {
		return playParallel(ctx, o, srcs)
	}
	if o.Start != nil {
		select {
		case <-o.Start:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
	var h cursorHeap
	defer func() {
		for _, c := range h {
			c.f.Close()
		}
	}()
	curs := make([]*cursor, len(srcs))
	for i, src := range srcs {
		c := &cursor{src: src, ordinal: i}
		if err := c.open(o); err != nil {
			for _, c := range curs[:i] {
				c.f.Close()
			}
			return st, err
		}
		curs[i] = c
	}
	markShared(curs)
	for i, c := range curs {
		if ok, err := c.next(o, &st); err != nil {
			for _, c := range curs[i+1:] {
				c.f.Close()
			}
			c.f.Close()
			return st, err
		} else if ok {
			h = append(h, c)
		} else {
			c.f.Close()
			c.end(o)
		}
	}
	if o.Align {
		align(h)
	}
	heap.Init(&h)
	var t0 time.Time
	wall0 := time.Now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for h.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		c := h[0]
		at := c.rec.Time.Add(c.offset)
		if t0.IsZero() {
			t0 = at
		}
		if o.Speed > 0 {
			due := wall0.Add(paced(at.Sub(t0), o.Speed))
			if d := time.Until(due); d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				select {
				case <-timer.C:
				case <-ctx.Done():
					return st, ctx.Err()
				}
			}
		}
		var ok bool
		var err error
		if c.rec.Disconnect {
			st.Disconnects++
			line := c.rec.Line
			if ok, err = c.next(o, &st); err != nil {
				return st, err
			}
			// With LiveLinks a disconnect that ends the capture is where
			// the recording stopped, not a drop: the decoder's books are
			// still reset, for the next loop's snapshots.
			if !o.LiveLinks || ok && !c.down {
				var seen []venue.Stream
				if c.shared {
					c.sink.mu.Lock()
					seen = slices.Clone(c.sink.order)
					c.sink.mu.Unlock()
				}
				c.sink.Notice(c.linkDown(at, line, seen))
				c.down = o.LiveLinks
			}
			c.dec.LinkDown(at)
		} else {
			if c.down {
				c.down = false
				c.sink.Notice(c.linkUp(at, c.rec.Line))
			}
			st.Frames++
			c.dec.Frame(at, c.rec.Frame)
			if ok, err = c.next(o, &st); err != nil {
				return st, err
			}
		}
		if ok {
			heap.Fix(&h, 0)
			continue
		}
		// This capture ended.
		last := c.rec.Time.Add(c.offset)
		c.f.Close()
		if o.Loop {
			if err := c.open(o); err != nil {
				return st, err
			}
			if ok, err := c.next(o, &st); err != nil {
				return st, err
			} else if ok {
				c.offset = last.Sub(c.rec.Time) + time.Millisecond
				heap.Fix(&h, 0)
				continue
			}
		}
		c.end(o)
		heap.Pop(&h)
	}
	return st, nil
}

func (c *cursor) open(o PlayerOptions) error { return c.openWith(o, nil) }

// openWith opens c's capture; the decoder it builds emits to decSink if
// set (the parallel player's worker batches), else to c's sink.
func (c *cursor) openWith(o PlayerOptions, decSink venue.Sink) error {
	f, err := c.src.Open()
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	v := c.src.Venue
	if v == "" {
		v = f.Meta.Venue
	}
	if v == "" {
		f.Close()
		return fmt.Errorf("replay: %s: the capture does not say which venue it is from; pass --venue", c.src.Name)
	}
	if c.venue != v || c.dec == nil {
		sink, err := o.Sink(v)
		if err != nil {
			f.Close()
			return fmt.Errorf("replay: %s: %w", c.src.Name, err)
		}
		c.sink = &trackingSink{inner: sink, streams: map[venue.Stream]struct{}{}}
		if decSink == nil {
			decSink = c.sink
		}
		dec, err := o.NewDecoder(v, decSink)
		if err != nil {
			f.Close()
			return fmt.Errorf("replay: %s: %w", c.src.Name, err)
		}
		c.dec = dec
	}
	c.venue, c.f, c.conn = v, f, f.Meta.Connection
	return nil
}

// next reads the next record into c.rec; false at the end of the file.
func (c *cursor) next(o PlayerOptions, st *Stats) (bool, error) {
	for {
		rec, err := c.f.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			var le *LineError
			if errors.As(err, &le) && o.OnBadLine != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				st.BadLines++
				o.OnBadLine(err)
				continue
			}
			return false, err
		}
		if rec.Disconnect && rec.Time.IsZero() {
			rec.Time = c.rec.Time // an empty line happens when the line before it did
		}
		c.rec = rec
		return true, nil
	}
}

// end sends replay_end to every stream the capture produced.
func (c *cursor) end(o PlayerOptions) {
	c.sink.mu.Lock()
	streams := append([]venue.Stream(nil), c.sink.order...)
	c.sink.mu.Unlock()
	for _, s := range streams {
		c.sink.Notice(notice.Must(notice.ReplayEnd, c.venue, string(s), c.rec.Time.Add(c.offset), "the replayed capture ended", map[string]any{"capture": c.src.Name}))
	}
}

// ExportSink writes events and notices as the websocket sends them, one
// JSON object per line, assigning each stream's seq as the daemon does.
// Safe for concurrent use.
type ExportSink struct {
	mu      sync.Mutex
	w       io.Writer
	seq     map[venue.Stream]*exportStream
	last    venue.Stream // the stream of the last event, and its state
	lastSeq *exportStream
	buf     []byte // encoded lines not yet written
	limit   int    // how much buf holds before it is written: firstWrite, doubling to exportBuffer
	err     error
	// from, to: the window (Window); zero: no bound. now is the receive
	// time of the last event, the time of a derived line.
	from, to, now time.Time
}

// exportStream is an ExportSink's state for one stream: its last seq, and
// the head of its events' JSON (venue.Event.AppendJSONHead) for kind.
type exportStream struct {
	seq  uint64
	kind venue.Kind
	head []byte
}

// exportBuffer is how much an ExportSink encodes before it writes, once
// it has written; its first write is at firstWrite, and each write's size
// doubles up to exportBuffer: the first lines of an answer leave as soon
// as a few are encoded, and the writes are soon few.
const (
	exportBuffer = 256 << 10
	firstWrite   = 4 << 10
)

// NewExportSink writes to w; call Flush at the end.
func NewExportSink(w io.Writer) *ExportSink {
	return &ExportSink{w: w, seq: map[venue.Stream]*exportStream{}, buf: make([]byte, 0, exportBuffer+4<<10), limit: firstWrite}
}

// Window makes the sink write only what happened within [from, to): the
// events received then, the notices made then, and the derived lines
// emitted while the last event was then. Events outside still take their
// seq, so the window of an export is the whole export's lines cut to it.
// A zero bound is no bound.
func (s *ExportSink) Window(from, to time.Time) {
	s.mu.Lock()
	s.from, s.to = from, to
	s.mu.Unlock()
}

func (s *ExportSink) within(t time.Time) bool {
	return (s.from.IsZero() || !t.Before(s.from)) && (s.to.IsZero() || t.Before(s.to))
}

// Event writes ev with its stream's next seq.
func (s *ExportSink) Event(ev *venue.Event) {
	s.mu.Lock() // unlocked without defer: once per event, and nothing here panics
	if s.lastSeq == nil || ev.Stream != s.last {
		n := s.seq[ev.Stream]
		if n == nil {
			n = &exportStream{}
			s.seq[ev.Stream] = n
		}
		s.last, s.lastSeq = ev.Stream, n
	}
	st := s.lastSeq
	st.seq++
	ev.Seq = st.seq
	s.now = ev.RecvTime
	if !s.within(ev.RecvTime) {
		s.mu.Unlock()
		return
	}
	if st.head == nil || st.kind != ev.Kind {
		st.kind, st.head = ev.Kind, ev.AppendJSONHead(nil)
	}
	s.buf = append(s.buf, st.head...)
	s.buf = strconv.AppendUint(s.buf, ev.Seq, 10)
	s.buf = append(ev.AppendJSONTail(s.buf), '\n')
	s.written()
	s.mu.Unlock()
}

// Notice writes n.
func (s *ExportSink) Notice(n notice.Notice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.within(n.At) {
		return
	}
	s.buf = append(n.AppendJSON(s.buf), '\n')
	s.written()
}

// Line writes b, one encoded JSON object (a derived stream's message that
// is not an Event), as a line.
func (s *ExportSink) Line(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.within(s.now) {
		return
	}
	s.buf = append(append(s.buf, b...), '\n')
	s.written()
}

// written writes the buffer out once it holds limit bytes (lines are
// encoded in place: no copy between encoding and the write).
func (s *ExportSink) written() {
	if len(s.buf) >= s.limit {
		s.write()
	}
}

func (s *ExportSink) write() {
	if s.err == nil && len(s.buf) > 0 {
		_, s.err = s.w.Write(s.buf)
		s.limit = min(2*s.limit, exportBuffer)
	}
	s.buf = s.buf[:0]
}

// Flush writes what is buffered and returns the first write error.
func (s *ExportSink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write()
	return s.err
}
