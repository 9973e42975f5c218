package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/klauspost/compress/gzip"
)

// TimeLen is the length of a capture line's timestamp.
const TimeLen = len("2026-11-29T12:00:00.1234567Z")

// MaxLine is the longest line a Reader accepts (a full-book snapshot with
// room to spare).
const MaxLine = 64 << 20

// Meta describes a capture file.
type Meta struct {
	Venue string `json:"venue"`
	// Connection is the venue connection the capture holds, when the
	// venue was spread over several (0: the first, or the only one).
	Connection    int       `json:"connection,omitempty"`
	Endpoint      string    `json:"endpoint,omitempty"`
	Subscriptions []string  `json:"subscriptions,omitempty"`
	Start         time.Time `json:"start,omitzero"`
	Fanoutd       string    `json:"fanoutd,omitempty"`
}

// Record is one line of a capture.
type Record struct {
	Time time.Time
	// Frame is the raw frame; it is only valid until the next call to
	// Reader.Next. Nil for a disconnect.
	Frame      []byte
	Disconnect bool
	Line       int
}

// AppendTime appends t in the capture's timestamp format (UTC, 100 ns,
// always 7 fractional digits).
func AppendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	frac := t.Nanosecond() / 100
	dst = appendInt(dst, y, 4)
	dst = append(dst, '-')
	dst = appendInt(dst, int(mo), 2)
	dst = append(dst, '-')
	dst = appendInt(dst, d, 2)
	dst = append(dst, 'T')
	dst = appendInt(dst, h, 2)
	dst = append(dst, ':')
	dst = appendInt(dst, mi, 2)
	dst = append(dst, ':')
	dst = appendInt(dst, s, 2)
	dst = append(dst, '.')
	dst = appendInt(dst, frac, 7)
	return append(dst, 'Z')
}

func appendInt(dst []byte, v, width int) []byte {
	var buf [8]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:width]...)
}

// ParseTime parses a capture timestamp. It takes the fixed 28-character
// form fast and falls back to RFC 3339 for anything else (Tardis files
// are always the fixed form).
func ParseTime(b []byte) (time.Time, error) {
	if fixedForm(b) {
		y, ok1 := num(b, 0, 4)
		mo, ok2 := num(b, 5, 2)
		d, ok3 := num(b, 8, 2)
		h, ok4 := num(b, 11, 2)
		mi, ok5 := num(b, 14, 2)
		s, f, ok6 := secFrac(b)
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 {
			t := time.Date(y, time.Month(mo), d, h, mi, s, f*100, time.UTC)
			if t.Day() == d { // rejects 2026-02-31
				return t, nil
			}
		}
		return time.Time{}, fmt.Errorf("bad timestamp %q", b)
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}, fmt.Errorf("bad timestamp %q: want %d characters like 2026-11-29T12:00:00.1234567Z", truncate(b, 40), TimeLen)
	}
	return t, nil
}

// fixedForm reports whether b has the punctuation of the fixed 28-character
// form.
func fixedForm(b []byte) bool {
	return len(b) == TimeLen && b[4] == '-' && b[7] == '-' && b[10] == 'T' && b[13] == ':' && b[16] == ':' && b[19] == '.' && b[27] == 'Z'
}

// num parses the n digits of b at i.
func num(b []byte, i, n int) (int, bool) {
	v := 0
	for _, c := range b[i : i+n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// secFrac parses the seconds (under 60) and the 100 ns units of a
// fixed-form timestamp.
func secFrac(b []byte) (s, f int, ok bool) {
	s, ok1 := num(b, 17, 2)
	f, ok2 := num(b, 20, 7)
	return s, f, ok1 && ok2 && s < 60
}

// timeCache parses a capture's timestamps: a line's timestamp usually
// shares its minute with the line before, so once a minute's prefix
// ("2026-11-29T12:00") parsed, a timestamp with the same prefix needs only
// its seconds and fraction parsed (the same checks and the same Time as
// ParseTime's, at a fraction of the cost).
type timeCache struct {
	prefix [16]byte
	minute time.Time // the prefix's minute; zero when prefix holds none
}

func (c *timeCache) parse(b []byte) (time.Time, error) {
	if !c.minute.IsZero() && fixedForm(b) && string(b[:16]) == string(c.prefix[:]) {
		if s, f, ok := secFrac(b); ok {
			return c.minute.Add(time.Duration(s)*time.Second + time.Duration(f)*100), nil
		}
	}
	t, err := ParseTime(b)
	if err == nil && fixedForm(b) {
		copy(c.prefix[:], b[:16])
		c.minute = t.Truncate(time.Minute)
	}
	return t, err
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// LineError is a capture that cannot be read, with where.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ErrLineTooLong is wrapped in the LineError for a line over MaxLine.
var ErrLineTooLong = errors.New("replay: line too long")

// Reader reads a capture line by line.
type Reader struct {
	name string
	br   *bufio.Reader
	line int
	buf  []byte
	max  int
	tc   timeCache
}

// NewReader reads a capture from r; name is used in errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{name: name, br: bufio.NewReaderSize(r, 256<<10), max: MaxLine}
}

// Next returns the next record, or io.EOF at the end. A malformed line is
// a *LineError naming the file and line; reading may continue after it.
func (r *Reader) Next() (Record, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return Record{}, err
		}
		r.line++
		if len(line) == 0 {
			return Record{Disconnect: true, Line: r.line}, nil
		}
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			return Record{}, &LineError{r.name, r.line, fmt.Errorf("no space after the timestamp in %q", truncate(line, 40))}
		}
		t, err := r.tc.parse(line[:sp])
		if err != nil {
			return Record{}, &LineError{r.name, r.line, err}
		}
		frame := line[sp+1:]
		if len(frame) == 0 {
			// A timestamp with no frame: Tardis writes a disconnect as an
			// empty line, but a timestamped empty frame means the same.
			return Record{Time: t, Disconnect: true, Line: r.line}, nil
		}
		return Record{Time: t, Frame: frame, Line: r.line}, nil
	}
}

// readLine returns the next line without its newline (and without a CR
// before it). The last line may lack a newline.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(r.buf)+len(chunk) > r.max+1 {
			// Skip the rest of the line so the reader can go on.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.br.ReadSlice('\n')
			}
			r.line++
			return nil, &LineError{r.name, r.line, fmt.Errorf("%w (over %d bytes)", ErrLineTooLong, r.max)}
		}
		switch {
		case err == nil:
			if len(r.buf) == 0 {
				return trimEOL(chunk), nil // zero copy in the common case
			}
			r.buf = append(r.buf, chunk...)
			return trimEOL(r.buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.buf = append(r.buf, chunk...)
		case errors.Is(err, io.EOF):
			if len(r.buf)+len(chunk) == 0 {
				return nil, io.EOF
			}
			r.buf = append(r.buf, chunk...)
			return trimEOL(r.buf), nil
		default:
			return nil, &LineError{r.name, r.line + 1, err}
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// Writer writes a capture.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter writes capture lines to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// AppendLine appends one capture line for frame received at t to dst.
func AppendLine(dst []byte, t time.Time, frame []byte) []byte {
	dst = AppendTime(dst, t)
	dst = append(dst, ' ')
	start := len(dst)
	dst = append(dst, frame...)
	for i := start; i < len(dst); i++ {
		if dst[i] == '\n' || dst[i] == '\r' {
			dst[i] = ' '
		}
	}
	return append(dst, '\n')
}

// Frame writes frame received at t.
func (w *Writer) Frame(t time.Time, frame []byte) error {
	w.buf = AppendLine(w.buf[:0], t, frame)
	_, err := w.w.Write(w.buf)
	return err
}

// Disconnect writes an empty line.
func (w *Writer) Disconnect() error {
	_, err := w.w.Write([]byte{'\n'})
	return err
}

// File is an open capture file: its reader and metadata.
type File struct {
	*Reader
	Meta Meta
	c    []io.Closer
}

// Close closes the file.
func (f *File) Close() error {
	var err error
	for i := len(f.c) - 1; i >= 0; i-- {
		err = errors.Join(err, f.c[i].Close())
	}
	return err
}

// Open opens a capture file: gzip if it ends in .gz (or starts with the
// gzip magic), plain otherwise. Metadata comes from the gzip header
// comment, or a sidecar <path>.meta.json; it may be empty.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s: is a directory, not a capture file", path)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	out := &File{c: []io.Closer{f}}
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out.c = append(out.c, zr)
		if zr.Comment != "" {
			if err := json.Unmarshal([]byte(zr.Comment), &out.Meta); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: gzip comment is not capture metadata: %w", path, err)
			}
		}
		out.Reader = NewReader(zr, path)
		return out, nil
	}
	if b, err := os.ReadFile(path + ".meta.json"); err == nil {
		if err := json.Unmarshal(b, &out.Meta); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s.meta.json: %w", path, err)
		}
	}
	out.Reader = NewReader(br, path)
	return out, nil
}

// MetaComment returns the gzip header comment that carries m: JSON with
// every non-ASCII character escaped, since a gzip header holds Latin-1.
func MetaComment(m Meta) string {
	b, _ := json.Marshal(m)
	var sb strings.Builder
	for _, r := range strings.ToValidUTF8(string(b), "\ufffd") {
		if r < 0x80 {
			sb.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&sb, "\\u%04x", u)
		}
	}
	return sb.String()
}
