package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/nodeagent/routing"
)

// Metrics are the agent's Prometheus series, registered on the registry
// given to New (never a global one).
type Metrics struct {
	rulesManaged     prometheus.Gauge
	routesManaged    prometheus.Gauge
	enisManaged      prometheus.Gauge
	linksMissing     prometheus.Gauge
	ready            prometheus.Gauge
	convergeDuration *prometheus.HistogramVec
	converges        *prometheus.CounterVec
	errors           *prometheus.CounterVec
	kernelOps        *prometheus.CounterVec
	retainedRules    prometheus.Gauge
	statusWrites     *prometheus.CounterVec
}

// Error kinds of enipam_agent_errors_total.
const (
	errKindKernelRead  = "kernel_read"
	errKindKernelWrite = "kernel_write"
	errKindCiliumNode  = "ciliumnode"
)

func newMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns = "enipam_agent"
	m := &Metrics{
		rulesManaged:  prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "rules_managed", Help: "Policy rules enipam keeps on the node (egress and ingress)."}),
		routesManaged: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "routes_managed", Help: "Routes enipam keeps in the ENI route tables."}),
		enisManaged:   prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "enis_managed", Help: "Managed ENIs whose link is present and configured."}),
		linksMissing:  prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "links_missing", Help: "Managed ENIs whose link the kernel does not show."}),
		ready:         prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "ready", Help: "1 when the last converge succeeded with every link present."}),
		convergeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "converge_duration_seconds", Help: "Time of one converge (read, diff, apply), by what triggered it.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"trigger"}),
		converges:     prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "converges_total", Help: "Converges, by trigger and result (ok, error)."}, []string{"trigger", "result"}),
		errors:        prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "errors_total", Help: "Errors, by kind: kernel_read (a dump failed), kernel_write (one change failed), ciliumnode (an unusable part of the CiliumNode)."}, []string{"kind"}),
		kernelOps:     prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "kernel_operations_total", Help: "Netlink requests and sysctl accesses, by operation."}, []string{"op"}),
		retainedRules: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "rules_retained", Help: "Rules of addresses in use whose ENI cannot be routed right now (listed nowhere any more, link missing), left as they are."}),
		statusWrites:  prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "status_writes_total", Help: "Writes of the NodeRouting status, by result (ok, error)."}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.rulesManaged, m.routesManaged, m.enisManaged, m.linksMissing, m.ready, m.convergeDuration, m.converges, m.errors, m.kernelOps, m.retainedRules, m.statusWrites} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(trigger string, seconds float64, res routing.Result, err error) {
	m.convergeDuration.WithLabelValues(trigger).Observe(seconds)
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.converges.WithLabelValues(trigger, result).Inc()
	for op, n := range res.Ops {
		m.kernelOps.WithLabelValues(op).Add(float64(n))
	}
	m.linksMissing.Set(float64(len(res.Missing)))
	if !res.Read {
		return // a read failed: nothing known about the node
	}
	m.rulesManaged.Set(float64(res.Rules))
	m.routesManaged.Set(float64(res.Routes))
	m.enisManaged.Set(float64(res.ENIs))
	m.retainedRules.Set(float64(res.Retained))
}
