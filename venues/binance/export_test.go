package binance

import "time"

// SetWeightBudget makes a's REST budget weight per window (the bucket full
// now), so a test runs Binance's per-minute pacing in seconds.
func SetWeightBudget(a *Adapter, weight float64, window time.Duration) {
	a.rest.setBudget(weight, window)
}
