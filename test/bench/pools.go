package bench

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
)

// Pools compares pool policies on one trace: the same pods (TraceSpec)
// created at the same moments, bound by the real kube-scheduler to Nodes
// m5.xlarge nodes, each given its CNI call CNIDelay after it is bound by
// a simulated kubelet, against simulated cilium-agents reporting their
// used addresses every 15 s (Cilium's default ipam.ciliumNodeUpdateRate),
// under each configuration in turn, each in a world of its own.
type Pools struct {
	Nodes    int
	Trace    TraceSpec
	CNIDelay time.Duration
	Configs  []PoolConfig
	// After is how long the measure goes on after the burst ends (the
	// trace's Duration covers it): the after-burst figures (poolsafter.go).
	After time.Duration
}

// PoolConfig is one policy compared: the operator's flags.
type PoolConfig struct {
	Name, About string
	Args        []string
}

// The instance type of the comparison and what it holds.
const (
	poolsInstanceType = "m5.xlarge"
	// poolsMaxPods is the kubelet's max-pods for m5.xlarge as EKS sets
	// it: ENIs × (IPs per ENI − 1) + 2 = 4 × 14 + 2.
	poolsMaxPods = 58
	// poolsPreAllocate is the pre-allocate of every configuration but the
	// VPC CNI's.
	poolsPreAllocate = 8
)

// PoolConfigs are the policies the README compares: the defaults of
// Cilium's operator and of the AWS VPC CNI, played by enipam-operator with
// their knobs and no pod watch (neither watches pods), and enipam's own,
// its defaults (fixed pre-allocate 8) and the adaptive headroom (capped
// at 8), both releasing after releaseDelay, the adaptive one also with
// prefix delegation.
func PoolConfigs(releaseDelay time.Duration) []PoolConfig {
	release := "--excess-ip-release-delay=" + releaseDelay.String()
	return []PoolConfig{
		{Name: "cilium", About: "Cilium's operator defaults: pre-allocate 8, no release",
			Args: []string{"--pre-allocate=8", "--max-above-watermark=0", "--release-excess-ips=false", "--pod-demand=false"}},
		{Name: "vpc-cni", About: "the VPC CNI's WARM_ENI_TARGET=1: a spare ENI's 14 addresses, taken a whole ENI at a time, the excess beyond two ENIs' worth released after 30 s",
			Args: []string{"--pre-allocate=14", "--max-above-watermark=13", "--release-excess-ips=true", "--excess-ip-release-delay=30s", "--pod-demand=false"}},
		{Name: "enipam-fixed", About: "enipam's defaults (pod watch, pre-allocate 8), release after " + releaseDelay.String(),
			Args: []string{"--pre-allocate=8", "--max-above-watermark=0", "--release-excess-ips=true", release}},
		{Name: "enipam-adaptive", About: "enipam, pod watch, adaptive headroom capped at pre-allocate 8, release after " + releaseDelay.String() + ", consolidation (its default delay, 1 minute)",
			Args: []string{"--headroom=Adaptive", "--pre-allocate=8", "--max-above-watermark=0", "--release-excess-ips=true", release}},
		{Name: "enipam-adaptive-prefix", About: "enipam adaptive as above, with prefix delegation (/28s)",
			Args: []string{"--headroom=Adaptive", "--pre-allocate=8", "--max-above-watermark=0", "--release-excess-ips=true", release, "--prefix-delegation=true"}},
	}
}

// enipamReleaseDelay is the excess-ip-release-delay of enipam's two
// configurations: an address a node no longer needs goes back to the
// subnet after 10 s and Cilium's handshake (up to its 15 s update
// interval), where Cilium's default keeps it 3 minutes.
const enipamReleaseDelay = 10 * time.Second

// DefaultPools is 100 nodes, 10 pods/s with a mean lifetime of a
// minute, measured after a warm-up of 2 minutes, a burst of 300 pods
// 100 s into the measure held for 100 s, the measure going on 5 minutes
// after it, CNI calls 1 s after binding (quick: 20 nodes, 2 pods/s, a
// burst of 60 40 s in held for 40 s, 2 minutes after it).
func DefaultPools(quick bool) Pools {
	p := Pools{Nodes: 100, CNIDelay: time.Second, Configs: PoolConfigs(enipamReleaseDelay), After: 5 * time.Minute, Trace: TraceSpec{
		Seed: 11, Rate: 10, MeanLifetime: time.Minute, Warmup: 2 * time.Minute,
		BurstPods: 300, BurstAt: 100 * time.Second, BurstHold: 100 * time.Second,
	}}
	if quick {
		p.Nodes, p.After = 20, 2*time.Minute
		p.Trace = TraceSpec{Seed: 11, Rate: 2, MeanLifetime: time.Minute, Warmup: time.Minute,
			BurstPods: 60, BurstAt: 40 * time.Second, BurstHold: 40 * time.Second}
	}
	p.Trace.Duration = p.Trace.BurstAt + p.Trace.BurstHold + p.After
	return p
}

// Name is the scenario's report name.
func (Pools) Name() string { return "pools" }

// allocationHistogram is the operator's time from a deficit seen to the
// pool covering it.
const allocationHistogram = "enipam_allocation_duration_seconds"

// poolFigures is what one configuration did on the trace.
type poolFigures struct {
	config                      PoolConfig
	created, started, failedOps int
	idleMean, idleP99           float64
	takenPerPod                 float64
	waits, waitingAtEnd         int
	waitP50, waitP99, waitMax   time.Duration
	perMinute, busiestMinute    map[string]float64
	throttled                   int64
	violations, poolBreaches    int
	routedChecks, leakedENIs    int
	statusErrors                int
	// allocation: the operator's deficit-to-pool times (its histogram's
	// mean, and the bucket bounds below which half and 99% fell).
	allocMean, allocP50, allocP99 float64
	allocations                   float64
	headroom, operatorFree        float64
	around                        afterFigures
}

// Run runs every configuration on the trace and compares them.
func (s Pools) Run(ctx context.Context, e *Env) (*Report, error) {
	trace := NewTrace(s.Trace)
	burst := 0
	for _, p := range trace.Pods {
		if p.Burst {
			burst++
		}
	}
	rep := &Report{Scenario: s.Name(), Started: time.Now(), Params: map[string]any{
		"nodes": s.Nodes, "instanceType": poolsInstanceType, "maxPods": poolsMaxPods, "podsPerSecond": s.Trace.Rate,
		"meanPodLifetime": s.Trace.MeanLifetime.String(), "warmup": s.Trace.Warmup.String(), "measured": s.Trace.Duration.String(), "seed": s.Trace.Seed,
		"tracePods": len(trace.Pods), "burstPods": burst, "burstAt": s.Trace.BurstAt.String(), "burstHold": s.Trace.BurstHold.String(),
		"cniDelay": s.CNIDelay.String(), "agentUpdateInterval": "15s", "scheduler": "kube-scheduler 1.37.1, default profile",
		"ec2": "ec2sim realistic",
	}}
	var all []poolFigures
	for _, cfg := range s.Configs {
		f, err := s.runOne(ctx, e, cfg, trace)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Name, err)
		}
		all = append(all, f)
		rep.Params["config "+cfg.Name] = cfg.About + " (" + strings.Join(cfg.Args, " ") + ")"
		s.addFigures(rep, f)
		s.addAfterFigures(rep, cfg.Name, f.around)
	}
	rep.Table = poolsTable(all)
	s.addTargets(rep, all)
	by := map[string]poolFigures{}
	for _, f := range all {
		by[f.config.Name] = f
	}
	s.addAfterTargets(rep, by)
	rep.Ran = Seconds(time.Since(rep.Started))
	return rep, nil
}

// runOne plays the trace under one configuration.
func (s Pools) runOne(ctx context.Context, e *Env, cfg PoolConfig, trace Trace) (poolFigures, error) {
	f := poolFigures{config: cfg}
	name := s.Name() + "-" + cfg.Name
	args := append([]string{"--vpc-id=" + fleetVPC}, cfg.Args...)
	agentLog, err := os.Create(filepath.Join(e.LogDir, name+"-agents.log"))
	if err != nil {
		return f, err
	}
	defer agentLog.Close()
	w, err := e.startWorld(ctx, name, fleetScenario(s.Nodes, poolsInstanceType, "", true), args,
		agentsim.Options{UpdateInterval: 15 * time.Second, QPS: 1000, Burst: 2000, SampleInterval: -1,
			Logger: slog.New(slog.NewTextHandler(agentLog, nil))})
	if err != nil {
		return f, err
	}
	defer w.stop()
	if err := w.waitSynced(ctx); err != nil {
		return f, err
	}
	specs, err := w.existing(ctx)
	if err != nil {
		return f, err
	}
	names, err := w.join(ctx, specs)
	if err != nil {
		return f, err
	}
	if err := w.agents.WaitReady(ctx, len(specs)); err != nil {
		return f, err
	}
	kubelet, err := w.startPlainScheduling(ctx, names, poolsMaxPods, s.CNIDelay)
	if err != nil {
		return f, err
	}
	const ns = "trace"
	if err := w.cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return f, err
	}
	time.Sleep(20 * time.Second) // the agents' endpoints reported, the pools settled
	e.say("%s: %d nodes ready; playing %d pods over %s, measuring after %s", name, len(names), len(trace.Pods), s.Trace.Total(), s.Trace.Warmup)
	beforeTrace := w.agents.Figures() // invariants count over the whole trace
	played := make(chan *traceRun, 1)
	go func() { played <- trace.play(ctx, w.cluster.Client, ns, s.Trace.Total()) }()
	select {
	case <-ctx.Done():
		<-played
		return f, ctx.Err()
	case <-time.After(s.Trace.Warmup):
	}
	if err := w.sim.Admin.ResetCounters(ctx); err != nil {
		<-played
		return f, err
	}
	waitsBefore := len(w.agents.Ledger().WaitDurations())
	var allocBefore histogram
	if m, err := w.metrics(ctx); err == nil {
		allocBefore = readHistogram(m, allocationHistogram)
	}
	startedBefore := len(kubelet.BindToIP())

	sctx, stopSampling := context.WithCancel(ctx)
	samples := make(chan *poolSampler, 1)
	go func() { samples <- w.samplePools(sctx) }()
	run := <-played
	stopSampling()
	smp := <-samples
	if ctx.Err() != nil {
		return f, ctx.Err()
	}
	figures := w.agents.Figures()
	waits := w.agents.Ledger().WaitDurations()[waitsBefore:]
	slices.Sort(waits)
	f.created, f.failedOps = int(run.created.Load()), int(run.failed.Load())
	f.started = len(kubelet.BindToIP()) - startedBefore
	f.waits, f.waitingAtEnd = len(waits), figures.Waits.Pending
	f.waitP50, f.waitP99 = agentsim.Percentile(waits, 50), agentsim.Percentile(waits, 99)
	if len(waits) > 0 {
		f.waitMax = waits[len(waits)-1]
	}
	f.idleMean, f.idleP99, f.takenPerPod = smp.summary()
	f.perMinute, f.busiestMinute = smp.callRates(s.Trace.Duration)
	f.throttled = smp.throttled
	f.headroom, f.operatorFree = mean(smp.headroom), mean(smp.free)
	if m, err := w.metrics(ctx); err == nil {
		h := readHistogram(m, allocationHistogram).since(allocBefore)
		f.allocations, f.allocMean, f.allocP50, f.allocP99 = h.count, h.mean(), h.bound(0.5), h.bound(0.99)
	}
	f.around.before, f.around.peak, f.around.after = smp.aroundBurst(s.Trace, s.After)
	f.around.freeBound = poolsPreAllocate + 16
	if f.around.free, err = w.freeAtRest(ctx, f.around.freeBound); err != nil {
		return f, err
	}
	for _, node := range f.around.free.over {
		e.say("%s: above %d free at the end: %s", name, f.around.freeBound, node)
	}
	f.violations = figures.Violations.Total() - beforeTrace.Violations.Total()
	f.routedChecks = figures.RoutedChecks - beforeTrace.RoutedChecks

	// The pods left go; then the pools and ENIs are held to EC2's state.
	if err := w.cluster.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		return f, err
	}
	pools, err := w.poolFindings(ctx)
	if err != nil {
		return f, err
	}
	f.poolBreaches = pools.Total()
	if f.leakedENIs, err = w.settledLeakedENIs(ctx, deleteSettle); err != nil {
		return f, err
	}
	statusErrs, err := w.statusErrorMessages(ctx)
	if err != nil {
		return f, err
	}
	f.statusErrors = len(statusErrs)
	for _, node := range slices.Sorted(maps.Keys(statusErrs)) {
		e.say("%s: %s: operator-status error at the end: %s", name, node, statusErrs[node])
	}
	e.say("%s: idle per node %.2f (p99 %.0f), %d waits, %.2f addresses per running pod (before the burst %.2f, peak %.2f, %s after %.2f), free per node at the end max %d (%d at rest)",
		name, f.idleMean, f.idleP99, f.waits, f.takenPerPod, f.around.before, f.around.peak, s.After, f.around.after, f.around.free.freeMax, f.around.free.restMax)
	return f, nil
}

// deleteSettle bounds the wait for ENIs caught between their detach and
// their delete at the end of a run: consolidation detaches an emptied ENI
// and deletes it once EC2 says it is detached (seconds), so one seen
// unattached at an instant may be on its way out. Unattached after the
// bound, it is leaked.
const deleteSettle = 30 * time.Second

// settledLeakedENIs is leakedENIs of EC2's state once it has none, or
// after bound: how many of the cluster's ENIs are attached to no
// instance then.
func (w *world) settledLeakedENIs(ctx context.Context, bound time.Duration) (int, error) {
	deadline := time.Now().Add(bound)
	for {
		dump, err := w.sim.Admin.Dump(ctx)
		if err != nil {
			return 0, err
		}
		n := leakedENIs(dump)
		if n == 0 || time.Now().After(deadline) {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// leakedENIs counts the bench cluster's ENIs attached to no instance.
func leakedENIs(d ec2sim.Dump) int {
	n := 0
	for _, e := range d.NetworkInterfaces {
		if e.Attachment == nil && slices.ContainsFunc(e.Tags, func(t ec2sim.Tag) bool { return t.Key == "enipam.io/cluster" }) {
			n++
		}
	}
	return n
}

// addFigures reports one configuration's figures, named after it.
func (s Pools) addFigures(rep *Report, f poolFigures) {
	p := f.config.Name + ": "
	rep.add(p+"pods created over the trace (started while measured)", fmt.Sprintf("%d (%d)", f.created, f.started), "")
	rep.add(p+"idle addresses per node, mean", f.idleMean, "")
	rep.add(p+"idle addresses per node, p99", f.idleP99, "")
	rep.add(p+"headroom per node the operator kept, mean", f.headroom, "")
	rep.add(p+"free addresses per node as the operator saw them (Cilium's agent reports used ones late), mean", f.operatorFree, "")
	rep.add(p+"addresses taken from the subnets per running pod", f.takenPerPod, "")
	rep.add(p+"pods that waited for an IP (still waiting at the end)", fmt.Sprintf("%d (%d)", f.waits, f.waitingAtEnd), "")
	rep.add(p+"wait p50", f.waitP50, "")
	rep.add(p+"wait p99", f.waitP99, "")
	rep.add(p+"wait max", f.waitMax, "")
	for _, action := range slices.Sorted(maps.Keys(f.perMinute)) {
		rep.add(p+"EC2 "+action+" per minute (busiest minute)", fmt.Sprintf("%.1f (%.0f)", f.perMinute[action], f.busiestMinute[action]), "")
	}
	rep.add(p+"EC2 throttled", f.throttled, "calls")
	rep.add(p+"operator allocations, mean time from deficit to pool (p50, p99 at most)",
		fmt.Sprintf("%.0f, %.2f s (%.2f s, %.2f s)", f.allocations, f.allocMean, f.allocP50, f.allocP99), "")
	rep.add(p+"violations (handouts checked routed)", fmt.Sprintf("%d (%d)", f.violations, f.routedChecks), "")
	rep.add(p+"pools off EC2's state at the end", f.poolBreaches, "")
	rep.add(p+"unattached ENIs of the cluster at the end (deletes in flight given up to "+deleteSettle.String()+")", f.leakedENIs, "")
	rep.add(p+"nodes with an operator-status error at the end", f.statusErrors, "")
	if f.failedOps > 0 {
		rep.add(p+"trace operations that failed", f.failedOps, "")
	}
}

// addTargets holds the adaptive headroom to the goals and every
// configuration to the invariants.
func (s Pools) addTargets(rep *Report, all []poolFigures) {
	by := map[string]poolFigures{}
	for _, f := range all {
		by[f.config.Name] = f
		total := f.violations + f.poolBreaches + f.leakedENIs
		rep.target(f.config.Name+": invariants hold", "0", fmt.Sprint(total), total == 0)
	}
	a, ok := by["enipam-adaptive"]
	if !ok {
		return
	}
	rep.target("enipam-adaptive: no pod waits for an IP", "0", fmt.Sprint(a.waits+a.waitingAtEnd), a.waits+a.waitingAtEnd == 0)
	if c, ok := by["cilium"]; ok {
		rep.target("enipam-adaptive: at most half the idle addresses per node of Cilium's defaults",
			fmt.Sprintf("≤ %.2f", c.idleMean/2), fmt.Sprintf("%.2f", a.idleMean), a.idleMean <= c.idleMean/2)
	}
	within, worst := true, ""
	for action, rate := range a.perMinute {
		limit := 60 * ec2sim.DefaultBucket(action, false).RefillPerSecond
		if rate > limit {
			within = false
			worst = fmt.Sprintf("%s %.0f/min > %.0f", action, rate, limit)
		}
	}
	rep.target("enipam-adaptive: EC2 calls per minute within each bucket's refill", "every action", worst, within)
	rep.target("enipam-adaptive: no throttle surfaced", "0", fmt.Sprint(a.throttled+int64(a.statusErrors)), a.throttled+int64(a.statusErrors) == 0)
}

// poolsTable is the comparison, one row per configuration.
func poolsTable(all []poolFigures) *Table {
	t := &Table{Header: []string{"configuration", "idle/node mean", "idle/node p99", "addresses/running pod", "addresses/running pod before burst, at peak, after", "free/node at the end, max (at rest)", "pods waited", "wait p50", "wait p99", "EC2 mutating calls/min", "throttled"}}
	for _, f := range all {
		mutating := 0.0
		for action, r := range f.perMinute {
			if !strings.HasPrefix(action, "Describe") {
				mutating += r
			}
		}
		t.Rows = append(t.Rows, []string{
			f.config.Name, fmt.Sprintf("%.2f", f.idleMean), fmt.Sprintf("%.0f", f.idleP99), fmt.Sprintf("%.2f", f.takenPerPod),
			fmt.Sprintf("%.2f, %.2f, %.2f", f.around.before, f.around.peak, f.around.after), fmt.Sprintf("%d (%d)", f.around.free.freeMax, f.around.free.restMax),
			fmt.Sprint(f.waits + f.waitingAtEnd), seconds(f.waitP50), seconds(f.waitP99), fmt.Sprintf("%.1f", mutating), fmt.Sprint(f.throttled),
		})
	}
	return t
}

func seconds(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
