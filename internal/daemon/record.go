package daemon

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// recordTap is every adapter's venue.Recorder while recording is enabled.
// It forwards to the daemon's Recorder, which Run starts, so a New that
// fails leaves no writer goroutine behind.
type recordTap struct{ d *Daemon }

var _ venue.ConnRecorder = recordTap{}

func (t recordTap) Frame(venueName string, at time.Time, frame []byte) {
	if r := t.d.rec; r != nil {
		r.Frame(venueName, at, frame)
	}
}

func (t recordTap) Disconnect(venueName string, at time.Time) {
	if r := t.d.rec; r != nil {
		r.Disconnect(venueName, at)
	}
}

// ForConn keeps the connections of a pooled venue apart
// (venue.ConnRecorder): each records its own segments.
func (t recordTap) ForConn(conn int, keys func() []string) venue.Recorder {
	return &connTap{d: t.d, conn: conn, keys: keys}
}

// connTap is one connection's recordTap: it takes its Recorder from the
// daemon's once that is running.
type connTap struct {
	d    *Daemon
	conn int
	keys func() []string
	once sync.Once
	rec  venue.Recorder
}

func (t *connTap) get() venue.Recorder {
	if t.d.rec == nil {
		return nil
	}
	t.once.Do(func() { t.rec = t.d.rec.ForConn(t.conn, t.keys) })
	return t.rec
}

func (t *connTap) Frame(venueName string, at time.Time, frame []byte) {
	if r := t.get(); r != nil {
		r.Frame(venueName, at, frame)
	}
}

func (t *connTap) Disconnect(venueName string, at time.Time) {
	if r := t.get(); r != nil {
		r.Disconnect(venueName, at)
	}
}

// startRecording starts the Recorder if record.enabled; Run calls it
// before the venues start (d.rec is then read only by the venues'
// goroutines, which start after it is set).
func (d *Daemon) startRecording() error {
	rc := d.cfg.Record
	if !rc.Enabled {
		return nil
	}
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fanoutd_recording_errors_total",
		Help: "Recording failures (write errors, reports of dropped frames; at most one report per second per venue)."}, []string{"venue"})
	for _, vr := range d.venues {
		errs.WithLabelValues(vr.cfg.Name) // at 0 from the start: increase() sees the first failure
	}
	r, err := replay.NewRecorder(replay.RecorderOptions{
		Dir: rc.Dir, MaxBytes: rc.MaxBytes, MaxAge: rc.MaxAge, Queue: rc.Queue, Version: Version,
		Meta: d.captureMeta,
		OnSegment: func(s replay.Segment) {
			d.log.Info("capture segment closed", "venue", s.Venue, "path", s.Path, "frames", s.Frames, "bytes", s.Bytes)
			if rc.CheckIn {
				// Synchronous on the recorder's writer: the recorder's queue
				// absorbs the frames that arrive meanwhile, and shutdown
				// checks the last segments in before the claim check closes.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				c, err := d.CheckInSegment(ctx, s)
				cancel()
				if err != nil {
					errs.WithLabelValues(s.Venue).Inc()
					d.log.Warn("capture segment check-in failed", "venue", s.Venue, "path", s.Path, "err", err)
				} else {
					d.log.Info("capture segment checked in", "venue", s.Venue, "path", s.Path, "claim", c.URL)
					if f := d.o.OnCheckIn; f != nil {
						f(s, c)
					}
				}
			}
			if f := d.o.OnSegment; f != nil {
				f(s)
			}
		},
		OnError: func(venueName string, err error) {
			// Called with the recorder's lock held: nothing here may call
			// the Recorder.
			errs.WithLabelValues(venueName).Inc()
			d.log.Warn("recording failed", "venue", venueName, "err", err)
			if vr := d.byName[venueName]; vr != nil {
				if n, nerr := notice.New(notice.RecordingFailed, 0, venueName, "", time.Now(), err.Error(), nil); nerr == nil {
					vr.feed.Notice(n)
				}
			}
		},
	})
	if err != nil {
		return err
	}
	d.reg.MustRegister(errs)
	for _, m := range []struct {
		name, help string
		get        func(replay.RecorderStats) int64
	}{
		{"fanoutd_recorded_frames_total", "Frames written to captures.", func(s replay.RecorderStats) int64 { return s.Frames }},
		{"fanoutd_recorded_bytes_total", "Uncompressed bytes written to captures.", func(s replay.RecorderStats) int64 { return s.Bytes }},
		{"fanoutd_recorded_segments_total", "Capture segments closed, fsynced and announced.", func(s replay.RecorderStats) int64 { return s.Segments }},
		{"fanoutd_recording_dropped_total", "Frames not recorded (queue full, or a segment could not be written).", func(s replay.RecorderStats) int64 { return s.Dropped }},
	} {
		d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help},
			func() float64 { return float64(m.get(r.Stats())) }))
	}
	d.rec = r
	d.log.Info("recording", "dir", rc.Dir, "max_bytes", rc.MaxBytes, "max_age", rc.MaxAge)
	return nil
}

// captureMeta is a new segment's metadata: the venue's endpoint and the
// symbols it is subscribed to now.
func (d *Daemon) captureMeta(venueName string) replay.Meta {
	vr := d.byName[venueName]
	if vr == nil {
		return replay.Meta{}
	}
	m := replay.Meta{Endpoint: vr.cfg.WSURL}
	if m.Endpoint == "" {
		m.Endpoint = endpointOf(venueName)
	}
	vr.mu.Lock()
	for s := range vr.symbols {
		m.Subscriptions = append(m.Subscriptions, s)
	}
	vr.mu.Unlock()
	slices.Sort(m.Subscriptions)
	return m
}

// stopRecording flushes, closes and fsyncs every open segment; Shutdown
// calls it after the venues stopped, so nothing they read is lost.
func (d *Daemon) stopRecording() {
	if d.rec == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.rec.Close(ctx); err != nil {
		d.log.Warn("shutdown: recorder did not finish writing", "err", err)
		return
	}
	st := d.rec.Stats()
	d.log.Info("recording closed", "segments", st.Segments, "frames", st.Frames, "bytes", st.Bytes, "dropped", st.Dropped)
}

// recorder is the venue.Recorder the adapters get: nil (an interface
// holding nothing) unless recording is enabled.
func (d *Daemon) recorder() venue.Recorder {
	if !d.cfg.Record.Enabled {
		return nil
	}
	return recordTap{d}
}

// endpointOf is a venue's public websocket endpoint, for capture metadata
// when the configuration sets no ws_url.
func endpointOf(name string) string {
	v, _ := venues.Lookup(name)
	return v.WSURL
}
