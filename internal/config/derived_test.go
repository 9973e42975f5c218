package config_test

import (
	"strings"
	"testing"

	"github.com/fanoutd/fanoutd/internal/config"
)

// TestDerivedLimits: limits.max_derived_* are resolved; absent, they are
// the defaults; a bad value stops the load naming
// the key and the value.
func TestDerivedLimits(t *testing.T) {
	cfg, err := config.Parse([]byte("limits:\n  max_derived_per_token: 5\n  max_derived_per_source: 7\n  max_derived_weight: 900\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Limits; l.MaxDerivedPerToken != 5 || l.MaxDerivedPerSource != 7 || l.MaxDerivedWeight != 900 {
		t.Fatalf("Limits %+v", l)
	}
	if cfg, err = config.Parse(nil, nil); err != nil || cfg.Limits.MaxDerivedPerToken != 64 || cfg.Limits.MaxDerivedPerSource != 32 || cfg.Limits.MaxDerivedWeight != 8192 {
		t.Fatalf("absent: %+v, %v", cfg.Limits, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"limits:\n  max_derived_per_token: 0\n", "limits.max_derived_per_token: 0 is not an integer from 1"},
		{"limits:\n  max_derived_per_source: many\n", "limits.max_derived_per_source"},
		{"limits:\n  max_derived_weight: 1.5\n", "limits.max_derived_weight: 1.5 is not an integer"},
		{"limits:\n  max_derived_weight: 10000000000000\n", "limits.max_derived_weight: 10000000000000 is not an integer"},
	} {
		_, err := config.Parse([]byte(tc.yaml), nil)
		if err == nil || !strings.HasPrefix(err.Error(), "config: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
