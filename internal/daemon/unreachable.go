package daemon

import (
	"context"
	"time"
)

// OfflineHint is what the log says, once, when no venue could be reached:
// how to see fanoutd work without the network.
const OfflineHint = "without the network, replay the recorded captures instead: fanoutd replay --loop testdata/replay/demo/*.jsonl.gz (README.md, Quick start, offline)"

// watchUnreachable logs one warning, with OfflineHint, once every venue
// failed to connect without any having been up; it returns then, once a
// venue is up, or when ctx is done. A replay's venues never fail.
func (d *Daemon) watchUnreachable(ctx context.Context, every time.Duration) {
	if len(d.venues) == 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		failed, last := 0, ""
		for _, vr := range d.venues {
			c := vr.adapter.Coverage()
			if c.Link == "up" {
				return
			}
			if c.Error != "" {
				failed++
				last = vr.cfg.Name + ": " + c.Error
			}
		}
		if failed == len(d.venues) {
			d.log.Warn("no venue could be reached; "+OfflineHint, "venues", failed, "last_error", last)
			return
		}
	}
}
