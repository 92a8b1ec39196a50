package poolcontroller

import (
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Metrics of the pool controller.
type Metrics struct {
	nodes             *nodeSeries
	enisCreated       prometheus.Counter
	ipsAssigned       prometheus.Counter
	ipsReleased       prometheus.Counter
	allocationLatency prometheus.Histogram
	poolHandoff       prometheus.Histogram
	writes            *prometheus.CounterVec
	eniCopies         prometheus.Counter
	writeFailures     *prometheus.CounterVec
	staticPlaced      prometheus.Counter
	staticFastMoves   prometheus.Counter
	consolidations    *prometheus.CounterVec
}

// NewMetrics registers the controller's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		nodes: &nodeSeries{nodes: map[string]*nodeValues{}},
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
		eniCopies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_ciliumnode_eni_copies_total", Help: "CiliumNode status writes made for status.eni.enis alone: the copy of a node's ENIs written (for an earlier enipam-agent, a NodeRouting CRD without spec.enis, or enipam-scheduler where a static address concerns the node) or cleared once nothing reads it (also counted in enipam_ciliumnode_writes_total).",
		}),
		writeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "enipam_ciliumnode_write_failures_total", Help: "CiliumNode writes the apiserver refused, by part (status, spec) and reason (conflict: the object changed under a write that named its version; other).",
		}, []string{"part", "reason"}),
		staticPlaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_static_ips_placed_total", Help: "Claimed static addresses assigned onto a node's ENI (moved from another ENI, or fresh from the subnet).",
		}),
		staticFastMoves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_static_ips_fast_moves_total", Help: "Claimed static addresses that left a node's pool on enipam-agent's report that no endpoint there holds them, before Cilium's agent answered the release handshake.",
		}),
		consolidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "enipam_consolidations_total", Help: "Secondary ENIs detached and deleted (kind eni) and partly used /28 prefixes drained and released (kind prefix) because their node no longer needed them.",
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.consolidations, m.nodes, m.enisCreated, m.ipsAssigned, m.ipsReleased, m.allocationLatency, m.poolHandoff, m.writes, m.eniCopies, m.writeFailures, m.staticPlaced, m.staticFastMoves} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeNode(node, policy string, available, used, waiting, headroom, needed, short int) {
	m.nodes.set(node, func(v *nodeValues) {
		v.policy = policy
		v.setIPs(stateAvailable, available)
		v.setIPs(stateUsed, used)
		v.setIPs(stateWaiting, waiting)
		v.setIPs(stateHeadroom, headroom)
		v.setIPs(stateNeeded, needed)
		v.setIPs(stateShort, short)
	})
}

func (m *Metrics) observeCapacity(node string, awaiting, maxIPs int) {
	m.nodes.set(node, func(v *nodeValues) {
		v.setIPs(stateAwaiting, awaiting)
		v.setIPs(stateMax, maxIPs)
	})
}

func (m *Metrics) forget(node string) { m.nodes.forget(node) }

// writeFailed counts a CiliumNode write the apiserver refused. The writes
// are merge patches that name no resourceVersion, so a conflict would
// mean one came to name it: the count is there to show it stays 0.
func (m *Metrics) writeFailed(part string, err error) {
	reason := "other"
	if apierrors.IsConflict(err) {
		reason = "conflict"
	}
	m.writeFailures.WithLabelValues(part, reason).Inc()
}

// The states of enipam_node_ips, in the order of nodeValues.ips.
const (
	stateAvailable = iota
	stateUsed
	stateWaiting
	stateHeadroom
	stateNeeded
	stateShort
	stateAwaiting
	stateMax
	numStates
)

var stateNames = [numStates]string{"available", "used", "waiting", "headroom", "needed", "short", "awaiting", "max"}

const (
	nodeIPsName    = "enipam_node_ips"
	nodeIPsHelp    = "IPs of a node's pool: available (may be handed out), used (by pods, as Cilium's agent reports), waiting (pods bound to the node without an address yet), headroom (free IPs kept beyond used and waiting), needed (missing for the pool's target), short (the part of needed the instance has room for: its usable ENIs' free slots and its free ENI slots; 0 on a node at capacity), awaiting (assigned, waiting for the agent's routes), max (the largest pool the node can reach)."
	nodePolicyName = "enipam_node_policy"
	nodePolicyHelp = "1 for each node, labelled with the ENIPolicy governing it (empty: none, the operator's defaults); join on node to sum other series per policy."
)

var (
	nodeIPsDesc    = prometheus.NewDesc(nodeIPsName, nodeIPsHelp, []string{"node", "state"}, nil)
	nodePolicyDesc = prometheus.NewDesc(nodePolicyName, nodePolicyHelp, []string{"node", "policy"}, nil)
)

// nodeSeries holds the per-node series (enipam_node_ips and
// enipam_node_policy) as a few integers per node and builds them at each
// scrape: a GaugeVec child per node and state (its label values, hash
// entry and metric) cost some 20 MiB at 5000 nodes. The operator's
// registry gathers them through GatherDirect (metricsreg), in a few
// allocations; Collect serves any other registry.
type nodeSeries struct {
	mu    sync.RWMutex
	nodes map[string]*nodeValues
}

// nodeValues are one node's series: a state is exported once set.
type nodeValues struct {
	policy string
	ips    [numStates]int32
	set    uint16
	// observed says whether observeNode ran (the policy series exists).
	observed bool
}

func (v *nodeValues) setIPs(state, n int) {
	v.ips[state] = int32(n)
	v.set |= 1 << state
}

func (s *nodeSeries) set(node string, f func(*nodeValues)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.nodes[node]
	if !ok {
		v = &nodeValues{}
		s.nodes[node] = v
	}
	f(v)
	if v.set&(1<<stateAvailable) != 0 {
		v.observed = true
	}
}

func (s *nodeSeries) forget(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, node)
}

// Describe implements prometheus.Collector.
func (s *nodeSeries) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodeIPsDesc
	ch <- nodePolicyDesc
}

// nodeRow is a node's series as a scrape found them.
type nodeRow struct {
	node string
	v    nodeValues
}

// rows copies the nodes' values, so that reconciles never wait for the
// scrape's consumer.
func (s *nodeSeries) rows() []nodeRow {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rows := make([]nodeRow, 0, len(s.nodes))
	for node, v := range s.nodes {
		rows = append(rows, nodeRow{node, *v})
	}
	return rows
}

// Collect implements prometheus.Collector.
func (s *nodeSeries) Collect(ch chan<- prometheus.Metric) {
	for _, r := range s.rows() {
		node, v := r.node, r.v
		for state := range numStates {
			if v.set&(1<<state) != 0 {
				ch <- prometheus.MustNewConstMetric(nodeIPsDesc, prometheus.GaugeValue, float64(v.ips[state]), node, stateNames[state])
			}
		}
		if v.observed {
			ch <- prometheus.MustNewConstMetric(nodePolicyDesc, prometheus.GaugeValue, 1, node, v.policy)
		}
	}
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

// Label names and state values shared by every scrape's label pairs (a
// gathered family is read only).
var (
	labelNode, labelState, labelPolicy = "node", "state", "policy"
	statePairs                         [numStates]*dto.LabelPair
	// statesByName are the states in the order of their names, as
	// Prometheus's registry sorts a node's series.
	statesByName [numStates]int
)

func init() {
	for state := range numStates {
		statePairs[state] = &dto.LabelPair{Name: &labelState, Value: &stateNames[state]}
		statesByName[state] = state
	}
	slices.SortFunc(statesByName[:], func(a, b int) int { return strings.Compare(stateNames[a], stateNames[b]) })
}

// GatherDirect implements metricsreg.Direct: the families Collect's
// metrics make once gathered, built in a few allocations (a slab of
// metrics and one of label pairs, one label pair per node and per
// policy, one gauge per value) instead of some 14 per series.
func (s *nodeSeries) GatherDirect() []*dto.MetricFamily {
	rows := s.rows()
	slices.SortFunc(rows, func(a, b nodeRow) int { return strings.Compare(a.node, b.node) })
	nIPs, nPolicy := 0, 0
	for i := range rows {
		nIPs += bits.OnesCount16(rows[i].v.set)
		if rows[i].v.observed {
			nPolicy++
		}
	}
	n := nIPs + nPolicy
	metrics := make([]dto.Metric, n)
	ptrs := make([]*dto.Metric, n)
	labels := make([]*dto.LabelPair, 2*n)
	nodePairs := make([]dto.LabelPair, len(rows))
	gauges := map[int32]*dto.Gauge{}
	gauge := func(v int32) *dto.Gauge {
		g, ok := gauges[v]
		if !ok {
			f := float64(v)
			g = &dto.Gauge{Value: &f}
			gauges[v] = g
		}
		return g
	}
	policyPairs := map[string]*dto.LabelPair{}
	k := 0
	add := func(node, second *dto.LabelPair, g *dto.Gauge) {
		m := &metrics[k]
		m.Label = labels[2*k : 2*k+2 : 2*k+2]
		m.Label[0], m.Label[1] = node, second
		m.Gauge = g
		ptrs[k] = m
		k++
	}
	for i := range rows {
		r := &rows[i]
		nodePairs[i] = dto.LabelPair{Name: &labelNode, Value: &r.node}
		for _, state := range statesByName {
			if r.v.set&(1<<state) != 0 {
				add(&nodePairs[i], statePairs[state], gauge(r.v.ips[state]))
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		if !r.v.observed {
			continue
		}
		p, ok := policyPairs[r.v.policy]
		if !ok {
			p = &dto.LabelPair{Name: &labelPolicy, Value: &r.v.policy}
			policyPairs[r.v.policy] = p
		}
		add(&nodePairs[i], p, gauge(1))
	}
	var fams []*dto.MetricFamily
	for _, f := range []struct {
		name, help string
		metrics    []*dto.Metric
	}{{nodeIPsName, nodeIPsHelp, ptrs[:nIPs]}, {nodePolicyName, nodePolicyHelp, ptrs[nIPs:]}} {
		if len(f.metrics) > 0 {
			fams = append(fams, &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: dto.MetricType_GAUGE.Enum(), Metric: f.metrics})
		}
	}
	return fams
}
