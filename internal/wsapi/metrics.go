package wsapi

import (
	"strconv"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/prometheus/client_golang/prometheus"
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
	writeBusy        *prometheus.GaugeVec
	writeAgeScale    *prometheus.GaugeVec
}

// NewMetrics registers the websocket server's metrics on reg. The fanout
// counters are fanout.NewCollector's.
func NewMetrics(reg prometheus.Registerer) *Metrics {
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
	m.writeBusy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fanoutd_write_pool_busy_ratio",
		Help: "Share of the last 100 ms each write-pool worker spent in its rounds (scanning and writing, system calls included)."}, []string{"worker"})
	m.writeAgeScale = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fanoutd_write_age_scale",
		Help: "Each write-pool worker's scale of its connections' ages: 1 is the whole age (up to websocket.write_delay), down to 1/64 while writing takes little of the worker's time."}, []string{"worker"})
	m.writeWorkers.WithLabelValues("io_uring")
	m.writeWorkers.WithLabelValues("write")
	for _, r := range closeReasonNames[1:] {
		m.closes.WithLabelValues(r)
	}
	for _, c := range api.Codes {
		m.refusals.WithLabelValues(string(c))
	}
	reg.MustRegister(m.connections, m.connectionsTotal, m.closes, m.refusals, m.latency, m.queueLen, m.batchBytes, m.writeWorkers, m.writeBusy, m.writeAgeScale)
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

// poolGauges are one write-pool worker's busy share and age scale; the
// zero poolGauges (no metrics) records nothing.
type poolGauges struct{ busy, scale prometheus.Gauge }

// writePool returns worker i's gauges, set to an idle worker's values.
func (m *Metrics) writePool(i int) poolGauges {
	if m == nil {
		return poolGauges{}
	}
	w := strconv.Itoa(i)
	g := poolGauges{m.writeBusy.WithLabelValues(w), m.writeAgeScale.WithLabelValues(w)}
	g.set(0, 1)
	return g
}

func (g poolGauges) set(busy, scale float64) {
	if g.busy != nil {
		g.busy.Set(busy)
		g.scale.Set(scale)
	}
}

func (m *Metrics) refused(code api.Code) {
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
