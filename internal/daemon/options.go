package daemon

import (
	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/wsapi"
)

// The configuration is the document's, in plain values; these map it to
// the options of the packages it configures. Each package checks its own
// options; config has checked the document's ranges already.

// wsOptions is the websocket server's part of the configuration; the
// daemon sets the rest (Hub, Auth, Check, Metrics, Logger, …).
func wsOptions(c *config.Config) wsapi.Options {
	w, l := c.Websocket, c.Limits
	o := wsapi.Options{
		Origins:          c.Origins,
		WriteTimeout:     w.WriteTimeout,
		PingInterval:     w.PingInterval,
		WriteDelay:       w.WriteDelay,
		Uring:            w.IOUring,
		NamedTTL:         w.NamedTTL, // negative: never, as in wsapi
		SendBuffer:       w.SendBufferBytes,
		MaxBatchBytes:    w.MaxBatchBytes,
		MaxBatchMessages: w.MaxBatchMessages,
		ExpiringNotice:   c.ExpiringNotice,
		Limits: wsapi.Limits{
			MaxStreams:        l.MaxStreamsPerConnection,
			MaxMessageBytes:   l.MaxMessageBytes,
			MaxConnsPerToken:  l.MaxConnectionsPerToken,
			CommandsPerSecond: l.CommandsPerSecond,
			CommandBurst:      l.CommandBurst,
			MaxReplyBytes:     l.MaxReplyBytes,
			MaxNamedPerToken:  l.MaxNamedPerToken,
			MaxNamed:          l.MaxNamed,
		},
	}
	if o.SendBuffer == 0 {
		o.SendBuffer = -1 // send_buffer_bytes: 0 is the kernel's default
	}
	return o
}

// derivedLimits is limits.max_derived_*: the hub's caps on derived streams.
func derivedLimits(c *config.Config) fanout.DerivedLimits {
	return fanout.DerivedLimits{PerToken: c.Limits.MaxDerivedPerToken, PerSource: c.Limits.MaxDerivedPerSource, Weight: c.Limits.MaxDerivedWeight}
}

// recoveryOptions is recovery.*: the hub's recovery window.
func recoveryOptions(c *config.Config) fanout.RecoveryOptions {
	r := c.Recovery
	return fanout.RecoveryOptions{MaxEventsPerStream: r.MaxEventsPerStream, MaxBytes: r.MaxBytes, MaxAge: r.MaxAge}
}

// checkOptions has each configured package validate the options the
// configuration maps to (the feeds' are checked as they are added).
func checkOptions(c *config.Config) error {
	if err := wsOptions(c).Validate(); err != nil {
		return err
	}
	return cluster.Options(c.Cluster).Validate()
}
