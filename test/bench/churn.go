package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/enipam/enipam/test/agentsim"
)

// Churn is the churn scenario: pods arrive on Nodes nodes at Rate per
// second in all (Poisson per node) and leave after MeanLifetime on
// average, with one deployment of BurstPods scaled up a third of the way
// in and back down a third later; excess IPs are released through the
// handshake after ReleaseDelay.
type Churn struct {
	Nodes             int
	Rate              float64
	MeanLifetime      time.Duration
	Duration          time.Duration
	BurstPods         int
	PreAllocate       int
	MaxAboveWatermark int
	ReleaseDelay      time.Duration
}

// DefaultChurn is 100 nodes, 10 pods/s for 5 minutes (quick: 20 nodes,
// 2 pods/s for 90 s), pre-allocate 8 and max-above-watermark 4: under
// churn the watermark halves the Assign calls, and the idle target grows
// with it.
func DefaultChurn(quick bool) Churn {
	if quick {
		return Churn{Nodes: 20, Rate: 2, MeanLifetime: 30 * time.Second, Duration: 90 * time.Second, BurstPods: 40, PreAllocate: 8, MaxAboveWatermark: 4, ReleaseDelay: 30 * time.Second}
	}
	return Churn{Nodes: 100, Rate: 10, MeanLifetime: 60 * time.Second, Duration: 5 * time.Minute, BurstPods: 200, PreAllocate: 8, MaxAboveWatermark: 4, ReleaseDelay: time.Minute}
}

// Name is the scenario's report name.
func (Churn) Name() string { return "churn" }

// Run runs the scenario.
func (s Churn) Run(ctx context.Context, e *Env) (*Report, error) {
	rep := &Report{Scenario: s.Name(), Started: time.Now(), Params: map[string]any{
		"nodes": s.Nodes, "podsPerSecond": s.Rate, "meanPodLifetime": s.MeanLifetime.String(), "duration": s.Duration.String(),
		"burstPods": s.BurstPods, "preAllocate": s.PreAllocate, "maxAboveWatermark": s.MaxAboveWatermark,
		"excessIPReleaseDelay": s.ReleaseDelay.String(), "agentUpdateInterval": "15s", "instanceType": "m5.xlarge",
		"ec2": "ec2sim realistic",
	}}
	args := []string{"--vpc-id=" + fleetVPC, fmt.Sprintf("--pre-allocate=%d", s.PreAllocate),
		fmt.Sprintf("--max-above-watermark=%d", s.MaxAboveWatermark), "--release-excess-ips=true",
		"--excess-ip-release-delay=" + s.ReleaseDelay.String()}
	w, err := e.startWorld(ctx, s.Name(), fleetScenario(s.Nodes, "m5.xlarge", "", true), args,
		agentsim.Options{UpdateInterval: 15 * time.Second, QPS: 1000, Burst: 2000, SampleInterval: 5 * time.Second})
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
	if _, err := w.join(ctx, specs); err != nil {
		return nil, err
	}
	if err := w.agents.WaitReady(ctx, len(specs)); err != nil {
		return nil, err
	}
	time.Sleep(20 * time.Second) // the agents' endpoints reported, the pools settled
	if err := w.sim.Admin.ResetCounters(ctx); err != nil {
		return nil, err
	}
	startFigures := w.agents.Figures()
	e.say("churn: %d nodes ready; %.1f pods/s for %s", s.Nodes, s.Rate, s.Duration)

	runStart := time.Now()
	churn := agentsim.NewChurn(w.agents, agentsim.ChurnConfig{
		Seed: 7, ArrivalRate: s.Rate / float64(s.Nodes), MeanLifetime: s.MeanLifetime, Duration: s.Duration,
		Bursts:      []agentsim.Burst{{At: s.Duration / 3, Pods: s.BurstPods, Hold: s.Duration / 3, Name: "web"}},
		DeleteAtEnd: true,
	})
	churnRep, err := churn.Run(ctx)
	if err != nil {
		return nil, err
	}
	minutes := time.Since(runStart).Minutes()
	counters, err := w.sim.Admin.Counters(ctx)
	if err != nil {
		return nil, err
	}
	f := w.agents.Figures()

	allocations := f.Allocations - startFigures.Allocations
	waits := f.Waits.Count + f.Waits.Pending - startFigures.Waits.Count
	waitShare := 0.0
	if allocations > 0 {
		waitShare = float64(waits) / float64(allocations)
	}
	var idleSum, idleMax float64
	var samples int
	for _, smp := range f.IdleSamples {
		if smp.At.Before(runStart) {
			continue
		}
		idleSum += smp.IdlePerNode()
		idleMax = max(idleMax, smp.IdlePerNode())
		samples++
	}
	idleMean := 0.0
	if samples > 0 {
		idleMean = idleSum / float64(samples)
	}

	rep.add("pods started", churnRep.Started, "")
	rep.add("of them by the burst", churnRep.BurstPods, "")
	rep.add("peak pods", churnRep.PeakPods, "")
	rep.add("allocations", allocations, "")
	rep.add("allocations that waited", waits, "")
	rep.add("share of allocations that waited", 100*waitShare, "%")
	rep.add("wait p50", f.Waits.P50, "")
	rep.add("wait p99", f.Waits.P99, "")
	rep.add("wait max", f.Waits.Max, "")
	rep.add("idle IPs per node, mean over the run", idleMean, "")
	rep.add("idle IPs per node, highest sample", idleMax, "")
	rep.add("agent used-IP report lag p99", f.UsedLag.P99, "")
	for _, action := range slices.Sorted(maps.Keys(counters.Calls)) {
		rep.add("EC2 "+action+" per minute", float64(counters.Succeeded(action))/minutes, "")
	}
	var throttled int64
	for _, n := range counters.Throttled {
		throttled += n
	}
	rep.add("EC2 throttled", throttled, "calls")
	rep.add("violations", f.Violations.Total(), "")
	rep.add("handouts checked routed before handed (waiting)", fmt.Sprintf("%d (%d)", f.RoutedChecks, f.RoutedPending), "")
	var idleOverTime []string
	for _, smp := range f.IdleSamples {
		if !smp.At.Before(runStart) {
			idleOverTime = append(idleOverTime, fmt.Sprintf("%.0fs:%.1f", smp.At.Sub(runStart).Seconds(), smp.IdlePerNode()))
		}
	}
	rep.Params["idlePerNodeOverTime"] = strings.Join(idleOverTime, " ")

	rep.target("≤ 1% of allocations wait", "≤ 1%", fmt.Sprintf("%.2f%%", 100*waitShare), waitShare <= 0.01)
	limit := float64(s.PreAllocate + s.MaxAboveWatermark)
	rep.target("idle IPs per node on average ≤ pre-allocate + max-above-watermark", fmt.Sprintf("≤ %.0f", limit), fmt.Sprintf("%.2f", idleMean), idleMean <= limit)
	rep.target("zero violations", "0", fmt.Sprint(f.Violations.Total()), f.Violations.Total() == 0)
	pools, err := w.poolFindings(ctx)
	if err != nil {
		return nil, err
	}
	rep.addPoolFindings(pools)
	rep.Ran = Seconds(time.Since(rep.Started))
	return rep, nil
}
