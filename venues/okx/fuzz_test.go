package okx_test

import (
	"bytes"
	"testing"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/okx"
)

// FuzzDecoder feeds arbitrary frames to a decoder that holds a book (the
// recorded 2022 snapshot): it must never panic, and what it emits must keep
// the sink's invariants (snapshot first, no update after a resync before a
// snapshot, never a crossed book).
func FuzzDecoder(f *testing.F) {
	var seeds [][]byte
	for _, name := range []string{
		"books_sequence_BTC-USDT_2022.jsonl", "books_doc_example_seqid.jsonl", "error.jsonl",
		"recorded_2026_ccxt_tickers_trades_books5.jsonl", "subscribe_ack_cryptofeed_2022.jsonl",
		"tickers_cryptofeed_2022.jsonl", "trades_cryptofeed_2022.jsonl", "checksum_doc_vectors.jsonl",
	} {
		seeds = append(seeds, testdata.Frames(f, name)...)
	}
	seeds = append(seeds, genStream(20, 30, 3, true)...)
	for _, s := range seeds {
		if len(s) > 3000 {
			continue // big frames make mutation and minimisation slow; the setup snapshot covers them
		}
		f.Add(s)
		for _, cut := range []int{len(s) / 3, len(s) / 2, len(s) - 1, len(s) - 3} {
			if cut > 0 {
				f.Add(bytes.Clone(s[:cut]))
			}
		}
	}
	snap := genStream(0, 30, 1, true)[0]
	f.Fuzz(func(t *testing.T, frame []byte) {
		sink := venuetest.NewSink()
		d := okx.NewDecoder(venue.Config{Sink: sink})
		d.Frame(recv, snap)
		d.Frame(recv, frame)
		d.Frame(recv, frame)
		sink.Check(t)
	})
}
