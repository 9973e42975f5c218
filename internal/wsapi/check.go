package wsapi

import "fmt"

// Validate reports the first option the server cannot run with: a negative
// duration where a negative one means nothing (WriteTimeout, PingInterval,
// WriteDelay, ExpiringNotice), or a negative bound. A zero field takes its
// default (WithDefaults); a negative SendBuffer or NamedTTL has a meaning
// of its own. The daemon checks the options it built from the
// configuration, which has checked each key's range already.
func (o Options) Validate() error {
	for _, d := range []struct {
		name string
		v    int64
	}{
		{"WriteTimeout", int64(o.WriteTimeout)}, {"PingInterval", int64(o.PingInterval)}, {"WriteDelay", int64(o.WriteDelay)},
		{"ExpiringNotice", int64(o.ExpiringNotice)},
		{"MaxBatchBytes", int64(o.MaxBatchBytes)}, {"MaxBatchMessages", int64(o.MaxBatchMessages)},
		{"Limits.MaxStreams", int64(o.Limits.MaxStreams)}, {"Limits.MaxMessageBytes", int64(o.Limits.MaxMessageBytes)},
		{"Limits.MaxConnsPerToken", int64(o.Limits.MaxConnsPerToken)}, {"Limits.CommandBurst", int64(o.Limits.CommandBurst)},
		{"Limits.MaxReplyBytes", int64(o.Limits.MaxReplyBytes)}, {"Limits.MaxNamedPerToken", int64(o.Limits.MaxNamedPerToken)},
		{"Limits.MaxNamed", int64(o.Limits.MaxNamed)},
	} {
		if d.v < 0 {
			return fmt.Errorf("wsapi: %s %d is negative (0: the default)", d.name, d.v)
		}
	}
	if !(o.Limits.CommandsPerSecond >= 0) {
		return fmt.Errorf("wsapi: Limits.CommandsPerSecond %v is not a rate (0: the default)", o.Limits.CommandsPerSecond)
	}
	return nil
}
