package venue

import (
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/notice"
)

// BadFrameQuiet is the quiet window that ends a burst of bad frames: a bad
// frame received (in receive time) at least this long after the previous
// bad frame starts a new burst. Only the first frame of a burst is
// reported, so a venue that sends garbage for an hour gives one
// data_quality notice, and one that sends a bad frame a minute gives one a
// minute.
const BadFrameQuiet = 10 * time.Second

// BadFrameSample is the most bytes of a bad frame a data_quality notice
// quotes in its sample (invalid UTF-8 there is written as "?").
const BadFrameSample = 96

// BadFrames is the one bad-frame rule every decoder applies: it counts the
// frames that do not parse or make an impossible book and reports the first
// of each burst (see BadFrameQuiet) as one data_quality notice. The zero
// value is ready to use. Not safe for concurrent use (a decoder's own).
type BadFrames struct {
	// Conn is the venue connection the decoder reads, from 0; a notice for
	// a frame that concerns no known stream names it in its details.
	Conn int

	count uint64    // bad frames since the decoder was made
	last  time.Time // receive time of the last bad frame; zero before the first
}

// Count returns how many bad frames Report was given.
func (b *BadFrames) Count() uint64 { return b.count }

// Report counts a bad frame received at recv and, when it starts a burst,
// sends sink a data_quality notice from venueName: on stream if the frame is
// known to concern one, otherwise naming the connection (Conn) in its
// details; its reason, the count so far and the frame's first
// BadFrameSample bytes. It reports whether it sent the notice. A receive
// time before the previous one (a capture played again) starts a burst.
func (b *BadFrames) Report(sink Sink, venueName string, recv time.Time, stream Stream, reason string, frame []byte) bool {
	b.count++
	first := b.last.IsZero() || recv.Sub(b.last) >= BadFrameQuiet || recv.Before(b.last)
	b.last = recv
	if !first {
		return false
	}
	details := map[string]any{"reason": reason, "bad_frames": b.count, "sample": Sample(frame)}
	if stream == "" {
		details["connection"] = b.Conn
	}
	sink.Notice(notice.Must(notice.DataQuality, venueName, string(stream), recv, venueName+": bad frame: "+reason, details))
	return true
}

// Sample returns the first BadFrameSample bytes of frame as valid UTF-8
// (each invalid sequence, such as a rune the cut split, becomes "?").
func Sample(frame []byte) string {
	if len(frame) > BadFrameSample {
		frame = frame[:BadFrameSample]
	}
	return strings.ToValidUTF8(string(frame), "?")
}
