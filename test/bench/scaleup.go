package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/enipam/enipam/test/agentsim"
)

// ScaleUp is the scale-up scenario: Nodes nodes join at once under EC2's
// default throttling and realistic latencies; the figures say how fast
// every pool reaches pre-allocate and what it cost.
type ScaleUp struct {
	Nodes int
	// NewENI puts pod IPs off the primary ENI (first interface index 1),
	// so each node needs a new ENI: Create + Attach + Modify, the case
	// Cilium's operator is measured on. Otherwise the primary ENI has room
	// and each node needs one Assign.
	NewENI       bool
	InstanceType string
	PreAllocate  int
}

// Name is the scenario's report name.
func (s ScaleUp) Name() string {
	if s.NewENI {
		return "scale-up-new-eni"
	}
	return "scale-up-primary"
}

// Run runs the scenario.
func (s ScaleUp) Run(ctx context.Context, e *Env) (*Report, error) {
	rep := &Report{Scenario: s.Name(), Started: time.Now(), Params: map[string]any{
		"nodes": s.Nodes, "newENI": s.NewENI, "instanceType": s.InstanceType, "preAllocate": s.PreAllocate,
		"ec2":                 "ec2sim realistic: EC2 default buckets, mutating calls 150-400 ms, describes 50-150 ms, attach 2-5 s",
		"agentUpdateInterval": "15s",
	}}
	args := []string{fmt.Sprintf("--vpc-id=%s", fleetVPC), fmt.Sprintf("--pre-allocate=%d", s.PreAllocate)}
	if s.NewENI {
		args = append(args, "--first-interface-index=1")
	}
	w, err := e.startWorld(ctx, s.Name(), fleetScenario(0, s.InstanceType, "", true), args,
		agentsim.Options{UpdateInterval: 15 * time.Second, QPS: 1000, Burst: 2000, Writers: 32})
	if err != nil {
		return nil, err
	}
	defer w.stop()
	if err := w.waitSynced(ctx); err != nil {
		return nil, err
	}
	before, err := w.op.Usage()
	if err != nil {
		return nil, err
	}

	e.say("%s: %d instances launch and join as nodes", s.Name(), s.Nodes)
	t0 := time.Now()
	specs, err := w.launch(ctx, s.Nodes, s.InstanceType)
	if err != nil {
		return nil, err
	}
	names, err := w.join(ctx, specs)
	if err != nil {
		return nil, err
	}
	joined := time.Since(t0)
	reached := map[string]time.Duration{}
	deadline := time.Now().Add(time.Duration(s.Nodes)*time.Second + 5*time.Minute)
	for len(reached) < len(names) {
		for _, name := range names {
			if _, ok := reached[name]; ok {
				continue
			}
			if at, ok := w.agents.Agent(name).PoolReachedAt(s.PreAllocate); ok {
				reached[name] = at.Sub(t0)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d nodes reached pre-allocate before the deadline", len(reached), len(names))
		}
		if len(reached) < len(names) {
			time.Sleep(200 * time.Millisecond)
		}
	}
	e.say("%s: every pool reached %d IPs", s.Name(), s.PreAllocate)
	// Let the agents report their endpoints and the operator settle.
	if err := w.agents.WaitReady(ctx, len(names)); err != nil {
		return nil, err
	}
	time.Sleep(20 * time.Second)

	counters, err := w.sim.Admin.Counters(ctx)
	if err != nil {
		return nil, err
	}
	after, err := w.op.Usage()
	if err != nil {
		return nil, err
	}
	metrics, err := w.metrics(ctx)
	if err != nil {
		return nil, err
	}
	figures := w.agents.Figures()

	times := make([]time.Duration, 0, len(reached))
	for _, d := range reached {
		times = append(times, d)
	}
	slices.Sort(times)
	n := float64(s.Nodes)
	maxTime := times[len(times)-1]
	needed := map[string]int{"AssignPrivateIpAddresses": s.Nodes}
	if s.NewENI {
		needed = map[string]int{"CreateNetworkInterface": s.Nodes, "AttachNetworkInterface": s.Nodes, "ModifyNetworkInterfaceAttribute": s.Nodes}
	}
	bound, boundBy := LowerBound(needed)

	rep.add("instances launched and nodes created in", joined, "")
	rep.add("time to pre-allocate p50", percentile(times, 0.50), "")
	rep.add("time to pre-allocate p99", percentile(times, 0.99), "")
	rep.add("time to pre-allocate max", maxTime, "")
	rep.add("bucket lower bound", bound, "")
	rep.add("bucket lower bound set by", boundBy, "")
	ratio := 0.0
	if bound > 0 {
		ratio = maxTime.Seconds() / bound.Seconds()
	}
	rep.add("measured / lower bound", ratio, "x")
	var mutating, describes, throttled int64
	for _, action := range slices.Sorted(maps.Keys(counters.Calls)) {
		ok := counters.Succeeded(action)
		rep.add("EC2 "+action, ok, "calls")
		if len(action) > 8 && action[:8] == "Describe" {
			describes += ok
		} else {
			mutating += ok
		}
		throttled += counters.Throttled[action]
	}
	rep.add("EC2 mutating calls per node", float64(mutating)/n, "")
	rep.add("EC2 describe calls", describes, "")
	rep.add("EC2 throttled (refused by EC2's buckets)", throttled, "calls")
	rep.add("operator throttled retries", sum(metrics, "enipam_ec2_api_throttled_total", nil), "")
	writes := sum(metrics, "enipam_ciliumnode_writes_total", nil)
	rep.add("operator CiliumNode writes per node", writes/n, "")
	rep.add("operator CPU", after.CPUSeconds-before.CPUSeconds, "s")
	rep.add("operator peak RSS", float64(after.PeakRSSBytes)/(1<<20), "MiB")
	rep.add("agent status writes per node", float64(figures.Writes)/n, "")
	rep.add("violations", figures.Violations.Total(), "")
	rep.add("handouts checked routed before handed (waiting)", fmt.Sprintf("%d (%d)", figures.RoutedChecks, figures.RoutedPending), "")
	statusErrors, err := w.statusErrors(ctx)
	if err != nil {
		return nil, err
	}
	rep.add("nodes with an operator-status error at the end", statusErrors, "")

	if bound > 0 {
		rep.target("time to pre-allocate ≤ 1.3 × bucket lower bound", "≤ 1.30x", fmt.Sprintf("%.2fx", ratio), ratio <= 1.3)
	}
	if !s.NewENI {
		perNode := float64(counters.Succeeded("AssignPrivateIpAddresses")) / n
		rep.target("one mutating call per node whose primary ENI has room", "1.00", fmt.Sprintf("%.2f", float64(mutating)/n), mutating == int64(s.Nodes) && perNode == 1)
	}
	rep.target("no throttling surfaced as a node error", "0", fmt.Sprint(statusErrors), statusErrors == 0)
	rep.target("zero violations", "0", fmt.Sprint(figures.Violations.Total()), figures.Violations.Total() == 0)
	pools, err := w.poolFindings(ctx)
	if err != nil {
		return nil, err
	}
	rep.addPoolFindings(pools)
	rep.Ran = Seconds(time.Since(rep.Started))
	return rep, nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
