package bybit_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/bybit/bybittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	venuetest.Run(t, bybittest.New())
}
