package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/stack"
)

// StaticMoves is the static-moves scenario: a StatefulSet of static-IP
// pods on nodes of one zone, with the real kube-scheduler and extender,
// kube-controller-manager, the operator and ec2sim (realistic); one pod
// at a time has its node cordoned and is deleted, and comes back on
// another node with its address. It reports the rescheduling time: from
// the deletion to the address stamped in the new node's pool (and to the
// new pod running with it), p50 and p99, with each leg of the move as
// seen from outside (the claim asked onto the new node, the old node's
// endpoint evidence, the address out of the old pool, the reassignment,
// the remap landed in the new instance's metadata, the new node's agent
// confirming it), and EC2's remap apart from the rest: as seen from
// outside, and as ec2sim drew it (the delay of the remap that landed,
// from its admin API), the move less that delay being enipam's share.
// It counts the EC2 calls made during the moves (describes included).
type StaticMoves struct {
	Nodes, Pods, Moves int
	// AgentUpdate is Cilium's agent's CiliumNode update interval
	// (ipam.ciliumNodeUpdateRate): the old node's answer to the release
	// handshake waits for it.
	AgentUpdate time.Duration
	// EndpointRoutes: Cilium runs with endpoint routes, so the old node's
	// enipam-agent reports at once that no endpoint holds the address and
	// the move need not wait for the handshake (the fast move). Without
	// them every move waits for the handshake.
	EndpointRoutes bool
}

// DefaultStaticMoves is 4 nodes, 4 pods and 20 moves with agents writing
// every 15 s, Cilium's default, and Cilium's endpoint routes (quick: 8
// moves).
func DefaultStaticMoves(quick bool) StaticMoves {
	if quick {
		return StaticMoves{Nodes: 4, Pods: 4, Moves: 8, AgentUpdate: 15 * time.Second, EndpointRoutes: true}
	}
	return StaticMoves{Nodes: 4, Pods: 4, Moves: 20, AgentUpdate: 15 * time.Second, EndpointRoutes: true}
}

// staticReleaseDelay: the static moves run with excess addresses released
// through the handshake after 2 s, so that a node a pod left gives its
// spare addresses back while stamps come and go.
const staticReleaseDelay = 2 * time.Second

// Name is the scenario's report name.
func (s StaticMoves) Name() string {
	if !s.EndpointRoutes {
		return "static-moves-handshake"
	}
	return "static-moves"
}

// Run runs the scenario.
func (s StaticMoves) Run(ctx context.Context, e *Env) (*Report, error) {
	rep := &Report{Scenario: s.Name(), Started: time.Now(), Params: map[string]any{
		"nodes": s.Nodes, "pods": s.Pods, "moves": s.Moves, "instanceType": "m5.large", "agentUpdateInterval": s.AgentUpdate.String(),
		"ec2": "ec2sim realistic", "preAllocate": 8, "endpointRoutes": s.EndpointRoutes, "excessIPReleaseDelay": staticReleaseDelay.String(),
	}}
	scenario := fmt.Sprintf(`account: "123456789012"
clusterName: bench
region: us-east-1
seed: 9
zones: [us-east-1a]
vpcs:
- id: vpc-0d0000000000000d1
  cidrs: [10.5.0.0/16]
  subnets:
  - {id: subnet-0d0000000000000a1, name: nodes, cidr: 10.5.0.0/20, zone: us-east-1a}
  securityGroups:
  - {id: sg-0d0000000000000d1, name: nodes}
instances:
- {name: node, count: %d, type: m5.large, subnet: nodes, securityGroups: [nodes]}
profile: realistic
`, s.Nodes)
	w, err := e.startWorld(ctx, s.Name(), scenario, []string{"--vpc-id=vpc-0d0000000000000d1", "--release-excess-ips=true", "--excess-ip-release-delay=" + staticReleaseDelay.String()},
		agentsim.Options{UpdateInterval: s.AgentUpdate, SampleInterval: -1, EndpointRoutes: s.EndpointRoutes})
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
	names, err := w.join(ctx, specs)
	if err != nil {
		return nil, err
	}
	kubelet, sched, err := w.startScheduling(ctx, s.Name(), true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sched.Stop() }()
	for _, n := range names {
		if err := kubelet.Register(ctx, n); err != nil {
			return nil, err
		}
	}
	ready, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := w.agents.WaitReady(ready, len(names)); err != nil {
		return nil, fmt.Errorf("agents ready: %w", err)
	}
	kcm, err := stack.StartControllerManager(ctx, w.cluster.BinDir, w.dir, w.kubeconfigPath())
	if err != nil {
		return nil, err
	}
	defer func() { _ = kcm.Stop(10 * time.Second) }()

	c := w.cluster.Client
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(s.Pods)), ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{enipamv1alpha1.StaticIPAnnotation: "Retain"}},
				Spec: corev1.PodSpec{SchedulerName: "enipam-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "db", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if err := c.Create(ctx, sts); err != nil {
		return nil, err
	}
	ips := map[string]string{}
	for i := range s.Pods {
		pod := fmt.Sprintf("db-%d", i)
		_, ip, err := w.runningStatic(ctx, pod, "", 3*time.Minute)
		if err != nil {
			return nil, err
		}
		ips[pod] = ip
	}
	e.say("%s: %d pods placed; %d moves", s.Name(), s.Pods, s.Moves)
	var toPool, toRunning []time.Duration
	legs := map[string][]time.Duration{}
	// remap is, per move, from the reassignment seen made to the remap
	// seen landed (EC2's asynchronous remap, ec2sim's reassignDelay);
	// rest is the rest of the move (deleted to stamped, less remap).
	var remap, rest []time.Duration
	// drawn is, per move, the delay ec2sim drew for the remap that
	// landed; share is the move (deleted to stamped) less drawn.
	var drawn, share []time.Duration
	var describes, calls int64
	sameIP := 0
	for m := range s.Moves {
		pod := fmt.Sprintf("db-%d", m%s.Pods)
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: pod}, p); err != nil {
			return nil, err
		}
		old := p.Spec.NodeName
		if err := w.setUnschedulable(ctx, old, true); err != nil {
			return nil, err
		}
		before, err := w.sim.Admin.Counters(ctx)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := c.Delete(ctx, p); err != nil {
			return nil, err
		}
		lg := &moveLegs{}
		node, at, err := w.stampedElsewhere(ctx, "default/"+pod, ips[pod], old, lg, 2*time.Minute)
		if err != nil {
			return nil, fmt.Errorf("move %d of %s: %w", m, pod, err)
		}
		took := at.Sub(t0)
		toPool = append(toPool, took)
		after, err := w.sim.Admin.Counters(ctx)
		if err != nil {
			return nil, err
		}
		describes += after.Calls["DescribeNetworkInterfaces"] - before.Calls["DescribeNetworkInterfaces"]
		for _, n := range after.Calls {
			calls += n
		}
		for _, n := range before.Calls {
			calls -= n
		}
		var said []string
		for _, l := range lg.list() {
			if !l.at.IsZero() {
				legs[l.name] = append(legs[l.name], l.at.Sub(t0))
				said = append(said, fmt.Sprintf("%s %.2f s", l.name, l.at.Sub(t0).Seconds()))
			}
		}
		if d, ok, err := w.remapDrawn(ctx, ips[pod], t0); err != nil {
			return nil, err
		} else if ok {
			drawn = append(drawn, d)
			share = append(share, took-d)
			said = append(said, fmt.Sprintf("EC2's remap as ec2sim drew it %.2f s, the move less it %.2f s", d.Seconds(), (took-d).Seconds()))
		}
		e.say("%s: move %d: %s from %s to %s: %s", s.Name(), m, pod, old, node, strings.Join(said, ", "))
		if !lg.reassigned.IsZero() && !lg.landed.IsZero() {
			remap = append(remap, lg.landed.Sub(lg.reassigned))
			rest = append(rest, lg.stamped.Sub(t0)-lg.landed.Sub(lg.reassigned))
		}
		_, ip, err := w.runningStatic(ctx, pod, node, 2*time.Minute)
		if err != nil {
			return nil, fmt.Errorf("move %d of %s: %w", m, pod, err)
		}
		toRunning = append(toRunning, time.Since(t0))
		if ip == ips[pod] {
			sameIP++
		}
		if err := w.setUnschedulable(ctx, old, false); err != nil {
			return nil, err
		}
	}
	slices.Sort(toPool)
	slices.Sort(toRunning)
	for _, l := range legs {
		slices.Sort(l)
	}
	slices.Sort(remap)
	slices.Sort(rest)
	slices.Sort(drawn)
	slices.Sort(share)
	fig := w.agents.Figures()
	f, err := w.poolFindings(ctx)
	if err != nil {
		return nil, err
	}
	rep.add("moves", len(toPool), "")
	rep.add("moves that kept the address", sameIP, "")
	// The legs, each from the deletion, in the order a move takes them
	// (a leg a move skipped, such as the endpoint evidence when the
	// handshake answered first, counts only the moves that took it).
	for _, l := range (&moveLegs{}).list() {
		if l.name == legStamped {
			continue // the figure below
		}
		if d := legs[l.name]; len(d) > 0 {
			rep.add(fmt.Sprintf("deleted to %s p50", l.name), agentsim.Percentile(d, 50), "")
			rep.add(fmt.Sprintf("deleted to %s p99", l.name), agentsim.Percentile(d, 99), fmt.Sprintf("%d moves", len(d)))
		}
	}
	if len(remap) > 0 {
		rep.add("EC2's remap (reassignment made to landed) p50", agentsim.Percentile(remap, 50), "")
		rep.add("EC2's remap (reassignment made to landed) p99", agentsim.Percentile(remap, 99), fmt.Sprintf("%d moves", len(remap)))
		rep.add("the move less EC2's remap p50", agentsim.Percentile(rest, 50), "")
		rep.add("the move less EC2's remap p99", agentsim.Percentile(rest, 99), fmt.Sprintf("%d moves", len(rest)))
	}
	if len(drawn) > 0 {
		rep.add("EC2's remap as ec2sim drew it p50", agentsim.Percentile(drawn, 50), "")
		rep.add("EC2's remap as ec2sim drew it p99", agentsim.Percentile(drawn, 99), fmt.Sprintf("%d moves", len(drawn)))
		rep.add("enipam's share (deleted to stamped, less the drawn remap) p50", agentsim.Percentile(share, 50), "")
		rep.add("enipam's share (deleted to stamped, less the drawn remap) p99", agentsim.Percentile(share, 99), fmt.Sprintf("%d moves", len(share)))
	}
	rep.add("DescribeNetworkInterfaces calls per move (deleted to stamped)", float64(describes)/float64(max(len(toPool), 1)), fmt.Sprintf("%d in all", describes))
	rep.add("EC2 calls per move (deleted to stamped)", float64(calls)/float64(max(len(toPool), 1)), fmt.Sprintf("%d in all", calls))
	rep.add("deleted to address in the new node's pool p50", agentsim.Percentile(toPool, 50), "")
	rep.add("deleted to address in the new node's pool p99", agentsim.Percentile(toPool, 99), "")
	rep.add("deleted to new pod running with it p50", agentsim.Percentile(toRunning, 50), "")
	rep.add("deleted to new pod running with it p99", agentsim.Percentile(toRunning, 99), "")
	rep.add("ledger violations", fig.Violations.Total(), "")
	if c, err := w.sim.Admin.Counters(ctx); err == nil {
		rep.add("excess addresses unassigned in EC2 (release handshake)", c.Succeeded("UnassignPrivateIpAddresses"), "calls")
	}
	rep.target("every move keeps the address", fmt.Sprint(s.Moves), fmt.Sprint(sameIP), sameIP == s.Moves)
	rep.target("ledger violations", "0", fmt.Sprint(fig.Violations.Total()), fig.Violations.Total() == 0)
	if s.EndpointRoutes {
		p50, p99 := agentsim.Percentile(toPool, 50), agentsim.Percentile(toPool, 99)
		rep.target("deleted to address in the new node's pool p50", "<= 2s", p50.String(), p50 <= 2*time.Second)
		rep.target("deleted to address in the new node's pool p99", "<= 5s", p99.String(), p99 <= 5*time.Second)
	}
	rep.addPoolFindings(f)
	rep.Ran = Seconds(time.Since(rep.Started))
	return rep, nil
}

// remapDrawn returns the delay ec2sim drew for the last remap of ip
// asked at or after since that landed; false if none did.
func (w *world) remapDrawn(ctx context.Context, ip string, since time.Time) (time.Duration, bool, error) {
	remaps, err := w.sim.Admin.Remaps(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("reading ec2sim's remaps, %w", err)
	}
	for i := len(remaps) - 1; i >= 0; i-- {
		if r := remaps[i]; r.Address == ip && !r.Asked.Before(since) && r.Outcome == ec2sim.RemapLanded {
			return time.Duration(r.Delay), true, nil
		}
	}
	return 0, false, nil
}

// runningStatic waits until pod runs (on node, if set) with the address of
// its Bound claim.
func (w *world) runningStatic(ctx context.Context, pod, node string, timeout time.Duration) (string, string, error) {
	c := w.cluster.Client
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p := &corev1.Pod{}
		cl := &enipamv1alpha1.StaticIPClaim{}
		if c.Get(ctx, client.ObjectKey{Namespace: "default", Name: pod}, p) != nil || c.Get(ctx, client.ObjectKey{Namespace: "default", Name: pod}, cl) != nil {
			continue
		}
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil && (node == "" || p.Spec.NodeName == node) && cl.Status.Address == p.Status.PodIP {
			return p.Spec.NodeName, p.Status.PodIP, nil
		}
	}
	return "", "", fmt.Errorf("%s never ran with its claim's address within %s", pod, timeout)
}

// Legs of a move, as the bench sees them from outside (each the first
// time it saw it).
const (
	legAsked        = "the claim asked onto the new node (the extender's bind)"
	legEndpointGone = "the old node's enipam-agent reporting no endpoint holding it"
	legReleased     = "the address out of the old node's pool"
	legReassigned   = "the reassignment made (the new node's agent asked to confirm it)"
	legLanded       = "the remap landed (the new instance's metadata lists it)"
	legConfirmed    = "the new node's agent reporting the remap landed"
	legStamped      = "the address stamped in the new node's pool"
)

// moveLegs are when the bench first saw each leg of one move.
type moveLegs struct {
	asked, endpointGone, released, reassigned, landed, confirmed, stamped time.Time
}

type leg struct {
	name string
	at   time.Time
}

func (l *moveLegs) list() []leg {
	return []leg{{legAsked, l.asked}, {legEndpointGone, l.endpointGone}, {legReleased, l.released}, {legReassigned, l.reassigned},
		{legLanded, l.landed}, {legConfirmed, l.confirmed}, {legStamped, l.stamped}}
}

func seen(t *time.Time, now time.Time, ok bool) {
	if ok && t.IsZero() {
		*t = now
	}
}

// stampedElsewhere waits until a node other than old has ip stamped for
// owner in its pool, out of any handshake, and returns it with when the
// list that showed it returned, noting when it first saw each leg of the
// move in lg. The stamp is looked for by a loop of its own, one list of
// the CiliumNodes at a time, and the other legs (apiserver reads and the
// new instance's metadata, slower) alongside: a loaded machine then
// delays the stamp's sighting by one list, not by every leg's probe.
func (w *world) stampedElsewhere(ctx context.Context, owner, ip, old string, lg *moveLegs, timeout time.Duration) (string, time.Time, error) {
	ns, name, _ := strings.Cut(owner, "/")
	c := w.cluster.Client
	var mu sync.Mutex // guards lg and target
	target := ""
	probing, stop := context.WithCancel(ctx)
	probed := make(chan struct{})
	defer func() { stop(); <-probed }()
	go func() {
		defer close(probed)
		for ; probing.Err() == nil; time.Sleep(20 * time.Millisecond) {
			w.probeLegs(probing, ns, name, ip, old, lg, &mu, &target)
		}
	}()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var list ciliumv2.CiliumNodeList
		if err := c.List(ctx, &list); err != nil {
			continue
		}
		now := time.Now()
		mu.Lock()
		for _, cn := range list.Items {
			if cn.Name == old {
				_, pooled := cn.Spec.IPAM.Pool[ip]
				seen(&lg.released, now, !pooled)
			}
		}
		for _, cn := range list.Items {
			_, hs := cn.Status.IPAM.ReleaseIPs[ip]
			if e, ok := cn.Spec.IPAM.Pool[ip]; ok && cn.Name != old && e.Owner == owner && !hs {
				seen(&lg.asked, now, true)
				seen(&lg.stamped, now, true)
				mu.Unlock()
				return cn.Name, now, nil
			}
		}
		mu.Unlock()
	}
	return "", time.Time{}, fmt.Errorf("%s never stamped for %s off %s within %s", ip, owner, old, timeout)
}

// probeLegs notes, once, the legs of a move seen from the claim, the
// NodeRoutings of the old and the new node, and the new instance's
// metadata (at the time each read returned).
func (w *world) probeLegs(ctx context.Context, ns, name, ip, old string, lg *moveLegs, mu *sync.Mutex, target *string) {
	c := w.cluster.Client
	mu.Lock()
	to := *target
	mu.Unlock()
	if cl := (&enipamv1alpha1.StaticIPClaim{}); to == "" && c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl) == nil &&
		cl.Spec.NodeName != "" && cl.Spec.NodeName != old {
		to = cl.Spec.NodeName
		mu.Lock()
		*target = to
		seen(&lg.asked, time.Now(), true)
		mu.Unlock()
	}
	if nr := (&enipamv1alpha1.NodeRouting{}); c.Get(ctx, client.ObjectKey{Name: old}, nr) == nil && nr.Status.Endpoints != nil {
		mu.Lock()
		seen(&lg.endpointGone, time.Now(), slices.Contains(nr.Status.Endpoints.Absent, ip))
		mu.Unlock()
	}
	if to == "" {
		return
	}
	nr := &enipamv1alpha1.NodeRouting{}
	if c.Get(ctx, client.ObjectKey{Name: to}, nr) != nil {
		return
	}
	now := time.Now()
	mu.Lock()
	seen(&lg.reassigned, now, slices.ContainsFunc(nr.Spec.RemapQueries, func(q enipamv1alpha1.RemapQuery) bool { return q.Address == ip }))
	seen(&lg.confirmed, now, nr.Status.Remaps != nil && slices.Contains(nr.Status.Remaps.Landed, ip))
	landed := !lg.landed.IsZero()
	mu.Unlock()
	if landed || nr.Spec.InstanceID == "" {
		return
	}
	cn := &ciliumv2.CiliumNode{}
	if c.Get(ctx, client.ObjectKey{Name: to}, cn) != nil {
		return
	}
	for _, e := range cn.Status.ENI.ENIs {
		local, err := w.sim.LocalIPv4s(ctx, nr.Spec.InstanceID, e.MAC)
		now := time.Now()
		mu.Lock()
		seen(&lg.landed, now, err == nil && slices.Contains(local, ip))
		mu.Unlock()
	}
}

// setUnschedulable cordons or uncordons a node.
func (w *world) setUnschedulable(ctx context.Context, node string, on bool) error {
	n := &corev1.Node{}
	if err := w.cluster.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return err
	}
	orig := n.DeepCopy()
	n.Spec.Unschedulable = on
	return w.cluster.Client.Patch(ctx, n, client.MergeFrom(orig))
}
