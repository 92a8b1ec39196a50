package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	watchpkg "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/schedtest"
	"github.com/enipam/enipam/test/stack"
)

// staticScenario: three m5.large in us-east-1a and one in us-east-1b,
// pods on the nodes' own subnets.
const staticScenario = `
account: "123456789012"
clusterName: e2e
region: us-east-1
seed: 17
zones: [us-east-1a, us-east-1b]
vpcs:
- id: vpc-0e000000000000001
  cidrs: [10.3.0.0/16]
  subnets:
  - {id: subnet-0e000000000000001, name: nodes-a, cidr: 10.3.0.0/20, zone: us-east-1a}
  - {id: subnet-0e000000000000002, name: nodes-b, cidr: 10.3.16.0/20, zone: us-east-1b}
  securityGroups:
  - {id: sg-0e000000000000001, name: nodes}
instances:
- {id: i-0e000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0e000000000000002, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0e000000000000003, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0e000000000000004, type: m5.large, subnet: nodes-b, securityGroups: [nodes]}
`

// staticOperatorArgs are the flags of the static tests' operators; the
// ENIPolicy of releasePolicy releases excess addresses.
var staticOperatorArgs = []string{"--vpc-id=vpc-0e000000000000001"}

// releasePolicy is every node's ENIPolicy in the static tests: excess
// addresses go back to EC2 through the release handshake after 2 s, so
// the owner stamps and the handshake meet on every node a pod leaves.
func releasePolicy() *enipamv1alpha1.ENIPolicy {
	return &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "release-excess"},
		Spec: enipamv1alpha1.ENIPolicySpec{
			ReleaseExcessIPs:     ptr.To(true),
			ExcessIPReleaseDelay: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
}

// staticWorld is a cluster where StatefulSets really run: the real
// enipam-operator and ec2sim, the real kube-scheduler with the chart's
// configuration and enipam's extender, the real kube-controller-manager
// (StatefulSet and garbage-collector controllers), simulated cilium- and
// enipam-agents, and kubelets that start the pods bound to their nodes.
type staticWorld struct {
	*world
	ns      string
	sim     *agentsim.Sim
	kubelet *agentsim.Kubelet
	nodes   []string
	zone    map[string]string
	sched   *schedtest.Scheduler
	logs    *syncBuffer
	// operator is the running enipam-operator.
	operator *stack.Process
	// seen records every address each pod of the test started with.
	mu   sync.Mutex
	seen map[string]map[string]bool
}

func newStaticWorld(t *testing.T) *staticWorld {
	t.Helper()
	w := &staticWorld{world: newWorld(t, staticScenario), ns: fmt.Sprintf("static-%d", time.Now().UnixNano()%1e6),
		zone: map[string]string{}, seen: map[string]map[string]bool{}, logs: &syncBuffer{}}
	if err := env.Client.Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.cleanupNamespace)
	if err := env.Client.Create(w.ctx, releasePolicy()); err != nil {
		t.Fatal(err)
	}
	w.operator = w.startOperator(staticOperatorArgs...)

	dump, err := w.world.sim.Admin.Dump(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var specs []agentsim.NodeSpec
	for _, in := range dump.Instances {
		name := "node-" + in.InstanceID
		specs = append(specs, agentsim.NodeSpec{Name: name, InstanceID: in.InstanceID, AvailabilityZone: in.Placement.AvailabilityZone, InstanceType: in.InstanceType})
		w.nodes = append(w.nodes, name)
		w.zone[name] = in.Placement.AvailabilityZone
	}
	w.sim, err = agentsim.New(env.Config, agentsim.Options{UpdateInterval: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	t.Cleanup(func() { cancel(); <-w.sim.Done() })
	if err := w.sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		w.sim.AddAgent(s.Name)
	}
	if err := agentsim.CreateNodes(w.ctx, env.Client, specs, 4); err != nil {
		t.Fatal(err)
	}
	w.kubelet = agentsim.NewKubelet(w.sim, agentsim.KubeletOptions{CNIDelay: 20 * time.Millisecond})
	if err := w.kubelet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range w.nodes {
		if err := w.kubelet.Register(w.ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	ready, cancelReady := context.WithTimeout(w.ctx, 90*time.Second)
	defer cancelReady()
	if err := w.sim.WaitReady(ready, len(w.nodes)); err != nil {
		t.Fatalf("agents ready: %v", err)
	}
	// The extender refuses a node whose capacity the operator has not
	// reported yet, and kube-scheduler retries a refused pod only on the
	// next cluster event: the tests start once every node is reported.
	for _, n := range w.nodes {
		waitNodeRouting(t, w.ctx, n, "its capacity reported", func(nr *enipamv1alpha1.NodeRouting) bool { return nr.Spec.Capacity != nil })
	}

	kc, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kcm, err := stack.StartControllerManager(w.ctx, env.BinDir, w.dir, w.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	w.procs = append(w.procs, kcm)
	w.startScheduler(kc)
	go w.watchPodIPs(ctx)
	return w
}

// startScheduler starts kube-scheduler and the extender as the chart
// configures them (a new pair after a kill).
func (w *staticWorld) startScheduler(kubeconfig []byte) {
	w.t.Helper()
	parts, err := schedtest.Render(w.ctx, w.ns)
	if err != nil {
		w.t.Fatal(err)
	}
	dir, err := os.MkdirTemp(w.dir, "scheduler-")
	if err != nil {
		w.t.Fatal(err)
	}
	w.sched, err = schedtest.Start(w.ctx, parts, schedtest.Options{Kubeconfig: kubeconfig, BinDir: env.BinDir, Dir: dir, Log: w.logs})
	if err != nil {
		w.t.Fatal(err)
	}
	s := w.sched
	w.t.Cleanup(func() {
		if w.t.Failed() {
			w.t.Logf("---- kube-scheduler ----\n%s\n---- extender (last lines) ----\n%s", s.KubeScheduler.Tail(40), w.logs.tail(40))
		}
		_ = s.Stop()
	})
}

// watchPodIPs records the address every pod of the test's namespace
// started with.
func (w *staticWorld) watchPodIPs(ctx context.Context) {
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(w.ns)); err == nil {
			w.mu.Lock()
			for _, p := range pods.Items {
				if p.Status.PodIP != "" {
					if w.seen[p.Name] == nil {
						w.seen[p.Name] = map[string]bool{}
					}
					w.seen[p.Name][p.Status.PodIP] = true
				}
			}
			w.mu.Unlock()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// statefulSet creates a StatefulSet of static-IP pods (AfterUnused with
// ttl) scheduled by enipam-scheduler.
func (w *staticWorld) statefulSet(name string, replicas int32, ttl time.Duration) *appsv1.StatefulSet {
	w.t.Helper()
	return w.statefulSetWith(name, replicas, map[string]string{
		enipamv1alpha1.StaticIPAnnotation:          string(enipamv1alpha1.ReclaimAfterUnused),
		enipamv1alpha1.StaticIPUnusedTTLAnnotation: ttl.String(),
	})
}

// statefulSetWith creates a StatefulSet in us-east-1a scheduled by
// enipam-scheduler, its pods annotated with annotations.
func (w *staticWorld) statefulSetWith(name string, replicas int32, annotations map[string]string) *appsv1.StatefulSet {
	w.t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					SchedulerName: "enipam-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](0),
					NodeSelector: map[string]string{corev1.LabelTopologyZone: "us-east-1a"},
					Containers:   []corev1.Container{{Name: "db", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if err := env.Client.Create(w.ctx, sts); err != nil {
		w.t.Fatal(err)
	}
	return sts
}

func (w *staticWorld) scale(sts *appsv1.StatefulSet, replicas int32) {
	w.t.Helper()
	orig := sts.DeepCopy()
	sts.Spec.Replicas = ptr.To(replicas)
	if err := env.Client.Patch(w.ctx, sts, client.MergeFrom(orig)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *staticWorld) pod(name string) (*corev1.Pod, bool) {
	p := &corev1.Pod{}
	err := env.Client.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: name}, p)
	return p, err == nil
}

func (w *staticWorld) claim(name string) (*enipamv1alpha1.StaticIPClaim, bool) {
	c := &enipamv1alpha1.StaticIPClaim{}
	err := env.Client.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: name}, c)
	return c, err == nil
}

// running waits until the pod runs with the address of its Bound claim,
// and returns its node and address.
func (w *staticWorld) running(name string, timeout time.Duration) (node, ip string) {
	w.t.Helper()
	w.eventually(name+" running with its claim's address", timeout, func() bool {
		p, ok := w.pod(name)
		c, cok := w.claim(name)
		if !ok || !cok || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			return false
		}
		node, ip = p.Spec.NodeName, p.Status.PodIP
		return c.Status.Phase == enipamv1alpha1.ClaimBound && c.Status.Address == ip && c.Status.NodeName == node
	})
	return node, ip
}

func (w *staticWorld) eventually(what string, timeout time.Duration, cond func() bool) {
	w.t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			w.t.Fatalf("never happened within %s: %s%s", timeout, what, w.describe())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describe prints the claims (with where their addresses are pooled and
// used, and the operator's last log lines about each) and pods, for
// failures.
func (w *staticWorld) describe() string {
	out := ""
	var claims enipamv1alpha1.StaticIPClaimList
	_ = env.Client.List(w.ctx, &claims, client.InNamespace(w.ns))
	var nodes ciliumv2.CiliumNodeList
	_ = env.Client.List(w.ctx, &nodes)
	for _, c := range claims.Items {
		msg := ""
		if r := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady); r != nil {
			msg = r.Reason + ": " + r.Message
		}
		out += fmt.Sprintf("\n  claim %s: %s %s on %s (asked %s) %s", c.Name, c.Status.Phase, c.Status.Address, c.Status.NodeName, c.Spec.NodeName, msg)
		out += fmt.Sprintf("\n    deleting %v, lastUsed %v, placement %+v", c.DeletionTimestamp != nil, c.Status.LastUsed, c.Status.Placement)
		for _, cn := range nodes.Items {
			if e, ok := cn.Spec.IPAM.Pool[c.Status.Address]; ok {
				_, hs := cn.Status.IPAM.ReleaseIPs[c.Status.Address]
				out += fmt.Sprintf("\n    pooled on %s: owner %q, used by %q, release handshake %v", cn.Name, e.Owner, cn.Status.IPAM.Used[c.Status.Address].Owner, hs)
			}
		}
		if w.operator != nil {
			out += w.operatorLines(c.Namespace+"/"+c.Name, 8)
		}
	}
	var pods corev1.PodList
	_ = env.Client.List(w.ctx, &pods, client.InNamespace(w.ns))
	for _, p := range pods.Items {
		out += fmt.Sprintf("\n  pod %s: node %q ip %q deleting %v", p.Name, p.Spec.NodeName, p.Status.PodIP, p.DeletionTimestamp != nil)
	}
	return out
}

// operatorLines returns the operator's last n log lines that name owner.
func (w *staticWorld) operatorLines(owner string, n int) string {
	data, err := os.ReadFile(w.operator.LogPath)
	if err != nil {
		return ""
	}
	var lines []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, `"`+owner+`"`) {
			lines = append(lines, strings.TrimRight(line, "\n"))
		}
	}
	lines = lines[max(0, len(lines)-n):]
	return "\n    operator: " + strings.Join(lines, "\n    operator: ")
}

// inPool returns the node whose pool lists ip and the entry's owner.
func (w *staticWorld) inPool(ip string) (nodes []string, owner string) {
	var list ciliumv2.CiliumNodeList
	if err := env.Client.List(w.ctx, &list); err != nil {
		w.t.Fatal(err)
	}
	for _, cn := range list.Items {
		if e, ok := cn.Spec.IPAM.Pool[ip]; ok {
			nodes, owner = append(nodes, cn.Name), e.Owner
		}
	}
	return nodes, owner
}

// onENIs returns the instances whose ENIs EC2 shows ip on, one per ENI.
func (w *staticWorld) onENIs(ip string) []string {
	dump, err := w.world.sim.Admin.Dump(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range dump.NetworkInterfaces {
		for _, a := range e.PrivateIPAddresses {
			if a.PrivateIPAddress == ip && e.Attachment != nil {
				out = append(out, "node-"+e.Attachment.InstanceID)
			}
		}
	}
	return out
}

// cordon marks a node unschedulable.
func (w *staticWorld) cordon(node string) {
	w.t.Helper()
	n := &corev1.Node{}
	if err := env.Client.Get(w.ctx, client.ObjectKey{Name: node}, n); err != nil {
		w.t.Fatal(err)
	}
	orig := n.DeepCopy()
	n.Spec.Unschedulable = true
	if err := env.Client.Patch(w.ctx, n, client.MergeFrom(orig)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *staticWorld) deletePod(name string) {
	w.t.Helper()
	if err := env.Client.Delete(w.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}); err != nil {
		w.t.Fatal(err)
	}
}

// onlyIPs checks that each pod only ever started with the given address.
func (w *staticWorld) onlyIPs(want map[string]string) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for pod, ips := range w.seen {
		exp, ok := want[pod]
		if !ok {
			continue
		}
		if got := slices.Sorted(maps.Keys(ips)); len(got) != 1 || got[0] != exp {
			w.t.Errorf("pod %s started with %v, want only %s", pod, got, exp)
		}
	}
}

// claimReleaseWait bounds how long a static test's cleanup waits for
// enipam-operator to release the test's claims.
const claimReleaseWait = time.Minute

// cleanupNamespace removes the test's StatefulSets, pods and claims. It
// runs before the world's cleanup (registered later), so the operator
// still runs: the claims are deleted and left to it, which releases each
// (its Elastic IP, then its stamp) and removes its finalizer last.
// Removing the finalizers at once raced that release: a claim gone before
// the operator saw it deleted leaves its Elastic IP associated and
// allocated. A claim still there after claimReleaseWait (an operator
// that no longer runs, or a release that hangs) loses its finalizer as a
// last resort, said in the test's log with where the claim stood. The
// NodeRoutings are the world's cleanup's (cleanupAPI), once the operator
// is stopped.
func (w *staticWorld) cleanupNamespace() {
	ctx, cancel := context.WithTimeout(context.Background(), claimReleaseWait+time.Minute)
	defer cancel()
	_ = env.Client.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(w.ns))
	_ = env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(w.ns), client.GracePeriodSeconds(0))
	_ = env.Client.DeleteAllOf(ctx, &enipamv1alpha1.StaticIPClaim{}, client.InNamespace(w.ns))
	for _, c := range w.claimsLeft(ctx, claimReleaseWait) {
		ready := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady)
		if ready == nil {
			ready = &metav1.Condition{}
		}
		w.t.Logf("cleanup: claim %s not released by enipam-operator within %s (phase %q, %s: %s); its finalizer removed",
			c.Owner(), claimReleaseWait, c.Status.Phase, ready.Reason, ready.Message)
		orig := c.DeepCopy()
		c.Finalizers = nil
		_ = env.Client.Patch(ctx, &c, client.MergeFrom(orig))
	}
	_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})
}

// claimsLeft waits up to timeout for the namespace's claims to be gone,
// and returns those still there.
func (w *staticWorld) claimsLeft(ctx context.Context, timeout time.Duration) []enipamv1alpha1.StaticIPClaim {
	var list enipamv1alpha1.StaticIPClaimList
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		err := env.Client.List(ctx, &list, client.InNamespace(w.ns))
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return list.Items
		}
	}
}

// TestStatefulSetPodKeepsItsIPWhereverItIsRescheduled: a StatefulSet db
// of 3 static-IP pods (AfterUnused, 20 s) scheduled by enipam-scheduler
// in us-east-1a. Each pod runs with its claim's address. With db-1's node
// cordoned, db-1 is deleted: the StatefulSet controller recreates it, it
// lands on another node of us-east-1a with the same address; EC2 shows
// the address on the new node's ENI only, the old pool no longer lists
// it. Scaled to 2 and back to 3 within the TTL, db-2 keeps its address;
// scaled to 2 again, its claim is released after the TTL and the address
// is an ordinary pool address again. Every pod only ever started with its
// claim's address; the agents' ledger counts no violation and the pools
// hold to EC2.
func TestStatefulSetPodKeepsItsIPWhereverItIsRescheduled(t *testing.T) {
	w := newStaticWorld(t)
	sts := w.statefulSet("db", 3, 20*time.Second)
	ips := map[string]string{}
	nodes := map[string]string{}
	for _, p := range []string{"db-0", "db-1", "db-2"} {
		nodes[p], ips[p] = w.running(p, 2*time.Minute)
	}
	t.Logf("placed: %v on %v", ips, nodes)

	old := nodes["db-1"]
	notes := w.watchNotes("db-1")
	w.cordon(old)
	start := time.Now()
	w.deletePod("db-1")
	w.eventually("db-1 recreated", time.Minute, func() bool {
		p, ok := w.pod("db-1")
		return ok && p.DeletionTimestamp == nil && p.Spec.NodeName != old
	})
	node, ip := w.running("db-1", 2*time.Minute)
	t.Logf("db-1 rescheduled from %s to %s with %s in %s", old, node, ip, time.Since(start).Round(time.Millisecond))
	if ip != ips["db-1"] || node == old || w.zone[node] != w.zone[old] {
		t.Fatalf("db-1 came back on %s (%s) with %s; it was on %s (%s) with %s", node, w.zone[node], ip, old, w.zone[old], ips["db-1"])
	}
	if on := w.onENIs(ip); !slices.Equal(on, []string{node}) {
		t.Errorf("EC2 shows %s on the ENIs of %v, want %s only", ip, on, node)
	}
	if pools, owner := w.inPool(ip); !slices.Equal(pools, []string{node}) || owner != w.ns+"/db-1" {
		t.Errorf("%s is in the pools of %v (owner %q), want %s's only, stamped", ip, pools, owner, node)
	}
	// The pool controller told of the move in the claim's
	// status.placement, about the claim's address, and removes its note
	// once the address is stamped.
	w.eventually("db-1's placement note removed", 30*time.Second, func() bool {
		c, ok := w.claim("db-1")
		return ok && c.Status.Placement == nil
	})
	seen := notes()
	if len(seen) == 0 {
		t.Errorf("no placement note on db-1's claim during its move")
	}
	for _, n := range seen {
		if n.Address != ip || n.Term == "" || n.Term != seen[0].Term || n.Reason == "" || (n.Node != old && n.Node != node) {
			t.Errorf("placement note %+v during db-1's move of %s from %s to %s", n, ip, old, node)
		}
	}
	t.Logf("db-1's placement notes: %d, reasons %v", len(seen), noteReasons(seen))

	// Scaled down and up within the TTL: db-2 keeps its address.
	w.scale(sts, 2)
	w.eventually("db-2 gone", time.Minute, func() bool { _, ok := w.pod("db-2"); return !ok })
	w.scale(sts, 3)
	if _, ip := w.running("db-2", 2*time.Minute); ip != ips["db-2"] {
		t.Fatalf("db-2 came back with %s, want %s", ip, ips["db-2"])
	}
	// Scaled down for good: released after the TTL.
	w.scale(sts, 2)
	w.eventually("db-2's claim released", time.Minute, func() bool { _, ok := w.claim("db-2"); return !ok })
	w.eventually(ips["db-2"]+" an ordinary pool address again", 30*time.Second, func() bool {
		pools, owner := w.inPool(ips["db-2"])
		return len(pools) == 1 && owner == ""
	})
	w.onlyIPs(ips)
	w.checkPools(w.sim)
	if v := w.sim.Ledger().Violations(); v.Total() != 0 {
		t.Errorf("ledger: %+v %v", v, w.sim.Ledger().ViolationDetails())
	}
	w.releases()
}

// watchNotes records every placement note the claim of name holds from
// now until the test ends, but the one it holds now; the function
// returned lists them.
func (w *staticWorld) watchNotes(name string) func() []enipamv1alpha1.PlacementNote {
	w.t.Helper()
	watch, err := env.Client.Watch(w.ctx, &enipamv1alpha1.StaticIPClaimList{}, client.InNamespace(w.ns))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(watch.Stop)
	var mu sync.Mutex
	var seen []enipamv1alpha1.PlacementNote
	var before *enipamv1alpha1.PlacementNote
	go func() {
		for ev := range watch.ResultChan() {
			c, ok := ev.Object.(*enipamv1alpha1.StaticIPClaim)
			if !ok || c.Name != name {
				continue
			}
			if ev.Type == watchpkg.Added {
				before = c.Status.Placement
			}
			if c.Status.Placement == nil || (before != nil && *before == *c.Status.Placement) {
				continue
			}
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != *c.Status.Placement {
				seen = append(seen, *c.Status.Placement)
			}
			mu.Unlock()
		}
	}()
	return func() []enipamv1alpha1.PlacementNote {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

func noteReasons(notes []enipamv1alpha1.PlacementNote) []string {
	var out []string
	for _, n := range notes {
		out = append(out, n.Node+":"+n.Reason)
	}
	return out
}

// releases logs and returns how many addresses the operator unassigned
// in EC2: the excess releasePolicy gives back through the handshake.
func (w *staticWorld) releases() int64 {
	w.t.Helper()
	c, err := w.world.sim.Admin.Counters(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	n := c.Succeeded("UnassignPrivateIpAddresses")
	w.t.Logf("%d UnassignPrivateIpAddresses calls (excess released through the handshake)", n)
	return n
}

// syncBuffer collects logs from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) tail(lines int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := len(b.buf)
	for n := 0; n <= lines && i > 0; {
		i--
		if b.buf[i] == '\n' {
			n++
		}
	}
	return string(b.buf[i:])
}

// asked waits until pod's claim asks for a node other than from: a bind
// is under way.
func (w *staticWorld) asked(pod, from string) string {
	w.t.Helper()
	var to string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, ok := w.claim(pod); ok && c.Spec.NodeName != "" && c.Spec.NodeName != from {
			return c.Spec.NodeName
		}
	}
	w.t.Fatalf("no bind of %s away from %s began%s", pod, from, w.describe())
	return to
}

// sampleBinds checks, every 50 ms until ctx ends, that every pod of the
// test bound to a node has its address stamped in that node's pool (no
// pod is bound without its address), and that no address is in two
// pools; it returns the count of breaches when ctx ends.
func (w *staticWorld) sampleBinds(ctx context.Context) <-chan int {
	out := make(chan int, 1)
	go func() {
		breaches := 0
		for ctx.Err() == nil {
			var pods corev1.PodList
			var nodes ciliumv2.CiliumNodeList
			if env.Client.List(ctx, &pods, client.InNamespace(w.ns)) == nil && env.Client.List(ctx, &nodes) == nil {
				stamped := map[string]map[string]bool{} // node → owners
				pooled := map[string]string{}
				for _, cn := range nodes.Items {
					stamped[cn.Name] = map[string]bool{}
					for ip, e := range cn.Spec.IPAM.Pool {
						if other, dup := pooled[ip]; dup {
							breaches++
							w.t.Errorf("%s in the pools of %s and %s", ip, other, cn.Name)
						}
						pooled[ip] = cn.Name
						if e.Owner != "" {
							stamped[cn.Name][e.Owner] = true
						}
					}
				}
				for _, p := range pods.Items {
					if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !stamped[p.Spec.NodeName][w.ns+"/"+p.Name] {
						// The pod list may predate the pool list: look again.
						if q, ok := w.pod(p.Name); ok && q.UID == p.UID && q.DeletionTimestamp == nil {
							breaches++
							w.t.Errorf("pod %s is bound to %s, whose pool has no address stamped for it", p.Name, p.Spec.NodeName)
						}
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		out <- breaches
	}()
	return out
}

// TestAMoveSurvivesKillsMidBind: db-0's node cordoned and db-0 deleted,
// enipam-operator is killed (SIGKILL) as soon as the bind asked for the
// new node, and a new operator started; then db-1's node cordoned and
// db-1 deleted, kube-scheduler is killed and its extender stopped mid-bind
// and a new pair started. Each pod comes back on another node with its
// address; at every look no pod is bound to a node whose pool lacks its
// stamp, no address is in two pools; in the end EC2 shows each address on
// one ENI, the ledger counts no violation and the pools hold to EC2.
func TestAMoveSurvivesKillsMidBind(t *testing.T) {
	w := newStaticWorld(t)
	w.statefulSet("db", 2, time.Hour)
	ips, nodes := map[string]string{}, map[string]string{}
	for _, p := range []string{"db-0", "db-1"} {
		nodes[p], ips[p] = w.running(p, 2*time.Minute)
	}
	ctx, stop := context.WithCancel(w.ctx)
	breaches := w.sampleBinds(ctx)

	// The operator killed mid-bind.
	w.cordon(nodes["db-0"])
	w.deletePod("db-0")
	to := w.asked("db-0", nodes["db-0"])
	op := w.operator
	op.Kill()
	w.procs = slices.DeleteFunc(w.procs, func(p *stack.Process) bool { return p == op })
	t.Logf("operator killed while db-0 was being bound to %s", to)
	w.operator = w.startOperator(staticOperatorArgs...)
	if node, ip := w.running("db-0", 2*time.Minute); ip != ips["db-0"] || node == nodes["db-0"] {
		t.Fatalf("db-0 on %s with %s; it was on %s with %s", node, ip, nodes["db-0"], ips["db-0"])
	}

	// The scheduler and extender killed mid-bind.
	w.cordon(nodes["db-1"])
	w.deletePod("db-1")
	to = w.asked("db-1", nodes["db-1"])
	w.sched.KubeScheduler.Kill()
	_ = w.sched.Stop()
	t.Logf("kube-scheduler killed and extender stopped while db-1 was being bound to %s", to)
	kc, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	w.startScheduler(kc)
	if node, ip := w.running("db-1", 2*time.Minute); ip != ips["db-1"] || node == nodes["db-1"] {
		t.Fatalf("db-1 on %s with %s; it was on %s with %s", node, ip, nodes["db-1"], ips["db-1"])
	}
	stop()
	if n := <-breaches; n != 0 {
		t.Errorf("%d breaches seen during the moves", n)
	}
	for pod, ip := range ips {
		if on := w.onENIs(ip); len(on) != 1 {
			t.Errorf("%s's %s on the ENIs of %v", pod, ip, on)
		}
	}
	w.onlyIPs(ips)
	w.checkPools(w.sim)
	if v := w.sim.Ledger().Violations(); v.Total() != 0 {
		t.Errorf("ledger: %+v %v", v, w.sim.Ledger().ViolationDetails())
	}
	w.releases()
}
