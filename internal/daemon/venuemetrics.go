package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/venue"
)

// venueCollector reads every venue adapter's Coverage at scrape time, so
// link state and resyncs per venue cost the adapters nothing (the same
// numbers as /v1/coverage). Rejected: gauges set by the adapters on every
// state change, which would put Prometheus into package venue.
type venueCollector struct {
	venues []*venueRun

	linkUp, linkState, linkSince, resyncs, streams *prometheus.Desc
}

var linkStates = []venue.LinkState{venue.LinkIdle, venue.LinkConnecting, venue.LinkUp, venue.LinkDown}

func newVenueCollector(vs []*venueRun) *venueCollector {
	l := []string{"venue"}
	return &venueCollector{venues: vs,
		linkUp:    prometheus.NewDesc("fanoutd_venue_link_up", "1 while the venue's link is up (connected and subscribed), else 0.", l, nil),
		linkState: prometheus.NewDesc("fanoutd_venue_link_state", "1 for the venue link's current state (idle, connecting, up, down), 0 for the others.", []string{"venue", "state"}, nil),
		linkSince: prometheus.NewDesc("fanoutd_venue_link_since_seconds", "Unix time of the venue link's last state change.", l, nil),
		resyncs:   prometheus.NewDesc("fanoutd_venue_resyncs_total", "Book resyncs of the venue's level2 streams (gap, checksum, bad frame, bus gap).", l, nil),
		streams:   prometheus.NewDesc("fanoutd_venue_streams_live", "Streams of the venue with events observed since its link came up.", l, nil),
	}
}

func (c *venueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.linkUp
	ch <- c.linkState
	ch <- c.linkSince
	ch <- c.resyncs
	ch <- c.streams
}

func (c *venueCollector) Collect(ch chan<- prometheus.Metric) {
	for _, vr := range c.venues {
		cov := vr.adapter.Coverage()
		name := vr.cfg.Name
		up := 0.0
		if cov.Link == venue.LinkUp.String() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.linkUp, prometheus.GaugeValue, up, name)
		for _, s := range linkStates {
			v := 0.0
			if cov.Link == s.String() {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.linkState, prometheus.GaugeValue, v, name, s.String())
		}
		since := 0.0
		if !cov.Since.IsZero() {
			since = float64(cov.Since.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(c.linkSince, prometheus.GaugeValue, since, name)
		ch <- prometheus.MustNewConstMetric(c.resyncs, prometheus.CounterValue, float64(cov.Resyncs), name)
		ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(len(cov.Streams)), name)
	}
}
