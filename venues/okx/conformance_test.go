package okx_test

import (
	"testing"

	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/okx/okxtest"
)

func TestConformance(t *testing.T) {
	venuetest.Run(t, okxtest.New())
}

// TestConformanceNoChecksum runs the suite against OKX as it sends today:
// every checksum 0, integrity from the seqId chain alone.
func TestConformanceNoChecksum(t *testing.T) {
	m := okxtest.New()
	m.Checksums = false
	venuetest.Run(t, m)
}
