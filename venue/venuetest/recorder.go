package venuetest

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// Record is one call an adapter made to a Recorder.
type Record struct {
	Venue string
	// At is the frame's receive time, or the time of the disconnect.
	At time.Time
	// Frame is a copy of the frame; nil for a disconnect.
	Frame []byte
	// Disconnect is set for a Disconnect call.
	Disconnect bool
}

// Recorder is a venue.Recorder that keeps every frame (copied) and every
// disconnect it is given, in order, as a capture would. A zero Recorder
// is ready to use.
type Recorder struct {
	mu      sync.Mutex // protects the fields below
	records []Record
	changed chan struct{} // closed and replaced on every record; nil until waited on
}

var _ venue.Recorder = (*Recorder)(nil)

// Frame records a copy of frame, received at recv.
func (r *Recorder) Frame(venueName string, recv time.Time, frame []byte) {
	r.add(Record{Venue: venueName, At: recv, Frame: bytes.Clone(frame)})
}

// Disconnect records that the link dropped at t.
func (r *Recorder) Disconnect(venueName string, t time.Time) {
	r.add(Record{Venue: venueName, At: t, Disconnect: true})
}

func (r *Recorder) add(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Records returns a copy of what was recorded so far, in order.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// Counts returns how many frames and how many disconnects were recorded.
func (r *Recorder) Counts() (frames, disconnects int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.records {
		if rec.Disconnect {
			disconnects++
		} else {
			frames++
		}
	}
	return frames, disconnects
}

// WaitFor waits until cond holds for the records so far (cond is called
// with the recorder locked and must not call it), failing t after timeout
// with what.
func (r *Recorder) WaitFor(t testing.TB, timeout time.Duration, what string, cond func([]Record) bool) {
	t.Helper()
	waitFor(t, timeout, what, func() (bool, <-chan struct{}) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		return cond(r.records), r.changed
	})
}
