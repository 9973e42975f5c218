package claimcheck

import "github.com/prometheus/client_golang/prometheus"

// Metric names. They are part of fanoutd's external contract.
const (
	MetricReads         = "fanoutd_claimcheck_reads_total"               // {outcome}
	MetricStoreRequests = "fanoutd_claimcheck_store_requests_total"      // {store,result}
	MetricLimit         = "fanoutd_claimcheck_store_limit"               // {store}
	MetricInflight      = "fanoutd_claimcheck_store_inflight"            // {store}
	MetricQueued        = "fanoutd_claimcheck_store_queued"              // {store}
	MetricLimitChanges  = "fanoutd_claimcheck_store_limit_changes_total" // {store,direction}
	MetricGateInflight  = "fanoutd_claimcheck_gate_inflight"
	MetricGateRejected  = "fanoutd_claimcheck_gate_rejected_total"
	MetricCacheBytes    = "fanoutd_claimcheck_cache_bytes"
	MetricStoreWasted   = "fanoutd_claimcheck_store_wasted_total" // {store}
)

type metrics struct {
	reads        *prometheus.CounterVec
	storeReqs    *prometheus.CounterVec
	limit        *prometheus.GaugeVec
	inflight     *prometheus.GaugeVec
	queued       *prometheus.GaugeVec
	limitChanges *prometheus.CounterVec
	gateInflight prometheus.Gauge
	gateRejected prometheus.Counter
	wasted       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, c *cache) (*metrics, error) {
	m := &metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricReads,
			Help: "Claim-check reads by outcome: store (the caller's fetch went to the store), coalesced (joined another's fetch), cache, shed (no answer: overloaded, deadline, closed)."}, []string{"outcome"}),
		storeReqs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricStoreRequests,
			Help: "Store requests made by the reader, by store and result (ok, missing, throttled, unavailable, forbidden, other)."}, []string{"store", "result"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricLimit,
			Help: "The reader's current concurrency limit per store (AIMD)."}, []string{"store"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricInflight,
			Help: "Store requests running per store."}, []string{"store"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricQueued,
			Help: "Reads waiting for a store slot per store."}, []string{"store"}),
		limitChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricLimitChanges,
			Help: "Changes of a store's limit by direction (up, down)."}, []string{"store", "direction"}),
		gateInflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricGateInflight,
			Help: "Gateway requests admitted by the node-wide gate and not yet finished."}),
		gateRejected: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricGateRejected,
			Help: "Gateway requests answered 503 overloaded by the node-wide gate (max_concurrent_reads)."}),
		wasted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricStoreWasted,
			Help: "Store answers no caller used: nobody still waited and the cache did not keep it, or (cache off) an index whose claim read then missed its deadline."}, []string{"store"}),
	}
	for _, o := range []string{"store", "coalesced", "cache", "shed"} {
		m.reads.WithLabelValues(o) // every outcome at 0 from the start
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.reads, m.storeReqs, m.limit, m.inflight, m.queued, m.limitChanges, m.gateInflight, m.gateRejected, m.wasted,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricCacheBytes, Help: "Bytes held by the claim-check cache."},
			func() float64 { b, _ := c.stats(); return float64(b) })}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
