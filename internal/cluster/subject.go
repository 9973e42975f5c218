package cluster

import (
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// Header names.
const (
	HeaderEpoch = "Fanoutd-Epoch"
	HeaderSeq   = "Fanoutd-Seq"
	HeaderError = "Fanoutd-Error"
	// HeaderLeader names the ingest process (Lease.Instance) that published
	// an event, notice or heartbeat: an edge forwards only the messages of
	// the process holding the venue's lease (fencing).
	HeaderLeader = "Fanoutd-Leader"
)

// HeartbeatEvery is how often an ingest publishes each stream's last seq.
const HeartbeatEvery = time.Second

// WantRenew is how often an edge renews, per venue, the streams its
// subscribers hold (P.want.<venue>); an ingest holds a symbol an edge asked
// for while a renewal came within WantLapse, then for the venue's
// unsubscribe_after like a symbol a local subscriber left.
const (
	WantRenew = HeartbeatEvery
	WantLapse = 3 * WantRenew
)

// Subjects builds the subjects under one prefix. The zero value is not
// usable.
type Subjects struct{ Prefix string }

// Event is the subject of stream st's events.
func (s Subjects) Event(st venue.Stream) string {
	return s.Prefix + ".ev." + st.Venue() + "." + string(st.Channel()) + "." + EscapeToken(st.Symbol())
}

// Notice is the subject of a venue's notices.
func (s Subjects) Notice(venueName string) string { return s.Prefix + ".notice." + venueName }

// Heartbeat is the subject of a venue's heartbeats.
func (s Subjects) Heartbeat(venueName string) string { return s.Prefix + ".hb." + venueName }

// Want is the subject on which edges ask a venue's ingest for streams
// (request/reply) and renew the streams their subscribers hold.
func (s Subjects) Want(venueName string) string { return s.Prefix + ".want." + venueName }

// Recover is the subject on which edges ask a venue's ingest for a range
// of a stream's events from its recovery window (request/reply).
func (s Subjects) Recover(venueName string) string { return s.Prefix + ".recover." + venueName }

// Book is the subject of the book responder of a venue's symbol.
func (s Subjects) Book(venueName, symbol string) string {
	return s.Prefix + ".book." + venueName + "." + EscapeToken(symbol)
}

const hexDigits = "0123456789ABCDEF"

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// EscapeToken makes s one subject token: every byte outside A-Z a-z 0-9
// _ - becomes %XX (upper-case hex). It is reversible (UnescapeToken).
func EscapeToken(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !plain(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; plain(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// UnescapeToken reverses EscapeToken; ok is false for a token it cannot
// have written.
func UnescapeToken(t string) (string, bool) {
	if !strings.Contains(t, "%") {
		for i := 0; i < len(t); i++ {
			if !plain(t[i]) {
				return "", false
			}
		}
		return t, true
	}
	b := make([]byte, 0, len(t))
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case plain(c):
			b = append(b, c)
		case c == '%' && i+2 < len(t):
			hi, lo := strings.IndexByte(hexDigits, t[i+1]), strings.IndexByte(hexDigits, t[i+2])
			if hi < 0 || lo < 0 {
				return "", false
			}
			v := byte(hi<<4 | lo)
			if plain(v) {
				return "", false // not how EscapeToken writes it
			}
			b = append(b, v)
			i += 2
		default:
			return "", false
		}
	}
	return string(b), true
}
