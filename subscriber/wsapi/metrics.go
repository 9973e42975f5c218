package wsapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/notice"
)

// Metrics are the daemon's Prometheus metrics for subscribers. Build them
// with NewMetrics; a nil *Metrics records nothing.
type Metrics struct {
	connections      prometheus.Gauge
	connectionsTotal prometheus.Counter
	closes           *prometheus.CounterVec
	refusals         *prometheus.CounterVec
	latency          prometheus.Histogram
	queueLen         prometheus.Histogram
	batchBytes       prometheus.Histogram
	writeWorkers     *prometheus.GaugeVec
}

// NewMetrics registers the subscriber metrics on reg, including a collector
// that reads hub's subscriber counts and its feeds' counters at scrape time
// (so the delivery path pays nothing for them).
func NewMetrics(reg prometheus.Registerer, hub *fanout.Hub) *Metrics {
	m := &Metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fanoutd_connections",
			Help: "Websocket connections open now."}),
		connectionsTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "fanoutd_connections_total",
			Help: "Websocket connections accepted."}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fanoutd_closes_total",
			Help: "Websocket connections closed, by close reason."}, []string{"reason"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fanoutd_refusals_total",
			Help: "Refused commands and connections, by error code."}, []string{"code"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fanoutd_publish_to_write_seconds",
			Help:    "Time from publish to the end of the socket write, for the oldest data message of each written batch.",
			Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1, 5}}),
		queueLen: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fanoutd_queue_length",
			Help:    "Messages the writer found queued at each drain (capped at the batch bound).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fanoutd_write_batch_bytes",
			Help:    "Bytes per websocket message written (one batch).",
			Buckets: prometheus.ExponentialBuckets(256, 4, 7)}),
		writeWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fanoutd_write_workers",
			Help: "Write-pool workers running, by how they write: io_uring, or write (one write(2) per connection)."}, []string{"io"}),
	}
	m.writeWorkers.WithLabelValues("io_uring")
	m.writeWorkers.WithLabelValues("write")
	for _, r := range closeReasonNames[1:] {
		m.closes.WithLabelValues(r)
	}
	for _, c := range Codes {
		m.refusals.WithLabelValues(string(c))
	}
	reg.MustRegister(m.connections, m.connectionsTotal, m.closes, m.refusals, m.latency, m.queueLen, m.batchBytes, m.writeWorkers,
		&hubCollector{hub: hub})
	return m
}

// writeWorker adds delta to the workers that write with io_uring (uring)
// or with write(2).
func (m *Metrics) writeWorker(uring bool, delta float64) {
	if m == nil {
		return
	}
	io := "write"
	if uring {
		io = "io_uring"
	}
	m.writeWorkers.WithLabelValues(io).Add(delta)
}

func (m *Metrics) refused(code Code) {
	if m != nil {
		m.refusals.WithLabelValues(string(code)).Inc()
	}
}

func (m *Metrics) opened() {
	if m != nil {
		m.connections.Inc()
		m.connectionsTotal.Inc()
	}
}

func (m *Metrics) closed(r CloseReason) {
	if m != nil {
		m.connections.Dec()
		m.closes.WithLabelValues(r.String()).Inc()
	}
}

var (
	descSubscribers = prometheus.NewDesc("fanoutd_subscribers", "Subscribers known, by kind (named ones include detached).", []string{"kind"}, nil)
	descPublished   = prometheus.NewDesc("fanoutd_published_total", "Events published, by venue.", []string{"venue"}, nil)
	descDeliveries  = prometheus.NewDesc("fanoutd_deliveries_total", "Event deliveries queued to subscribers, by venue.", []string{"venue"}, nil)
	descDrops       = prometheus.NewDesc("fanoutd_drops_total", "Deliveries dropped at a subscriber's queue bound, by venue.", []string{"venue"}, nil)
	descMissed      = prometheus.NewDesc("fanoutd_missed_total", "Deliveries skipped while a named subscriber was detached, by venue.", []string{"venue"}, nil)
	descDropping    = prometheus.NewDesc("fanoutd_dropping_subscribers", "Subscribers over their queue bound now, by venue.", []string{"venue"}, nil)
	descNotices     = prometheus.NewDesc("fanoutd_notices_total", "Notices sent by the feeds, by venue and kind.", []string{"venue", "kind"}, nil)
)

// hubCollector reads fanout's counters at scrape time.
type hubCollector struct{ hub *fanout.Hub }

func (c *hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSubscribers, descPublished, descDeliveries, descDrops, descMissed, descDropping, descNotices} {
		ch <- d
	}
}

func (c *hubCollector) Collect(ch chan<- prometheus.Metric) {
	eph, named := c.hub.Registry().Count()
	ch <- prometheus.MustNewConstMetric(descSubscribers, prometheus.GaugeValue, float64(eph), "ephemeral")
	ch <- prometheus.MustNewConstMetric(descSubscribers, prometheus.GaugeValue, float64(named), "named")
	for _, f := range c.hub.Feeds() {
		k := f.Counters()
		v := f.Venue()
		ch <- prometheus.MustNewConstMetric(descPublished, prometheus.CounterValue, float64(k.Published.Load()), v)
		ch <- prometheus.MustNewConstMetric(descDeliveries, prometheus.CounterValue, float64(k.Delivered.Load()), v)
		ch <- prometheus.MustNewConstMetric(descDrops, prometheus.CounterValue, float64(k.Dropped.Load()), v)
		ch <- prometheus.MustNewConstMetric(descMissed, prometheus.CounterValue, float64(k.Missed.Load()), v)
		ch <- prometheus.MustNewConstMetric(descDropping, prometheus.GaugeValue, float64(k.Dropping.Load()), v)
		for _, kind := range notice.Kinds() {
			if int(kind) < len(k.Notices) {
				ch <- prometheus.MustNewConstMetric(descNotices, prometheus.CounterValue, float64(k.Notices[kind].Load()), v, kind.String())
			}
		}
	}
}
