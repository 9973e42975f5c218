package wsapi

import (
	"math"
	"strings"
	"testing"
)

// TestOptionsValidate: zero options and the defaults pass; a negative bound
// or rate is named.
func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Options{SendBuffer: -1, NamedTTL: -1}).WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{WriteDelay: -1}, "WriteDelay -1"},
		{Options{MaxBatchBytes: -5}, "MaxBatchBytes -5"},
		{Options{Limits: Limits{MaxNamed: -1}}, "Limits.MaxNamed -1"},
		{Options{Limits: Limits{CommandsPerSecond: math.NaN()}}, "CommandsPerSecond NaN"},
	} {
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}
