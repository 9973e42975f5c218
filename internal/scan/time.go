package scan

import "time"

// Clock parses the RFC 3339 UTC timestamps venues write
// ("2026-09-07T23:37:22.278662782Z") without allocating. It keeps the
// midnight of the last day it saw, so a timestamp on that day costs no
// time.Date call; other forms go through time.Parse. The zero Clock is
// ready to use. A Clock is not safe for concurrent use.
type Clock struct {
	day      [10]byte  // the date of midnight, as written
	midnight time.Time // zero until the first fast-path timestamp
}

// Parse returns the time b spells, or the zero time if it does not parse
// (a venue's time is informative, not a reason to drop a frame).
func (c *Clock) Parse(b []byte) time.Time {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[len(b)-1] != 'Z' {
		return slowTime(b)
	}
	if string(b[:10]) != string(c.day[:]) || c.midnight.IsZero() {
		y, ok1 := digits(b[0:4])
		mo, ok2 := digits(b[5:7])
		d, ok3 := digits(b[8:10])
		if !ok1 || !ok2 || !ok3 || mo < 1 || mo > 12 || d < 1 || d > 31 {
			return slowTime(b)
		}
		c.midnight = time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC)
		copy(c.day[:], b[:10])
	}
	h, ok1 := digits(b[11:13])
	mi, ok2 := digits(b[14:16])
	sec, ok3 := digits(b[17:19])
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 60 {
		return slowTime(b)
	}
	ns := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return slowTime(b)
		}
		f, ok := digits(frac[1:])
		if !ok {
			return slowTime(b)
		}
		ns = f * int(pow10[10-len(frac)])
	}
	return c.midnight.Add(time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute +
		time.Duration(sec)*time.Second + time.Duration(ns))
}

func slowTime(b []byte) time.Time {
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}
	}
	return t
}

// digits parses b, at most 9 ASCII digits, as a decimal number.
func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c-'0' > 9 {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
