package coinbase_test

import (
	"testing"

	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

func TestConformance(t *testing.T) {
	venuetest.Run(t, &coinbasetest.Mock{})
}
