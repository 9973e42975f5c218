package client

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"
)

// recorded returns the level2 events of the Coinbase testdata capture, as
// `fanoutd replay --export` writes them (clients/testdata).
func recorded(tb testing.TB) [][]byte {
	f, err := os.Open("../clients/testdata/coinbase-level2.jsonl.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Text()...))
	}
	return lines
}

// BenchmarkApplyRecorded applies recorded level2 events through the state
// machine to a book (seq checks, state, levels), decoded beforehand.
func BenchmarkApplyRecorded(b *testing.B) {
	lines := recorded(b)
	ws := make([]wire, len(lines))
	evs := make([]*BookEvent, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal(l, &ws[i]); err != nil {
			b.Fatal(err)
		}
		evs[i] = ws[i].book()
	}
	stream := ws[0].Stream
	tr := newTracker()
	tr.add(stream)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(ws)
		if j == 0 {
			tr = newTracker()
			tr.add(stream)
		}
		tr.data(&ws[j], evs[j])
		tr.outbox = tr.outbox[:0]
	}
	b.StopTimer()
	if s, _ := tr.streams[stream].book.State(); s != Valid && b.N > len(ws) {
		b.Fatalf("book %v after the recorded events", s)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecodeApplyRecorded is BenchmarkApplyRecorded with each
// event's JSON decoded (encoding/json) as the client reads it.
func BenchmarkDecodeApplyRecorded(b *testing.B) {
	lines := recorded(b)
	var w0 wire
	json.Unmarshal(lines[0], &w0)
	tr := newTracker()
	tr.add(w0.Stream)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(lines)
		if j == 0 {
			tr = newTracker()
			tr.add(w0.Stream)
		}
		var w wire
		json.Unmarshal(lines[j], &w)
		tr.data(&w, w.book())
		tr.outbox = tr.outbox[:0]
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
