package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
)

// exportWith replays srcs into an ExportSink, in parallel or not, and
// returns the export and the stats.
func exportWith(t testing.TB, parallel bool, onBad func(error), srcs ...replay.Source) ([]byte, replay.Stats, error) {
	var buf bytes.Buffer
	sink := replay.NewExportSink(&buf)
	st, err := replay.Play(context.Background(), replay.PlayerOptions{
		Parallel: parallel,
		NewDecoder: func(v string, s venue.Sink) (venue.Decoder, error) {
			for _, vc := range venueCases {
				if vc.name == v {
					return vc.decoder(venue.Config{Sink: s}), nil
				}
			}
			return nil, fmt.Errorf("no venue %q", v)
		},
		Sink:      func(string) (venue.Sink, error) { return sink, nil },
		OnBadLine: onBad,
	}, srcs)
	if ferr := sink.Flush(); ferr != nil {
		t.Fatal(ferr)
	}
	return buf.Bytes(), st, err
}

// TestParallelExportMatchesSerial: the parallel player's export is the
// serial player's, byte for byte, on each testdata capture, on all five
// merged, and on captures given twice (equal receive times, broken by
// source order).
func TestParallelExportMatchesSerial(t *testing.T) {
	var all []replay.Source
	cases := map[string][]replay.Source{}
	for _, vc := range venueCases {
		src := replay.FileSource(capturePath(vc.name), "")
		cases[vc.name] = []replay.Source{src}
		all = append(all, src)
	}
	cases["all"] = all
	cases["twice"] = append(append([]replay.Source(nil), all...), all...)
	for name, srcs := range cases {
		t.Run(name, func(t *testing.T) {
			want, wst, err1 := exportWith(t, false, nil, srcs...)
			got, gst, err2 := exportWith(t, true, nil, srcs...)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if wst != gst {
				t.Errorf("stats %+v, serial %+v", gst, wst)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("parallel export differs from serial (%d bytes, want %d)", len(got), len(want))
			}
			if len(want) == 0 {
				t.Fatal("empty export")
			}
		})
	}
}

// TestParallelBadLinesAndErrors: bad lines are reported in the serial
// player's order, and an unreadable capture ends the replay with the
// serial player's error.
func TestParallelBadLinesAndErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "a.jsonl")
	os.WriteFile(good+".meta.json", []byte(`{"venue":"binance"}`), 0o644)
	os.WriteFile(good, []byte("not a line\n2026-11-30T06:02:43.1684132Z {\"result\":null,\"id\":1}\nbad again\n2026-11-30T06:02:44.0000000Z {\"x\":1}\n\nbad at the end\n"), 0o644)
	srcs := []replay.Source{replay.FileSource(good, ""), replay.FileSource(capturePath("binance"), "")}
	var serial, parallel []string
	want, wst, err1 := exportWith(t, false, func(err error) { serial = append(serial, err.Error()) }, srcs...)
	got, gst, err2 := exportWith(t, true, func(err error) { parallel = append(parallel, err.Error()) }, srcs...)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !bytes.Equal(got, want) || wst != gst || fmt.Sprint(serial) != fmt.Sprint(parallel) || len(serial) != 3 {
		t.Fatalf("parallel: %+v %q; serial: %+v %q", gst, parallel, wst, serial)
	}
	_, _, err1 = exportWith(t, false, nil, srcs...)
	_, _, err2 = exportWith(t, true, nil, srcs...)
	var le1, le2 *replay.LineError
	if !errors.As(err1, &le1) || !errors.As(err2, &le2) || err1.Error() != err2.Error() {
		t.Fatalf("errors: parallel %v, serial %v", err2, err1)
	}
}

// BenchmarkExportParallel is BenchmarkExport through the parallel player,
// with the five captures merged (one op: all five).
func BenchmarkExportParallel(b *testing.B) {
	var srcs []replay.Source
	for _, vc := range venueCases {
		srcs = append(srcs, replay.FileSource(capturePath(vc.name), ""))
	}
	for _, parallel := range []bool{false, true} {
		b.Run(fmt.Sprintf("parallel=%v", parallel), func(b *testing.B) {
			var frames int64
			for b.Loop() {
				_, st, err := exportWith(b, parallel, nil, srcs...)
				if err != nil {
					b.Fatal(err)
				}
				frames += st.Frames
			}
			b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
