package jsonw

import "time"

// AppendTime appends t in UTC as time.RFC3339Nano formats it
// ("2006-01-02T15:04:05.999999999Z", trailing zeros of the fraction and a
// bare dot dropped), byte for byte, without the quotes. It computes the
// civil date from the Unix seconds directly, which costs a fraction of
// t.UTC().AppendFormat(dst, time.RFC3339Nano) (docs/design.md);
// years outside 0000..9999 go through AppendFormat.
func AppendTime(dst []byte, t time.Time) []byte {
	sec := t.Unix()
	if sec < minUnix || sec >= maxUnix {
		return t.UTC().AppendFormat(dst, time.RFC3339Nano)
	}
	// Days since 0000-03-01 shifted by one 400-year era so that all is
	// unsigned (the civil-from-days algorithm of H. Hinnant, eras of
	// 146,097 days starting on 1 March).
	s := uint64(sec - minUnix)
	days, sod := s/86400, s%86400
	z := days - 60 + 146097 // minUnix is 0000-01-01, 60 days before 0000-03-01
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day := doy - (153*mp+2)/5 + 1
	month := mp + 3
	if mp >= 10 {
		month = mp - 9
	}
	year := yoe + era*400 - 400
	if month <= 2 {
		year++
	}

	var b [19]byte
	put2(b[0:], year/100)
	put2(b[2:], year%100)
	b[4] = '-'
	put2(b[5:], month)
	b[7] = '-'
	put2(b[8:], day)
	b[10] = 'T'
	put2(b[11:], sod/3600)
	b[13] = ':'
	put2(b[14:], sod/60%60)
	b[16] = ':'
	put2(b[17:], sod%60)
	return appendNanos(append(dst, b[:19]...), t)
}

// AppendTimeAfter appends t as AppendTime does; prev is the text
// AppendTime wrote for an earlier time p (an event's venue time before its
// receive time): when t falls in the same second as p, its first 19 bytes
// (date and time of day) are copied instead of computed.
func AppendTimeAfter(dst []byte, t, p time.Time, prev []byte) []byte {
	if sec := t.Unix(); len(prev) < 20 || sec != p.Unix() || sec < minUnix || sec >= maxUnix {
		return AppendTime(dst, t)
	}
	return appendNanos(append(dst, prev[:19]...), t)
}

// appendNanos appends t's fraction of a second as RFC3339Nano does (none
// when zero, trailing zeros dropped) and the 'Z'.
func appendNanos(dst []byte, t time.Time) []byte {
	ns := uint64(t.Nanosecond())
	if ns == 0 {
		return append(dst, 'Z')
	}
	var b [11]byte
	b[0] = '.'
	b[1] = byte('0' + ns/1e8)
	ns %= 1e8
	put2(b[2:], ns/1e6)
	put2(b[4:], ns/1e4%100)
	put2(b[6:], ns/100%100)
	put2(b[8:], ns%100)
	n := 10
	for b[n-1] == '0' {
		n--
	}
	b[n] = 'Z'
	return append(dst, b[:n+1]...)
}

const (
	minUnix = -62167219200 // 0000-01-01T00:00:00Z
	maxUnix = 253402300800 // 10000-01-01T00:00:00Z
)

const pairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// put2 writes v (< 100) as two digits at b[0:2].
func put2(b []byte, v uint64) {
	b[0], b[1] = pairs[2*v], pairs[2*v+1]
}
