package jsonw

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// reference is the layout the encoders used before AppendTime.
func reference(t time.Time) string { return string(t.UTC().AppendFormat(nil, time.RFC3339Nano)) }

func checkTime(t *testing.T, tm time.Time) {
	t.Helper()
	if got, want := string(AppendTime([]byte("x"), tm)), "x"+reference(tm); got != want {
		t.Fatalf("AppendTime(%d s %d ns, %s) = %q, want %q", tm.Unix(), tm.Nanosecond(), tm.Location(), got, want)
	}
}

func locations(t testing.TB) []*time.Location {
	locs := []*time.Location{time.UTC, time.Local, time.FixedZone("plus1415", 14*3600+15*60), time.FixedZone("minus12", -12*3600)}
	for _, name := range []string{"America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"} {
		if l, err := time.LoadLocation(name); err == nil {
			locs = append(locs, l)
		} else {
			t.Logf("no zone %s: %v", name, err)
		}
	}
	return locs
}

func TestAppendTimeMatchesRFC3339Nano(t *testing.T) {
	locs := locations(t)
	// Every fraction length the trimming can leave, and none.
	nanos := []int{0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000,
		999_999_999, 123_456_789, 120_000_000, 500_000_000, 900_000_001, 50}
	var edges []time.Time
	for _, y := range []int{0, 1, 4, 99, 100, 399, 400, 401, 1582, 1899, 1900, 1969, 1970, 1971, 1999, 2000,
		2001, 2024, 2025, 2026, 2100, 2400, 9998, 9999} {
		for _, md := range [][2]int{{1, 1}, {2, 28}, {2, 29}, {3, 1}, {12, 31}} {
			for _, hms := range [][3]int{{0, 0, 0}, {23, 59, 59}, {12, 34, 56}} {
				edges = append(edges, time.Date(y, time.Month(md[0]), md[1], hms[0], hms[1], hms[2], 0, time.UTC))
			}
		}
	}
	// The range's bounds and beyond them (the AppendFormat fallback).
	edges = append(edges, time.Time{}, time.Unix(0, 0), time.Unix(minUnix, 0), time.Unix(minUnix-1, 0),
		time.Unix(maxUnix, 0), time.Unix(maxUnix-1, 0), time.Unix(math.MinInt64/2, 0), time.Unix(math.MaxInt64/2, 0),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Now())
	for _, e := range edges {
		for _, ns := range nanos {
			for _, l := range locs {
				checkTime(t, e.Add(time.Duration(ns)).In(l))
			}
		}
	}
	// Every day from 1969 to 2101, at a second and a fraction chosen at random.
	r := rand.New(rand.NewPCG(1, 2))
	for d := time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2102; d = d.AddDate(0, 0, 1) {
		checkTime(t, d.Add(time.Duration(r.Int64N(int64(24*time.Hour)))).In(locs[r.IntN(len(locs))]))
	}
	// Random instants over years 0..9999 and over all of int64 seconds.
	for range 200_000 {
		sec := minUnix + r.Int64N(maxUnix-minUnix)
		if r.IntN(10) == 0 {
			sec = int64(r.Uint64())
		}
		ns := r.Int64N(1e9)
		switch r.IntN(4) {
		case 0:
			ns -= ns % 1e6 // milliseconds, as venues send
		case 1:
			ns -= ns % 1e3
		}
		checkTime(t, time.Unix(sec, ns).In(locs[r.IntN(len(locs))]))
	}
}

func TestAppendTimeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	buf := make([]byte, 0, 64)
	tm := time.Date(2026, 11, 30, 5, 42, 48, 123456789, time.UTC)
	if n := testing.AllocsPerRun(1000, func() { buf = AppendTime(buf[:0], tm) }); n != 0 {
		t.Fatalf("AppendTime allocates %v times per call", n)
	}
}

func FuzzAppendTime(f *testing.F) {
	f.Add(int64(0), int64(0), uint8(0))
	f.Add(int64(1795930968), int64(123456789), uint8(1))
	f.Add(int64(minUnix), int64(1), uint8(2))
	f.Add(int64(maxUnix-1), int64(999999999), uint8(3))
	f.Add(int64(-62135596800), int64(0), uint8(4)) // the zero Time
	locs := locations(f)
	f.Fuzz(func(t *testing.T, sec, nsec int64, loc uint8) {
		checkTime(t, time.Unix(sec, nsec).In(locs[int(loc)%len(locs)]))
	})
}

func BenchmarkAppendTime(b *testing.B) {
	tm := time.Date(2026, 11, 30, 5, 42, 48, 123456789, time.UTC)
	buf := make([]byte, 0, 64)
	b.Run("jsonw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendTime(buf[:0], tm)
		}
	})
	b.Run("AppendFormat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = tm.UTC().AppendFormat(buf[:0], time.RFC3339Nano)
		}
	})
}

// TestAppendTimeAfter checks AppendTimeAfter against AppendTime: times in
// the same second as the earlier one and not, every fraction length, and
// beyond the years AppendTime computes itself.
func TestAppendTimeAfter(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	bases := []time.Time{time.Unix(minUnix-1, 0), time.Unix(maxUnix, 5), time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), time.Unix(0, 0)}
	for range 20000 {
		bases = append(bases, time.Unix(r.Int64N(1<<36)-1<<35, r.Int64N(1e9)))
	}
	for _, p := range bases {
		for _, d := range []time.Duration{0, 1, 3 * time.Millisecond, time.Duration(r.Int64N(int64(time.Second))), time.Second, -time.Millisecond} {
			q := p.Truncate(time.Duration(1) << r.IntN(31)) // fewer fraction digits sometimes
			tm := q.Add(d)
			prev := AppendTime(nil, q)
			got := AppendTimeAfter([]byte("x"), tm, q, prev)
			if want := AppendTime([]byte("x"), tm); string(got) != string(want) {
				t.Fatalf("AppendTimeAfter(%v after %v) = %q, want %q", tm, q, got, want)
			}
		}
	}
}
