package binance_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance/binancetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	venuetest.Run(t, &binancetest.Mock{})
}
