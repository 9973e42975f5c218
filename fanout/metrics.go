package fanout

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/notice"
)

var (
	descSubscribers = prometheus.NewDesc("fanoutd_subscribers", "Subscribers known, by kind (named ones include detached).", []string{"kind"}, nil)
	descPublished   = prometheus.NewDesc("fanoutd_published_total", "Events published, by venue.", []string{"venue"}, nil)
	descDeliveries  = prometheus.NewDesc("fanoutd_deliveries_total", "Event deliveries queued to subscribers, by venue.", []string{"venue"}, nil)
	descDrops       = prometheus.NewDesc("fanoutd_drops_total", "Deliveries dropped at a subscriber's queue bound, by venue.", []string{"venue"}, nil)
	descMissed      = prometheus.NewDesc("fanoutd_missed_total", "Deliveries skipped while a named subscriber was detached, by venue.", []string{"venue"}, nil)
	descReplaced    = prometheus.NewDesc("fanoutd_conflated_replaced_total", "Conflated messages (book_snapshot_*, quote) replaced unsent by a newer one, by venue.", []string{"venue"}, nil)
	descDropping    = prometheus.NewDesc("fanoutd_dropping_subscribers", "Subscribers over their queue bound now, by venue.", []string{"venue"}, nil)
	descNotices     = prometheus.NewDesc("fanoutd_notices_total", "Notices sent by the feeds, by venue and kind.", []string{"venue", "kind"}, nil)
	descExpired     = prometheus.NewDesc("fanoutd_named_expired_total", "Named subscribers forgotten after their time to live without a connection.", nil, nil)

	descDerivedStreams = prometheus.NewDesc("fanoutd_derived_streams", "Distinct derived streams held on the node (limits.max_derived_per_token and limits.max_derived_per_source count them).", nil, nil)
	descDerivedWeight  = prometheus.NewDesc("fanoutd_derived_weight", "Summed weight (depth; 1 for quote and trade_bar) of the node's derived streams, against limits.max_derived_weight.", nil, nil)
	descDerivedLimit   = prometheus.NewDesc("fanoutd_derived_limit", "The caps on derived streams, by cap: token and source (distinct streams), node (weight).", []string{"cap"}, nil)
	descDerivedRefused = prometheus.NewDesc("fanoutd_derived_refused_total", "Subscriptions to derived streams refused at a cap, by cap: token, source or node.", []string{"cap"}, nil)
	descDerivedReads   = prometheus.NewDesc("fanoutd_derived_reads_total", "Reads of a source book's top for its derived streams (at most two per source event, whatever their number), by venue.", []string{"venue"}, nil)
)

// NewCollector returns a Prometheus collector that reads h's subscriber
// counts and its feeds' counters at scrape time, so the delivery path pays
// nothing for them.
func NewCollector(h *Hub) prometheus.Collector { return &hubCollector{hub: h} }

type hubCollector struct{ hub *Hub }

func (c *hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSubscribers, descPublished, descDeliveries, descDrops, descMissed, descReplaced, descDropping, descNotices, descExpired,
		descDerivedStreams, descDerivedWeight, descDerivedLimit, descDerivedRefused, descDerivedReads} {
		ch <- d
	}
}

func (c *hubCollector) Collect(ch chan<- prometheus.Metric) {
	eph, named := c.hub.Registry().Count()
	ch <- prometheus.MustNewConstMetric(descSubscribers, prometheus.GaugeValue, float64(eph), "ephemeral")
	ch <- prometheus.MustNewConstMetric(descSubscribers, prometheus.GaugeValue, float64(named), "named")
	ch <- prometheus.MustNewConstMetric(descExpired, prometheus.CounterValue, float64(c.hub.Expired()))
	u := c.hub.DerivedUsage()
	ch <- prometheus.MustNewConstMetric(descDerivedStreams, prometheus.GaugeValue, float64(u.Streams))
	ch <- prometheus.MustNewConstMetric(descDerivedWeight, prometheus.GaugeValue, float64(u.Weight))
	for _, l := range []struct {
		c Cap
		v int
	}{{CapPerToken, u.Limits.PerToken}, {CapPerSource, u.Limits.PerSource}, {CapWeight, u.Limits.Weight}} {
		ch <- prometheus.MustNewConstMetric(descDerivedLimit, prometheus.GaugeValue, float64(l.v), l.c.String())
		ch <- prometheus.MustNewConstMetric(descDerivedRefused, prometheus.CounterValue, float64(c.hub.DerivedRefused(l.c)), l.c.String())
	}
	for _, f := range c.hub.Feeds() {
		k := f.Counters()
		v := f.Venue()
		ch <- prometheus.MustNewConstMetric(descPublished, prometheus.CounterValue, float64(k.Published.Load()), v)
		ch <- prometheus.MustNewConstMetric(descDeliveries, prometheus.CounterValue, float64(k.Delivered.Load()), v)
		ch <- prometheus.MustNewConstMetric(descDrops, prometheus.CounterValue, float64(k.Dropped.Load()), v)
		ch <- prometheus.MustNewConstMetric(descMissed, prometheus.CounterValue, float64(k.Missed.Load()), v)
		ch <- prometheus.MustNewConstMetric(descReplaced, prometheus.CounterValue, float64(k.Replaced.Load()), v)
		ch <- prometheus.MustNewConstMetric(descDropping, prometheus.GaugeValue, float64(k.Dropping.Load()), v)
		ch <- prometheus.MustNewConstMetric(descDerivedReads, prometheus.CounterValue, float64(k.DerivedReads.Load()), v)
		for _, kind := range notice.Kinds() {
			ch <- prometheus.MustNewConstMetric(descNotices, prometheus.CounterValue, float64(k.Notices[kind].Load()), v, kind.String())
		}
	}
}
