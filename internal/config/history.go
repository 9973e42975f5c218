package config

import "time"

// historyConfig is the history: section as written.
type historyConfig struct {
	MaxRange string `yaml:"max_range"`
}

// History is the resolved history: section (the time-range routes over
// recorded segments).
type History struct {
	// MaxRange is the longest from–to range one history query may ask
	// for. Defaults to 24h; at most 744h (31 days).
	MaxRange time.Duration
}

// History defaults and bounds.
const (
	defaultHistoryMaxRange = 24 * time.Hour
	maxHistoryMaxRange     = 31 * 24 * time.Hour
)

func resolveHistory(hc *historyConfig) (History, error) {
	h := History{MaxRange: defaultHistoryMaxRange}
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
