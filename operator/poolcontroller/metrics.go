package poolcontroller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the pool controller.
type Metrics struct {
	nodeIPs           *prometheus.GaugeVec
	enisCreated       prometheus.Counter
	ipsAssigned       prometheus.Counter
	ipsReleased       prometheus.Counter
	allocationLatency prometheus.Histogram
	poolHandoff       prometheus.Histogram
	writes            *prometheus.CounterVec
	nodePolicy        *prometheus.GaugeVec
	staticPlaced      prometheus.Counter
	staticFastMoves   prometheus.Counter

	mu sync.Mutex
	// policyOf is the policy last exported for each node.
	policyOf map[string]string
}

// NewMetrics registers the controller's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		nodeIPs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "enipam_node_ips",
			Help: "IPs of a node's pool: available (may be handed out), used (by pods, as Cilium's agent reports), waiting (pods bound to the node without an address yet), headroom (free IPs kept beyond used and waiting), needed (missing for the pool's target), short (the part of needed the instance has room for: its usable ENIs' free slots and its free ENI slots; 0 on a node at capacity), awaiting (assigned, waiting for the agent's routes), max (the largest pool the node can reach).",
		}, []string{"node", "state"}),
		enisCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_enis_created_total", Help: "ENIs created.",
		}),
		ipsAssigned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_ips_assigned_total", Help: "IPv4 addresses assigned to ENIs (prefixes count 16).",
		}),
		ipsReleased: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_ips_released_total", Help: "IPv4 addresses released through the handshake.",
		}),
		allocationLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "enipam_allocation_duration_seconds",
			Help:    "Time from a node's deficit being seen to its pool covering it (the addresses routed by the node's agent and in the pool).",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}),
		poolHandoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "enipam_pool_handoff_seconds",
			Help:    "Time from a new ENI being attached (EC2's describe) and routed (its node agent's report), whichever came last, to the pool listing its first addresses: the operator's own delay, no EC2 call left to make.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 180, 300},
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "enipam_ciliumnode_writes_total", Help: "CiliumNode writes by part (status, spec).",
		}, []string{"part"}),
		nodePolicy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "enipam_node_policy",
			Help: "1 for each node, labelled with the ENIPolicy governing it (empty: none, the operator's defaults); join on node to sum other series per policy.",
		}, []string{"node", "policy"}),
		staticPlaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_static_ips_placed_total", Help: "Claimed static addresses assigned onto a node's ENI (moved from another ENI, or fresh from the subnet).",
		}),
		staticFastMoves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_static_ips_fast_moves_total", Help: "Claimed static addresses that left a node's pool on enipam-agent's report that no endpoint there holds them, before Cilium's agent answered the release handshake.",
		}),
		policyOf: map[string]string{},
	}
	for _, c := range []prometheus.Collector{m.nodeIPs, m.enisCreated, m.ipsAssigned, m.ipsReleased, m.allocationLatency, m.poolHandoff, m.writes, m.nodePolicy, m.staticPlaced, m.staticFastMoves} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeNode(node, policy string, available, used, waiting, headroom, needed, short int) {
	m.mu.Lock()
	if was, ok := m.policyOf[node]; !ok || was != policy {
		if ok {
			m.nodePolicy.DeleteLabelValues(node, was)
		}
		m.policyOf[node] = policy
		m.nodePolicy.WithLabelValues(node, policy).Set(1)
	}
	m.mu.Unlock()
	m.nodeIPs.WithLabelValues(node, "available").Set(float64(available))
	m.nodeIPs.WithLabelValues(node, "used").Set(float64(used))
	m.nodeIPs.WithLabelValues(node, "waiting").Set(float64(waiting))
	m.nodeIPs.WithLabelValues(node, "headroom").Set(float64(headroom))
	m.nodeIPs.WithLabelValues(node, "needed").Set(float64(needed))
	m.nodeIPs.WithLabelValues(node, "short").Set(float64(short))
}

func (m *Metrics) observeCapacity(node string, awaiting, maxIPs int) {
	m.nodeIPs.WithLabelValues(node, "awaiting").Set(float64(awaiting))
	m.nodeIPs.WithLabelValues(node, "max").Set(float64(maxIPs))
}

func (m *Metrics) forget(node string) {
	m.nodeIPs.DeletePartialMatch(prometheus.Labels{"node": node})
	m.mu.Lock()
	delete(m.policyOf, node)
	m.mu.Unlock()
	m.nodePolicy.DeletePartialMatch(prometheus.Labels{"node": node})
}

var nodesDesc = prometheus.NewDesc("enipam_nodes",
	"Nodes by the outcome of their last reconcile: served, deficit (short of the target, being served), at_capacity, blocked (subnets, security groups, instance unknown), failing (EC2 errors, retried).",
	[]string{"state"}, nil)

// Describe implements prometheus.Collector.
func (r *Reconciler) Describe(ch chan<- *prometheus.Desc) { ch <- nodesDesc }

// Collect implements prometheus.Collector: nodes per state.
func (r *Reconciler) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{stateServed: 0, stateDeficit: 0, stateAtCapacity: 0, stateBlocked: 0, stateFailing: 0}
	r.mu.Lock()
	for _, m := range r.nodes {
		if m.state != "" {
			counts[m.state]++
		}
	}
	r.mu.Unlock()
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n), state)
	}
}
