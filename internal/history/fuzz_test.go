package history

import (
	"bytes"
	"compress/gzip"
	"testing"
)

// FuzzDescribe: a stored segment's bytes (from the store, so untrusted)
// are described or refused with an error, never a panic; a description
// has a first receive time no later than its last.
func FuzzDescribe(f *testing.F) {
	f.Add([]byte("2026-11-29T12:00:00.1234567Z {\"a\":1}\n\n2026-11-29T12:00:01.0000000Z {}\n"))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Comment = `{"venue":"okx","connection":2,"subscriptions":["BTC-USDT"]}`
	zw.Write([]byte("2026-11-29T12:00:00.1234567Z {}\n"))
	zw.Close()
	f.Add(gz.Bytes())
	f.Add([]byte{0x1f, 0x8b, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Describe("fuzz", data)
		if err != nil {
			return
		}
		if e.First.IsZero() || e.Last.Before(e.First) {
			t.Fatalf("described %+v", e)
		}
	})
}
