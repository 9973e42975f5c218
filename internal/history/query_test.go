package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// A chain of segments plays as one capture, and each segment is fetched
// only once every line of the one before it was read: a query holds one
// segment's bytes per connection however long its range, and its first
// lines are read before the later segments are.
func TestSourceFetchesLazily(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const segments, perSegment = 5, 1000
	data := map[string][]byte{}
	var chain []Entry
	var want []string
	for s := range segments {
		var raw bytes.Buffer
		for i := range perSegment {
			at := t0.Add(time.Duration(s*perSegment+i) * time.Millisecond)
			line := fmt.Sprintf(`%s {"s":%d,"i":%d}`, at.Format("2006-01-02T15:04:05.0000000Z"), s, i)
			raw.WriteString(line)
			if s%2 == 1 || i < perSegment-1 {
				raw.WriteByte('\n') // even segments end without a newline
			}
			want = append(want, fmt.Sprintf(`{"s":%d,"i":%d}`, s, i))
		}
		b := raw.Bytes()
		if s%2 == 0 { // stored gzip'ed or plain
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(b)
			zw.Close()
			b = z.Bytes()
		}
		claim := fmt.Sprintf("default/c%d", s)
		data[claim] = b
		chain = append(chain, Entry{Venue: "okx", Claim: claim})
	}
	read := 0 // lines read so far
	var fetched []int
	fetch := func(_ context.Context, claim string) ([]byte, error) {
		var s int
		fmt.Sscanf(strings.TrimPrefix(claim, "default/c"), "%d", &s)
		if read != s*perSegment {
			t.Errorf("segment %d fetched after %d lines, want %d", s, read, s*perSegment)
		}
		fetched = append(fetched, s)
		return data[claim], nil
	}
	f, err := Source(context.Background(), chain, fetch).Open()
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := f.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if read >= len(want) || string(rec.Frame) != want[read] {
			t.Fatalf("line %d: %s", read, rec.Frame)
		}
		read++
		if read == 1 && len(fetched) != 1 {
			t.Fatalf("first line read after fetching %v", fetched)
		}
	}
	if read != len(want) || len(fetched) != segments {
		t.Fatalf("%d lines of %d, segments fetched %v", read, len(want), fetched)
	}
}
