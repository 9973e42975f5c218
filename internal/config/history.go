package config

import "time"

// historyConfig is the history: section as written.
type historyConfig struct {
	MaxRange   string `yaml:"max_range"`
	MaxQueries any    `yaml:"max_queries"`
}

// History is the resolved history: section (the time-range routes over
// recorded segments).
type History struct {
	// MaxRange is the longest from–to range one history query may ask
	// for. Defaults to 24h; at most 744h (31 days).
	MaxRange time.Duration
	// MaxQueries bounds the history queries (streams and books at an
	// instant) answered at once; past it a query is 503 overloaded.
	// Defaults to 256.
	MaxQueries int
}

// History defaults and bounds.
const (
	defaultHistoryMaxRange = 24 * time.Hour
	maxHistoryMaxRange     = 31 * 24 * time.Hour
	defaultHistoryQueries  = 256
)

func resolveHistory(hc *historyConfig) (History, error) {
	h := History{MaxRange: defaultHistoryMaxRange}
	n, err := intIn("history.max_queries", hc.MaxQueries, defaultHistoryQueries, 1, 1<<20)
	if err != nil {
		return h, err
	}
	h.MaxQueries = int(n)
	if hc.MaxRange == "" {
		return h, nil
	}
	d, err := time.ParseDuration(hc.MaxRange)
	if err != nil || d <= 0 || d > maxHistoryMaxRange {
		return h, cfgErr("history.max_range", "%q is not a duration between 0 and 744h (e.g. \"24h\")", hc.MaxRange)
	}
	h.MaxRange = d
	return h, nil
}
