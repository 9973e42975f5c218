package coinbase_test

import (
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

// FuzzDecoder feeds a valid snapshot and then the fuzzed frame: the
// decoder must never panic, and whatever it publishes must keep the
// consumer's book uncrossed and snapshot-first (venuetest.Sink checks).
func FuzzDecoder(f *testing.F) {
	var seeds [][]byte
	for _, name := range []string{
		"advanced_trade_live_2026-09-07_l2_acks_heartbeat_error.jsonl",
		"advanced_trade_market_trades_2026.jsonl",
		"advanced_trade_ticker_2026.jsonl",
		"advanced_trade_doc_examples.jsonl",
		"exchange_legacy_errors.jsonl",
	} {
		seeds = append(seeds, readFrames(f, name)...)
	}
	seeds = append(seeds, legacyToAdvanced(f)[1:40]...)
	for _, s := range seeds {
		f.Add(s)
		for _, n := range []int{1, len(s) / 3, len(s) / 2, len(s) - 1} {
			f.Add(s[:n])
		}
	}
	snap := l2(0, "snapshot", "bid", "100", "1", "offer", "101", "2")
	f.Fuzz(func(t *testing.T, frame []byte) {
		sink := venuetest.NewSink()
		d := coinbase.NewDecoder(venue.Config{Sink: sink})
		t0 := time.Unix(0, 0)
		d.Frame(t0, snap)
		d.Frame(t0, frame)
		d.Frame(t0, l2(2, "update", "bid", "100.5", "3"))
		d.LinkDown(t0)
		d.Frame(t0, frame)
		sink.Check(t)
	})
}
