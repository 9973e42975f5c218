package replay

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestPacedNeverOverflows: a long capture at the slowest pace stays
// within a time.Duration, never wrapping into the past (which would play
// at full speed).
func TestPacedNeverOverflows(t *testing.T) {
	year := 365 * 24 * time.Hour
	for _, tc := range []struct {
		d     time.Duration
		speed float64
		want  time.Duration
	}{
		{time.Second, 1, time.Second},
		{time.Second, 2, 500 * time.Millisecond},
		{time.Second, MinSpeed, 1000 * time.Second},
		{year, MinSpeed, math.MaxInt64},
		{math.MaxInt64, MinSpeed, math.MaxInt64},
		{-time.Second, 1, 0},
	} {
		if got := paced(tc.d, tc.speed); got != tc.want {
			t.Errorf("paced(%v, %g) = %v, want %v", tc.d, tc.speed, got, tc.want)
		}
	}
}

func TestPlayRefusesSpeedBelowMin(t *testing.T) {
	src := Source{Name: "x", Venue: "kraken", Open: func() (*File, error) { t.Fatal("opened a capture at a refused speed"); return nil, nil }}
	for _, speed := range []float64{1e-300, 5e-324, 1e-12, MinSpeed / 2, math.NaN(), math.Inf(1), -1} {
		if _, err := Play(context.Background(), PlayerOptions{Speed: speed}, []Source{src}); err == nil {
			t.Errorf("Play at speed %g: no error", speed)
		}
	}
}
