package bench

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/cluster"
)

// Steady is the steady scenario: Nodes idle nodes, each instance already
// holding a full pool (9 addresses on its primary ENI and a second ENI
// with 9), with RunningPods pods per node that have their address and
// WaitingPods bound but waiting for one (no kubelet plays them), watched
// for Window: what the operator costs when nothing happens; then profiled
// for two minutes more (CPU and allocations, see profile). Then the
// operator is restarted twice on the same cluster, without its pod watch
// and with it, each measured after the same settling: what the watch
// adds to its memory.
type Steady struct {
	Nodes                    int
	Window                   time.Duration
	RunningPods, WaitingPods int
	// Large names the run steady-large, the second size `make bench`
	// measures.
	Large bool
	// OperatorArgs are added to the operator's arguments.
	OperatorArgs []string
	// JoinArgs, if any, are added to the operator's arguments while the
	// nodes join only; once every node is served the operator is
	// restarted without them on the cluster it served (as at an
	// upgrade), serves every node again, and the window is measured on
	// that process.
	JoinArgs []string
	// NoRestarts skips the two restarts after the window (the pod
	// watch's cost), for a repeat of the window's figures.
	NoRestarts bool
}

// DefaultSteady is 5000 nodes for 3 minutes (quick: 1000 for 1 minute),
// with 5 running pods and 1 waiting pod per node.
func DefaultSteady(quick bool) Steady {
	if quick {
		return Steady{Nodes: 1000, Window: time.Minute, RunningPods: 5, WaitingPods: 1}
	}
	return Steady{Nodes: 5000, Window: 3 * time.Minute, RunningPods: 5, WaitingPods: 1}
}

// DefaultSteadyLarge is the same at 10 000 nodes (20 000 ENIs, 180 000
// addresses; quick: 2000), the operator's RSS goal there 350 MiB. While
// the nodes join, its client may send 1000 requests a second (burst
// 2000) instead of 20, so that the join (a status, a NodeRouting and a
// pool write per node) fits the bench's time; the window is measured on
// an operator restarted with the default limits on the served cluster.
func DefaultSteadyLarge(quick bool) Steady {
	s := DefaultSteady(quick)
	s.Nodes, s.Large = 10000, true
	if quick {
		s.Nodes = 2000
	}
	s.JoinArgs = []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}
	return s
}

// Name is the scenario's report name.
func (s Steady) Name() string {
	if s.Large {
		return "steady-large"
	}
	return "steady"
}

// rssLimit is the operator's RSS goal: 200 MiB up to 5000 nodes, 350 MiB
// up to 10 000 (20 000 ENIs, 180 000 addresses), growing as that slope
// beyond.
func (s Steady) rssLimit() float64 {
	if s.Nodes <= 5000 {
		return 200
	}
	return 200 + 150*float64(s.Nodes-5000)/5000
}

// joinTimeout bounds the wait for every node to be served: 10 minutes,
// or 3 nodes a second on a larger run.
func (s Steady) joinTimeout() time.Duration {
	return max(10*time.Minute, time.Duration(s.Nodes/3)*time.Second)
}

// Run runs the scenario.
func (s Steady) Run(ctx context.Context, e *Env) (*Report, error) {
	const resync = time.Minute
	rep := &Report{Scenario: s.Name(), Started: time.Now(), Params: map[string]any{
		"nodes": s.Nodes, "window": s.Window.String(), "resyncInterval": resync.String(),
		"poolPerNode": 18, "enisPerNode": 2, "preAllocate": 8, "maxAboveWatermark": 8, "ec2": "ec2sim realistic",
		"runningPods": s.Nodes * s.RunningPods, "waitingPods": s.Nodes * s.WaitingPods,
	}}
	pprofAddr, err := cluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"--vpc-id=" + fleetVPC, "--pre-allocate=8", "--max-above-watermark=8", "--resync-interval=" + resync.String(),
		"--pprof-bind-address=" + pprofAddr}
	args = append(args, s.OperatorArgs...)
	if len(s.OperatorArgs) > 0 {
		rep.Params["operatorArgs"] = strings.Join(s.OperatorArgs, " ")
	}
	if len(s.JoinArgs) > 0 {
		rep.Params["operatorArgsWhileJoining"] = strings.Join(s.JoinArgs, " ")
	}
	seeded := ", secondaryIPs: 9, enis: [{deviceIndex: 1, secondaryIPs: 9, deleteOnTermination: true}]"
	w, err := e.startWorld(ctx, s.Name(), fleetScenario(s.Nodes, "m5.large", seeded, true), append(slices.Clone(args), s.JoinArgs...),
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
	e.say("%s: %d nodes join with full pools", s.Name(), len(specs))
	t0 := time.Now()
	names, err := w.join(ctx, specs)
	if err != nil {
		return nil, err
	}
	for {
		served := len(names) - len(w.unserved(names))
		if served == len(names) {
			break
		}
		if time.Since(t0) > s.joinTimeout() {
			return nil, fmt.Errorf("only %d of %d nodes got their pools", served, len(names))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d nodes got their pools, %w", served, len(names), ctx.Err())
		case <-time.After(time.Second):
		}
	}
	if err := w.agents.WaitReady(ctx, len(names)); err != nil {
		return nil, err
	}
	settle := time.Since(t0)
	e.say("%s: every node served in %s; %d running and %d waiting pods", s.Name(), settle.Round(time.Second), s.Nodes*s.RunningPods, s.Nodes*s.WaitingPods)
	if err := w.createPods(ctx, names, s.RunningPods, s.WaitingPods); err != nil {
		return nil, err
	}
	if len(s.JoinArgs) > 0 {
		// Restarted on the cluster it served, with its own arguments
		// only: every node must be served again, and no node's pool may
		// have left what its agent holds.
		w.opArgs = slices.DeleteFunc(w.opArgs, func(a string) bool { return slices.Contains(s.JoinArgs, a) })
		if err := w.restartOperator(ctx); err != nil {
			return nil, err
		}
		t1 := time.Now()
		if err := w.waitServed(ctx, len(names), s.joinTimeout()); err != nil {
			return nil, err
		}
		short := 0
		for _, name := range names {
			if w.agents.Agent(name).Figures().PoolIPs < 18 {
				short++
			}
		}
		if short > 0 {
			return nil, fmt.Errorf("restarted on the served cluster: %d of %d nodes' pools hold fewer than 18 addresses", short, len(names))
		}
		rep.add("restarted on the served cluster: time until it served every node again", time.Since(t1), "")
		e.say("%s: restarted without %v: every node served again in %s", s.Name(), s.JoinArgs, time.Since(t1).Round(time.Second))
	}
	e.say("%s: pods created; letting it settle", s.Name())
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
	e.say("%s: watching for %s", s.Name(), s.Window)
	const every = 5 * time.Second
	readings, err := w.sampleMemory(ctx, s.Window, every)
	if err != nil {
		return nil, err
	}
	through := readings.rss()
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
	heapErr := fetch(ctx, "http://"+pprofAddr+"/debug/pprof/heap?gc=1", heapPath)
	if heapErr == nil {
		rep.Params["heapProfile"] = heapPath
	}

	rep.add("time until every node was served", settle, "")
	rep.add("operator RSS at the end", rssMiB, "MiB")
	rep.add("operator RSS at the end mapping files (the binary's pages)", float64(u1.FileRSSBytes)/(1<<20), "MiB")
	rep.add("operator RSS at the end: anonymous / file pages", rssSplit(u1), "MiB")
	rep.add("operator RSS through the window, read every 5 s: min / mean / max", through.String(), "MiB")
	rep.add("operator RSS readings through the window above the goal", fmt.Sprintf("%d of %d", through.above(s.rssLimit()), len(through)), "")
	rep.add("operator peak RSS", float64(u1.PeakRSSBytes)/(1<<20), "MiB")
	rep.add("operator Go heap in use", sum(m1, "go_memstats_heap_inuse_bytes", nil)/(1<<20), "MiB")
	g0, g1 := goMemoryOf(m0), goMemoryOf(m1)
	rep.add("operator Go memory at the end: "+goMemoryNames, g1.String(), "MiB")
	rep.add("operator GC cycles in the window", g1.gcCycles-g0.gcCycles, "")
	readings.add(rep, every)
	rep.add("operator goroutines", sum(m1, "go_goroutines", nil), "")
	if heapErr == nil {
		rep.addHeapTop(ctx, "end of the window", e.Bins.Operator, heapPath)
	}
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
	limit := s.rssLimit()
	rep.target(fmt.Sprintf("operator RSS ≤ %.0f MiB at %d nodes", limit, s.Nodes), fmt.Sprintf("≤ %.0f MiB", limit), fmt.Sprintf("%.0f MiB", rssMiB), rssMiB <= limit)
	rep.target(fmt.Sprintf("operator RSS ≤ %.0f MiB at every reading through the window", limit), fmt.Sprintf("≤ %.0f MiB", limit), fmt.Sprintf("max %.1f MiB", through.max()), through.above(limit) == 0)
	rep.target("describe calls bounded by the resync interval", fmt.Sprintf("≤ %.0f in %s", bound, s.Window), fmt.Sprint(describes), float64(describes) <= bound)
	rep.target("no EC2 mutation while idle", "0", fmt.Sprint(mutating), mutating == 0)

	if err := s.profile(ctx, e, w, rep, pprofAddr); err != nil {
		return nil, err
	}

	if s.NoRestarts {
		rep.Ran = Seconds(time.Since(rep.Started))
		return rep, nil
	}
	// The pod watch's cost: the same cluster, a new operator without it,
	// then one with it, each measured the same way.
	var rss, heap [2]float64
	for i, demand := range []bool{false, true} {
		if err := w.restartOperator(ctx, fmt.Sprintf("--pod-demand=%v", demand)); err != nil {
			return nil, err
		}
		if err := w.waitServed(ctx, len(names), s.joinTimeout()); err != nil {
			return nil, err
		}
		time.Sleep(30 * time.Second)
		heapPath := filepath.Join(w.dir, fmt.Sprintf("operator-pod-demand-%v.heap.pprof", demand))
		if rss[i], heap[i], err = w.memory(ctx, pprofAddr, heapPath); err != nil {
			return nil, err
		}
		e.say("%s: operator with pod watch %v: RSS %.1f MiB, heap in use %.1f MiB", s.Name(), demand, rss[i], heap[i])
	}
	rep.add("operator RSS restarted without the pod watch", rss[0], "MiB")
	rep.add("operator RSS restarted with the pod watch", rss[1], "MiB")
	rep.add("operator Go heap in use without / with the pod watch", fmt.Sprintf("%.1f / %.1f", heap[0], heap[1]), "MiB")
	added := rss[1] - rss[0]
	rep.add("RSS the pod watch adds", added, "MiB")
	rep.Params["heapProfilesWithoutWithPodWatch"] = filepath.Join(w.dir, "operator-pod-demand-{false,true}.heap.pprof")
	rep.target("the pod watch adds ≤ 20 MiB of RSS", "≤ 20 MiB", fmt.Sprintf("%.1f MiB", added), added <= 20)
	rep.Ran = Seconds(time.Since(rep.Started))
	return rep, nil
}

// profileSeconds is the length of the CPU profile taken after the window.
const profileSeconds = 120

// profile takes, right after the window, a CPU profile of profileSeconds
// and the allocations made through it (the allocs profile before and
// after, for go tool pprof -diff_base), written beside the heap profile,
// and adds the CPU per minute, the bytes allocated per minute and the top
// functions of each to the report. It runs after the window, not in it:
// writing a profile looks up the name and line of every function in its
// stacks, which maps pages of the binary's symbol tables into the
// operator's RSS, and would raise the window's readings.
func (s Steady) profile(ctx context.Context, e *Env, w *world, rep *Report, pprofAddr string) error {
	base := "http://" + pprofAddr + "/debug/pprof/"
	allocs0 := filepath.Join(w.dir, "operator.allocs-start.pprof")
	allocs1 := filepath.Join(w.dir, "operator.allocs-end.pprof")
	cpu := filepath.Join(w.dir, "operator.cpu.pprof")
	if err := fetch(ctx, base+"allocs", allocs0); err != nil {
		return err
	}
	m0, err := w.metrics(ctx)
	if err != nil {
		return err
	}
	u0, err := w.op.Usage()
	if err != nil {
		return err
	}
	e.say("%s: CPU profile for %ds", s.Name(), profileSeconds)
	if err := fetch(ctx, fmt.Sprintf("%sprofile?seconds=%d", base, profileSeconds), cpu); err != nil {
		return err
	}
	u1, err := w.op.Usage()
	if err != nil {
		return err
	}
	m1, err := w.metrics(ctx)
	if err != nil {
		return err
	}
	if err := fetch(ctx, base+"allocs", allocs1); err != nil {
		return err
	}
	minutes := float64(profileSeconds) / 60
	rep.Params["cpuProfile"] = cpu
	rep.Params["allocsProfiles"] = allocs0 + " (base), " + allocs1
	rep.add("profile window: operator CPU per minute", (u1.CPUSeconds-u0.CPUSeconds)/minutes, "s")
	allocated := sum(m1, "go_memstats_alloc_bytes_total", nil) - sum(m0, "go_memstats_alloc_bytes_total", nil)
	rep.add("profile window: operator bytes allocated per minute", allocated/minutes/(1<<20), "MiB")
	for _, method := range []string{"GET", "PATCH", "PUT", "POST"} {
		match := map[string]string{"method": method}
		if n := sum(m1, "rest_client_requests_total", match) - sum(m0, "rest_client_requests_total", match); n > 0 {
			rep.add("profile window: operator API requests per minute, "+method, n/minutes, "")
		}
	}
	if top, total, err := pprofTop(ctx, e.Bins.Operator, cpu, "", "", "s", 8); err != nil {
		rep.add("profile window: CPU profile unreadable", err.Error(), "")
	} else {
		rep.add("profile window: CPU profile total (sampled)", total, "s")
		for _, f := range top {
			rep.add("profile window: CPU flat: "+f.Func, f.MiB, "s")
		}
	}
	// Against a base, pprof's total is the base's (everything allocated
	// since the start): the window's is the counter's above.
	if top, _, err := pprofTop(ctx, e.Bins.Operator, allocs1, allocs0, "alloc_space", "MB", 8); err != nil {
		rep.add("profile window: allocs profile unreadable", err.Error(), "")
	} else {
		for _, f := range top {
			rep.add("profile window: allocated flat: "+f.Func, f.MiB, "MiB")
		}
	}
	return nil
}

// unserved returns the nodes whose agent has not yet seen a pool of 18.
func (w *world) unserved(names []string) []string {
	var out []string
	for _, name := range names {
		if _, ok := w.agents.Agent(name).PoolReachedAt(18); !ok {
			out = append(out, name)
		}
	}
	return out
}

// createPods creates, on every node, running pods (bound, with an
// address in their status, as their kubelet would have written it) and
// waiting pods (bound, no address yet), 64 at a time.
func (w *world) createPods(ctx context.Context, nodes []string, running, waiting int) error {
	const ns = "steady"
	c := w.cluster.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	sem := make(chan struct{}, 64)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for i, node := range nodes {
		for j := range running + waiting {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d-%d", i, j)},
					Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
				}
				err := c.Create(ctx, pod)
				if err == nil && j < running {
					ip := fmt.Sprintf("100.%d.%d.%d", 64+i/65536, i/256%256, i%256)
					pod.Status.Phase = corev1.PodRunning
					pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
					err = c.Status().Update(ctx, pod)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("creating pod %s on %s, %w", pod.Name, node, err))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return firstErr
}

// waitServed waits until the operator's last reconcile served n nodes.
func (w *world) waitServed(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		m, err := w.metrics(ctx)
		if err == nil && sum(m, "enipam_nodes", map[string]string{"state": "served"}) >= float64(n) {
			return nil
		}
		if w.op.Exited() {
			return fmt.Errorf("operator exited:\n%s", w.op.Tail(20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the operator served fewer than %d nodes within %s", n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// memory returns the operator's RSS, the mean of five looks 5 s apart,
// and its Go heap in use, in MiB; then its heap profile goes to heapPath.
// The profile comes last: writing one looks up the name and line of every
// function in its stacks, which maps pages of the binary's symbol tables
// the operator never reads otherwise into its RSS.
func (w *world) memory(ctx context.Context, pprofAddr, heapPath string) (rss, heap float64, err error) {
	for i := range 5 {
		if i > 0 {
			select {
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			case <-time.After(5 * time.Second):
			}
		}
		u, err := w.op.Usage()
		if err != nil {
			return 0, 0, err
		}
		rss += float64(u.RSSBytes) / (1 << 20) / 5
	}
	m, err := w.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	if err := fetch(ctx, "http://"+pprofAddr+"/debug/pprof/heap?gc=1", heapPath); err != nil {
		return 0, 0, err
	}
	return rss, sum(m, "go_memstats_heap_inuse_bytes", nil) / (1 << 20), nil
}
