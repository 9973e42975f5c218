package kraken_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) { venuetest.Run(t, &krakentest.Mock{}) }

func TestConformanceDepth25(t *testing.T) { venuetest.Run(t, &krakentest.Mock{Depth: 25, Seed: 3}) }
