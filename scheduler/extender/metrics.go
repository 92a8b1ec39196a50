package extender

import "github.com/prometheus/client_golang/prometheus"

// Counter is optionally implemented by State to export its sizes.
type Counter interface {
	// Counts returns the pods without an address followed and the holds
	// kept.
	Counts() (pods, holds int)
}

// metrics are the extender's Prometheus series, on the registry given to
// New (never a global one).
type metrics struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	refusals      *prometheus.CounterVec
	settleWaits   prometheus.Counter
	settleSeconds prometheus.Histogram
	staticBinds   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, state State) (*metrics, error) {
	const ns = "enipam_scheduler"
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "Extender calls, by verb and result (ok, error, bad_request)."}, []string{"verb", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "request_duration_seconds",
			Help: "Time to answer an extender call, by verb.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"verb"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "node_refusals_total",
			Help: "Nodes refused to a pod by filter, by reason (no_ciliumnode, no_capacity, no_ip, no_zone, no_slot, static_moving, static_invalid)."}, []string{"reason"}),
		settleWaits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "settle_waits_total",
			Help: "Filter calls that waited for the scheduler's latest placements to be seen before refusing a node."}),
		settleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "settle_wait_seconds",
			Help: "Time filter calls waited for placements to be seen.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 7)}),
		staticBinds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "static_bind_wait_seconds",
			Help:    "Time bind waited for a static-IP pod's address to be placed on its node, by result (ok, error).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30}}, []string{"result"}),
	}
	cs := []prometheus.Collector{m.requests, m.duration, m.refusals, m.settleWaits, m.settleSeconds, m.staticBinds}
	if c, ok := state.(Counter); ok {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "pods_not_started",
				Help: "Pods without an address yet that the scheduler follows (bound, nominated or pending)."},
				func() float64 { p, _ := c.Counts(); return float64(p) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "holds",
				Help: "Pods passed by filter whose placement has not been seen yet."},
				func() float64 { _, h := c.Counts(); return float64(h) }),
		)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
