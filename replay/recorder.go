package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/fanoutd/fanoutd/venue"
)

// RecorderOptions configure a Recorder.
type RecorderOptions struct {
	// Dir is where segments go, one sub-directory per venue. Required.
	Dir string
	// MaxBytes rotates a segment once this many uncompressed bytes were
	// written to it. Defaults to 256 MiB.
	MaxBytes int64
	// MaxAge rotates a segment this long after it was opened. Defaults to
	// 1 h.
	MaxAge time.Duration
	// Queue is how many frames may wait for the writer. Defaults to 65536.
	// Past it frames are dropped, counted and reported: the adapter that
	// hands them over is never blocked by the disk.
	Queue int
	// Meta returns the metadata for a new segment of venue (endpoint,
	// subscriptions); Venue, Start and Fanoutd are filled in.
	Meta func(venueName string) Meta
	// Version is written into every segment's metadata.
	Version string
	// OnSegment is called with every segment after it is closed, fsynced
	// and renamed to its final name (the announcement).
	OnSegment func(Segment)
	// OnError is called for a write error or for frames dropped, at most
	// once per second per venue; the caller turns it into a notice, a
	// metric and a log line. Recording resumes by itself.
	OnError func(venueName string, err error)
	// Now is the clock for segment names and ages. Defaults to time.Now.
	Now func() time.Time
}

// Segment is one closed capture file.
type Segment struct {
	Venue string
	// Conn is the venue connection it holds (a venue.Pool's index; 0 for a
	// venue on one connection).
	Conn   int
	Path   string
	Frames int64
	Bytes  int64 // uncompressed
	Start  time.Time
	End    time.Time
}

// RecorderStats are running totals.
type RecorderStats struct {
	Segments, Frames, Bytes, Dropped, Errors int64
}

// Recorder writes every venue's raw frames to rotating gzip segments. It
// is a venue.ConnRecorder: each connection of a venue.Pool gets segments
// of its own (<venue>-c<N>-<start>.jsonl.gz; connection 0 keeps
// <venue>-<start>.jsonl.gz), so each replays through a decoder of its own.
// Frames are copied and queued; one goroutine compresses and writes them.
type Recorder struct {
	o     RecorderOptions
	queue chan item
	done  chan struct{}

	segments, frames, bytes, dropped, errs atomic.Int64

	closeOnce sync.Once
	mu        sync.Mutex // protects closed and lastDropReport
	closed    bool
	lastDrop  map[string]time.Time
}

var _ venue.ConnRecorder = (*Recorder)(nil)

type item struct {
	venue      string
	conn       int
	keys       func() []string // the connection's symbols, for a new segment's metadata; nil: Meta's
	t          time.Time
	frame      []byte
	disconnect bool
}

// NewRecorder starts a recorder; Close stops it.
func NewRecorder(o RecorderOptions) (*Recorder, error) {
	if o.Dir == "" {
		return nil, errors.New("replay: recorder needs a directory")
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 20
	}
	if o.MaxAge <= 0 {
		o.MaxAge = time.Hour
	}
	if o.Queue <= 0 {
		o.Queue = 65536
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("replay: recorder: %w", err)
	}
	r := &Recorder{o: o, queue: make(chan item, o.Queue), done: make(chan struct{}), lastDrop: map[string]time.Time{}}
	go r.run()
	return r, nil
}

// Frame queues one raw frame of venueName received at t.
func (r *Recorder) Frame(venueName string, t time.Time, frame []byte) {
	r.enqueue(item{venue: venueName, t: t, frame: append([]byte(nil), frame...)})
}

// Disconnect queues a disconnect mark.
func (r *Recorder) Disconnect(venueName string, t time.Time) {
	r.enqueue(item{venue: venueName, t: t, disconnect: true})
}

// ForConn returns the Recorder for connection conn of a venue.Pool, whose
// segments are its own; keys returns the symbols placed on it, which a new
// segment's metadata lists as its subscriptions.
func (r *Recorder) ForConn(conn int, keys func() []string) venue.Recorder {
	return &connRecorder{r: r, conn: conn, keys: keys}
}

// connRecorder is one connection's Recorder.
type connRecorder struct {
	r    *Recorder
	conn int
	keys func() []string
}

func (c *connRecorder) Frame(venueName string, t time.Time, frame []byte) {
	c.r.enqueue(item{venue: venueName, conn: c.conn, keys: c.keys, t: t, frame: append([]byte(nil), frame...)})
}

func (c *connRecorder) Disconnect(venueName string, t time.Time) {
	c.r.enqueue(item{venue: venueName, conn: c.conn, keys: c.keys, t: t, disconnect: true})
}

func (r *Recorder) enqueue(it item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.queue <- it:
	default:
		r.dropped.Add(1)
		now := r.o.Now()
		if now.Sub(r.lastDrop[it.venue]) >= time.Second {
			r.lastDrop[it.venue] = now
			r.report(it.venue, fmt.Errorf("replay: recorder queue full (%d frames): frames dropped, %d in all", r.o.Queue, r.dropped.Load()))
		}
	}
}

func (r *Recorder) report(venueName string, err error) {
	if r.o.OnError != nil {
		r.o.OnError(venueName, err)
	}
}

// Stats returns running totals.
func (r *Recorder) Stats() RecorderStats {
	return RecorderStats{Segments: r.segments.Load(), Frames: r.frames.Load(), Bytes: r.bytes.Load(), Dropped: r.dropped.Load(), Errors: r.errs.Load()}
}

// Close stops accepting frames, writes every queued frame, and flushes,
// closes and fsyncs every open segment before it returns. If ctx ends
// first it returns ctx.Err() and the writer finishes on its own.
func (r *Recorder) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		close(r.queue)
		r.mu.Unlock()
	})
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// segKey names a segment series: a venue's connection.
type segKey struct {
	venue string
	conn  int
}

// segment is an open segment of one venue connection. Owned by the writer
// goroutine.
type segment struct {
	venue   string
	conn    int
	keys    func() []string
	path    string // final name; the file is path+".partial" until closed
	f       *os.File
	zw      *gzip.Writer
	bw      *bufio.Writer
	w       *Writer
	start   time.Time
	frames  int64
	bytes   int64
	retryAt time.Time // after a write error: no new segment before this
}

func (r *Recorder) run() {
	defer close(r.done)
	segs := map[segKey]*segment{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-r.queue:
			if !ok {
				for _, s := range segs {
					r.closeSegment(s)
				}
				return
			}
			r.write(segs, it)
		case <-tick.C:
			now := r.o.Now()
			for _, s := range segs {
				if s.f != nil && now.Sub(s.start) >= r.o.MaxAge {
					r.closeSegment(s)
				}
			}
		}
	}
}

func (r *Recorder) write(segs map[segKey]*segment, it item) {
	k := segKey{it.venue, it.conn}
	s := segs[k]
	if s == nil {
		s = &segment{venue: it.venue, conn: it.conn, keys: it.keys}
		segs[k] = s
	}
	if s.f == nil {
		if it.t.Before(s.retryAt) {
			r.dropped.Add(1)
			return
		}
		if err := r.openSegment(s, it.t); err != nil {
			r.fail(s, it.t, err)
			r.dropped.Add(1)
			return
		}
	}
	var err error
	if it.disconnect {
		err = s.w.Disconnect()
		s.bytes++
	} else {
		err = s.w.Frame(it.t, it.frame)
		s.frames++
		s.bytes += int64(TimeLen + 2 + len(it.frame))
		r.frames.Add(1)
		r.bytes.Add(int64(TimeLen + 2 + len(it.frame)))
	}
	if err != nil {
		r.fail(s, it.t, err)
		return
	}
	if s.bytes >= r.o.MaxBytes {
		r.closeSegment(s)
	}
}

// fail reports err, abandons the open segment (keeping what reached the
// disk under its .partial name) and holds off new segments for a second.
func (r *Recorder) fail(s *segment, t time.Time, err error) {
	r.errs.Add(1)
	r.report(s.venue, fmt.Errorf("replay: recording %s: %w; retrying in 1s", s.venue, err))
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	s.retryAt = t.Add(time.Second)
}

func (r *Recorder) openSegment(s *segment, t time.Time) error {
	dir := filepath.Join(r.o.Dir, s.venue)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	start := r.o.Now().UTC()
	name := s.venue
	if s.conn > 0 {
		name += fmt.Sprintf("-c%d", s.conn)
	}
	name = fmt.Sprintf("%s-%s.jsonl.gz", name, start.Format("20060102T150405.000000000Z"))
	s.path = filepath.Join(dir, name)
	f, err := os.OpenFile(s.path+".partial", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	m := Meta{}
	if r.o.Meta != nil {
		m = r.o.Meta(s.venue)
	}
	if s.keys != nil {
		m.Subscriptions = slices.Sorted(slices.Values(s.keys()))
	}
	m.Venue, m.Connection, m.Start, m.Fanoutd = s.venue, s.conn, start, r.o.Version
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		f.Close()
		return err
	}
	zw.Comment = MetaComment(m)
	s.f, s.zw, s.start, s.frames, s.bytes = f, zw, start, 0, 0
	s.bw = bufio.NewWriterSize(zw, 256<<10)
	s.w = NewWriter(s.bw)
	return nil
}

// closeSegment flushes, closes and fsyncs s, renames it to its final name,
// fsyncs the directory and announces it.
func (r *Recorder) closeSegment(s *segment) {
	if s.f == nil {
		return
	}
	f := s.f
	s.f = nil
	err := s.bw.Flush()
	if err == nil {
		err = s.zw.Close()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(s.path+".partial", s.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(s.path))
	}
	if err != nil {
		r.fail(s, r.o.Now(), err)
		return
	}
	r.segments.Add(1)
	if r.o.OnSegment != nil {
		r.o.OnSegment(Segment{Venue: s.venue, Conn: s.conn, Path: s.path, Frames: s.frames, Bytes: s.bytes, Start: s.start, End: r.o.Now().UTC()})
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
