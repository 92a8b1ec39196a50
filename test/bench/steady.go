package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/cluster"
)

// Steady is the steady scenario: Nodes idle nodes, each instance already
// holding a full pool (9 addresses on its primary ENI and a second ENI
// with 9), watched for Window: what the operator costs when nothing
// happens.
type Steady struct {
	Nodes  int
	Window time.Duration
}

// DefaultSteady is 5000 nodes for 3 minutes (quick: 1000 for 1 minute).
func DefaultSteady(quick bool) Steady {
	if quick {
		return Steady{Nodes: 1000, Window: time.Minute}
	}
	return Steady{Nodes: 5000, Window: 3 * time.Minute}
}

// Name is the scenario's report name.
func (Steady) Name() string { return "steady" }

// Run runs the scenario.
func (s Steady) Run(ctx context.Context, e *Env) (*Report, error) {
	const resync = time.Minute
	rep := &Report{Scenario: s.Name(), Started: time.Now(), Params: map[string]any{
		"nodes": s.Nodes, "window": s.Window.String(), "resyncInterval": resync.String(),
		"poolPerNode": 18, "enisPerNode": 2, "preAllocate": 8, "maxAboveWatermark": 8, "ec2": "ec2sim realistic",
	}}
	pprofAddr, err := cluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"--vpc-id=" + fleetVPC, "--pre-allocate=8", "--max-above-watermark=8", "--resync-interval=" + resync.String(),
		"--pprof-bind-address=" + pprofAddr}
	seeded := ", secondaryIPs: 9, enis: [{deviceIndex: 1, secondaryIPs: 9, deleteOnTermination: true}]"
	w, err := e.startWorld(ctx, s.Name(), fleetScenario(s.Nodes, "m5.large", seeded, true), args,
		agentsim.Options{UpdateInterval: 15 * time.Second, QPS: 1000, Burst: 2000, Writers: 32, SampleInterval: -1})
	if err != nil {
		return nil, err
	}
	defer w.stop()
	if err := w.waitSynced(ctx); err != nil {
		return nil, err
	}
	specs, err := w.existing(ctx)
	if err != nil {
		return nil, err
	}
	e.say("steady: %d nodes join with full pools", len(specs))
	t0 := time.Now()
	names, err := w.join(ctx, specs)
	if err != nil {
		return nil, err
	}
	for {
		served := 0
		for _, name := range names {
			if _, ok := w.agents.Agent(name).PoolReachedAt(18); ok {
				served++
			}
		}
		if served == len(names) {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			return nil, fmt.Errorf("only %d of %d nodes got their pools", served, len(names))
		}
		time.Sleep(time.Second)
	}
	if err := w.agents.WaitReady(ctx, len(names)); err != nil {
		return nil, err
	}
	settle := time.Since(t0)
	e.say("steady: every node served in %s; letting it settle", settle.Round(time.Second))
	time.Sleep(30 * time.Second)

	if err := w.sim.Admin.ResetCounters(ctx); err != nil {
		return nil, err
	}
	m0, err := w.metrics(ctx)
	if err != nil {
		return nil, err
	}
	u0, err := w.op.Usage()
	if err != nil {
		return nil, err
	}
	e.say("steady: watching for %s", s.Window)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(s.Window):
	}
	u1, err := w.op.Usage()
	if err != nil {
		return nil, err
	}
	m1, err := w.metrics(ctx)
	if err != nil {
		return nil, err
	}
	counters, err := w.sim.Admin.Counters(ctx)
	if err != nil {
		return nil, err
	}
	minutes := s.Window.Minutes()
	var describes, mutating int64
	for action := range counters.Calls {
		if strings.HasPrefix(action, "Describe") {
			describes += counters.Succeeded(action)
		} else {
			mutating += counters.Succeeded(action)
		}
	}
	writes := sum(m1, "enipam_ciliumnode_writes_total", nil) - sum(m0, "enipam_ciliumnode_writes_total", nil)
	rssMiB := float64(u1.RSSBytes) / (1 << 20)
	heapPath := filepath.Join(w.dir, "operator.heap.pprof")
	if err := fetch(ctx, "http://"+pprofAddr+"/debug/pprof/heap?gc=1", heapPath); err == nil {
		rep.Params["heapProfile"] = heapPath
	}

	rep.add("time until every node was served", settle, "")
	rep.add("operator RSS at the end", rssMiB, "MiB")
	rep.add("operator peak RSS", float64(u1.PeakRSSBytes)/(1<<20), "MiB")
	rep.add("operator Go heap in use", sum(m1, "go_memstats_heap_inuse_bytes", nil)/(1<<20), "MiB")
	rep.add("operator goroutines", sum(m1, "go_goroutines", nil), "")
	rep.add("operator CPU per minute", (u1.CPUSeconds-u0.CPUSeconds)/minutes, "s")
	rep.add("EC2 describe calls per minute", float64(describes)/minutes, "")
	rep.add("EC2 DescribeNetworkInterfaces per minute", float64(counters.Succeeded("DescribeNetworkInterfaces"))/minutes, "")
	rep.add("EC2 mutating calls in the window", mutating, "")
	rep.add("CiliumNode writes in the window", writes, "")
	rep.add("violations", w.agents.Figures().Violations.Total(), "")
	pools, err := w.poolFindings(ctx)
	if err != nil {
		return nil, err
	}
	rep.addPoolFindings(pools)

	// One resync describes the VPC, its subnets and groups, and pages of
	// 1000 instances and ENIs: a count set by the VPC's size and the
	// interval, never one call per node.
	perResync := 3 + (s.Nodes+999)/1000 + (2*s.Nodes+999)/1000
	bound := float64(perResync) * (minutes/resync.Minutes() + 1)
	rep.target("operator RSS ≤ 200 MiB", "≤ 200 MiB", fmt.Sprintf("%.0f MiB", rssMiB), rssMiB <= 200)
	rep.target("describe calls bounded by the resync interval", fmt.Sprintf("≤ %.0f in %s", bound, s.Window), fmt.Sprint(describes), float64(describes) <= bound)
	rep.target("no EC2 mutation while idle", "0", fmt.Sprint(mutating), mutating == 0)
	rep.Ran = Seconds(time.Since(rep.Started))
	return rep, nil
}
