package schedtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/promcheck"
	"github.com/enipam/enipam/test/schedtest"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

var bg = context.Background()

// atCapacity is the operator's word on an instance whose three ENIs are
// attached and full.
func atCapacity() *enipamv1alpha1.NodeCapacity {
	return &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 27, CanGrow: false, AvailabilityZone: "us-east-1a",
		Reason: "instance at capacity: 3/3 ENIs attached, usable ENIs full (10 addresses each)"}
}

const reasonAtCapacity = "no free IP; instance at capacity: 3/3 ENIs attached, usable ENIs full (10 addresses each)"

// TestABurstLandsOnlyWhereAddressesAreOrCanCome: the real kube-scheduler
// 1.37.1 with the chart's configuration and the extender, five nodes
// written by hand as the operator and Cilium's agent would:
//
//   - full:    27 pool IPs, all used, instance at capacity (3 ENIs × 10);
//   - tight:   27 pool IPs, 3 free, instance at capacity;
//   - grow:    4 pool IPs, all used, can grow to 27;
//   - unknown: 2 pool IPs, both used, no capacity reported yet;
//   - bare:    no CiliumNode (not managed by Cilium).
//
// 30 pods are created at once. Exactly 26 are bound: 3 on tight (its free
// IPs are preferred over growth), 23 on grow (its room), none elsewhere.
// The 4 left Pending say why in their FailedScheduling event, node by
// node. Counts, not timings: the test waits for the outcome. The
// extender's scrape then holds every enipam_scheduler_ metric the chart's
// dashboard and alerts name.
func TestABurstLandsOnlyWhereAddressesAreOrCanCome(t *testing.T) {
	w := newWorld(t, "burst")
	w.node("full", pool{used: 27, capacity: atCapacity()})
	w.node("tight", pool{used: 24, free: 3, capacity: atCapacity()})
	w.node("grow", pool{used: 4, capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 4, CanGrow: true, AvailabilityZone: "us-east-1a"}})
	w.node("unknown", pool{used: 2})
	w.node("bare", pool{noCiliumNode: true})
	w.seenByExtender(map[string]int64{"full": 0, "tight": 10, "grow": 3, "unknown": 0, "bare": 0})

	w.pods("burst", 30, nil)
	w.eventually("26 pods bound and 4 refused", 2*time.Minute, func() bool {
		bound, refused := w.outcome()
		if bound > 26 {
			t.Fatalf("%d pods bound, beyond the 26 addresses there are or can come: %v", bound, w.placements())
		}
		return bound == 26 && refused == 4
	})
	if got, want := w.placements(), map[string]int{"tight": 3, "grow": 23}; !maps.Equal(got, want) {
		t.Errorf("pods per node %v, want %v", got, want)
	}
	for _, p := range w.pending() {
		msg := w.failedScheduling(p)
		for _, want := range []string{
			"2 " + reasonAtCapacity,
			"1 no free IP; the pool is at its maximum of 27 addresses, counting the pods already bound there",
			"1 no free IP; enipam-operator has not reported the node's capacity yet",
			"1 no CiliumNode: the node is not managed by Cilium, or its agent has not started",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("pod %s: FailedScheduling %q lacks %q", p, msg, want)
			}
		}
	}
	t.Logf("a pending pod's event: %s", w.failedScheduling(w.pending()[0]))
	if m, err := http.Get(w.sched.MetricsURL + "/metrics"); err == nil {
		var b bytes.Buffer
		_, _ = b.ReadFrom(m.Body)
		m.Body.Close()
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "enipam_scheduler_settle_waits_total") || strings.HasPrefix(l, "enipam_scheduler_node_refusals_total") || strings.HasPrefix(l, "enipam_scheduler_requests_total") {
				t.Log(l)
			}
		}
		checkChartNamesSchedulerMetrics(t, &b)
	} else {
		t.Errorf("scraping the extender: %v", err)
	}
	// Nothing more lands on a later attempt.
	if got := w.placements(); !maps.Equal(got, map[string]int{"tight": 3, "grow": 23}) {
		t.Errorf("pods per node at the end %v", got)
	}
}

// TestAPodNeverLandsOnAFullNodeButAHostNetworkPodDoes: a pod that can
// only go to a node at capacity with no free IP stays Pending, its event
// naming the capacity; a host-network pod needs no pool address and lands
// there. A pod that got its IP keeps it counted until Cilium's agent
// lists it: on a node whose one free IP went to a pod that just started,
// the next pod is refused; once the agent lists the pod and the pool gets
// another address, the next pod lands.
func TestAPodNeverLandsOnAFullNodeButAHostNetworkPodDoes(t *testing.T) {
	w := newWorld(t, "full")
	w.node("full", pool{used: 27, capacity: atCapacity()})
	w.node("one", pool{used: 26, free: 1, capacity: atCapacity()})
	w.seenByExtender(map[string]int64{"full": 0, "one": 10})

	w.pods("blocked", 1, pinned("full"))
	w.pods("host", 1, func(p *corev1.Pod) { pinned("full")(p); p.Spec.HostNetwork = true })
	w.eventually("the host-network pod bound and the other refused", time.Minute, func() bool {
		bound, refused := w.outcome()
		return bound == 1 && refused == 1
	})
	if n := w.boundTo("host-0"); n != "full" {
		t.Errorf("host-network pod on %q", n)
	}
	if msg := w.failedScheduling("blocked-0"); !strings.Contains(msg, "1 "+reasonAtCapacity) {
		t.Errorf("FailedScheduling %q lacks the node's capacity", msg)
	}

	// One free IP on "one": a pod takes it and starts.
	w.pods("first", 1, pinned("one"))
	w.eventually("the first pod bound", time.Minute, func() bool { return w.boundTo("first-0") == "one" })
	free := w.freeIP("one")
	w.started("first-0", free)
	w.refusedAtCapacity("second", "one")

	// The agent lists the first pod, the operator adds an address.
	w.cilium("one", func(cn *ciliumv2.CiliumNode) {
		cn.Status.IPAM.Used[free] = ipamtypes.AllocationIP{Owner: w.ns + "/first-0", Resource: "eni-1"}
	}, func(cn *ciliumv2.CiliumNode) {
		cn.Spec.IPAM.Pool["10.99.0.1"] = ipamtypes.AllocationIP{Resource: "eni-1"}
	})
	w.seenByExtender(map[string]int64{"one": 10})
	w.pods("third", 1, pinned("one"))
	w.eventually("the third pod bound", time.Minute, func() bool { return w.boundTo("third-0") == "one" })
}

// TestARecreatedPodIsNotTakenForItsPredecessor: node "one" has a single
// free address, and Cilium's agent still lists one of its used addresses
// for web-0: the earlier pod of that name, force-deleted, whose sandbox
// the kubelet has not torn down yet (the agent names the owner
// namespace/name, without the pod's UID). web-0 is recreated and bound
// to one: it has no address yet and takes the free one. Another pod
// pinned to one is refused for want of a free address, not bound there.
func TestARecreatedPodIsNotTakenForItsPredecessor(t *testing.T) {
	w := newWorld(t, "reused")
	w.node("one", pool{used: 26, free: 1, capacity: atCapacity()})
	w.cilium("one", func(cn *ciliumv2.CiliumNode) {
		for ip := range cn.Status.IPAM.Used {
			cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: w.ns + "/web-0", Resource: "eni-1"}
			break
		}
	}, func(*ciliumv2.CiliumNode) {})
	w.seenByExtender(map[string]int64{"one": 10})

	w.pods("web", 1, pinned("one"))
	w.eventually("the recreated web-0 bound", time.Minute, func() bool { return w.boundTo("web-0") == "one" })
	w.refusedAtCapacity("second", "one")
}

// refusedAtCapacity creates pod prefix-0 pinned to node short and waits
// until it is refused there for the node's capacity, never bound: the
// node's free addresses are all promised.
func (w *world) refusedAtCapacity(prefix, short string) {
	w.t.Helper()
	w.pods(prefix, 1, pinned(short))
	pod := prefix + "-0"
	w.eventually(pod+" refused", time.Minute, func() bool { return w.failedScheduling(pod) != "" })
	if msg := w.failedScheduling(pod); !strings.Contains(msg, reasonAtCapacity) {
		w.t.Errorf("%s: FailedScheduling %q", pod, msg)
	}
	if n := w.boundTo(pod); n != "" {
		w.t.Fatalf("%s bound to %s, whose free addresses are all promised", pod, n)
	}
}

// pool is how a test node's addresses stand.
type pool struct {
	used, free   int
	noCiliumNode bool
	capacity     *enipamv1alpha1.NodeCapacity
}

// world is one test's scheduler and nodes, in a namespace of its own;
// its pods select its nodes by label.
type world struct {
	t     *testing.T
	name  string
	ns    string
	nodes []string
	sched *schedtest.Scheduler
	logs  *lockedBuffer
	mu    sync.Mutex
	ips   int
}

// newWorld renders the chart for a release in a fresh namespace (the
// Lease goes there) and starts kube-scheduler and the extender with it.
func newWorld(t *testing.T, name string) *world {
	t.Helper()
	w := &world{t: t, name: name, ns: fmt.Sprintf("schedtest-%s-%d", name, time.Now().UnixNano()%1e6), logs: &lockedBuffer{}}
	if err := env.Client.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}); err != nil {
		t.Fatal(err)
	}
	parts, err := schedtest.Render(bg, w.ns)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w.sched, err = schedtest.Start(bg, parts, schedtest.Options{Kubeconfig: kubeconfig, BinDir: env.BinDir, Dir: dir, Log: w.logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-scheduler:\n%s", w.sched.KubeScheduler.Tail(60))
			t.Logf("extender:\n%s", tail(w.logs.String(), 60))
			t.Logf("FailedScheduling events: %v", w.events())
		}
		if err := w.sched.Stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
		var pods corev1.PodList
		_ = env.Client.List(bg, &pods, client.InNamespace(w.ns))
		for i := range pods.Items {
			_ = env.Client.Delete(bg, &pods.Items[i], client.GracePeriodSeconds(0))
		}
		for _, n := range w.nodes {
			_ = env.Client.Delete(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
			_ = env.Client.Delete(bg, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: n}})
			_ = env.Client.Delete(bg, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	return w
}

func (w *world) nodeName(short string) string { return w.name + "-" + short }

// node creates a Node with room for 110 pods, and its CiliumNode and
// NodeRouting as the pool says.
func (w *world) node(short string, p pool) {
	w.t.Helper()
	name := w.nodeName(short)
	w.nodes = append(w.nodes, name)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "enipam.io/schedtest": w.name,
	}}}
	w.create(node)
	// The apiserver taints a new Node not-ready (TaintNodesByCondition);
	// with no node lifecycle controller here, the test lifts it.
	node.Spec.Taints = nil
	if err := env.Client.Update(bg, node); err != nil {
		w.t.Fatal(err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	node.Status.Capacity, node.Status.Allocatable = room, room
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(bg, node); err != nil {
		w.t.Fatal(err)
	}
	if !p.noCiliumNode {
		cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		w.create(cn)
		used, pool := ipamtypes.AllocationMap{}, ipamtypes.AllocationMap{}
		for i := range p.used + p.free {
			ip := w.nextIP()
			pool[ip] = ipamtypes.AllocationIP{Resource: "eni-1"}
			if i < p.used {
				used[ip] = ipamtypes.AllocationIP{Owner: fmt.Sprintf("other/pod-%d", i), Resource: "eni-1"}
			}
		}
		// Status first, as the agent and the operator write it; each write
		// returns the stored object.
		w.cilium(short, func(cn *ciliumv2.CiliumNode) { cn.Status.IPAM.Used = used }, func(cn *ciliumv2.CiliumNode) { cn.Spec.IPAM.Pool = pool })
	}
	if p.capacity != nil {
		w.create(&enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: enipamv1alpha1.NodeRoutingSpec{Capacity: p.capacity}})
	}
}

func (w *world) nextIP() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ips++
	return fmt.Sprintf("10.%d.%d.%d", len(w.name), w.ips/250, w.ips%250+1)
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := env.Client.Create(bg, obj); err != nil {
		w.t.Fatal(err)
	}
}

// cilium applies a status change, then a spec change, to a CiliumNode.
func (w *world) cilium(short string, status, spec func(*ciliumv2.CiliumNode)) {
	w.t.Helper()
	cn := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: w.nodeName(short)}, cn); err != nil {
		w.t.Fatal(err)
	}
	status(cn)
	if err := env.Client.Status().Update(bg, cn); err != nil {
		w.t.Fatal(err)
	}
	spec(cn)
	if err := env.Client.Update(bg, cn); err != nil {
		w.t.Fatal(err)
	}
}

// freeIP returns a pool address of the node that no one uses.
func (w *world) freeIP(short string) string {
	w.t.Helper()
	cn := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: w.nodeName(short)}, cn); err != nil {
		w.t.Fatal(err)
	}
	for ip := range cn.Spec.IPAM.Pool {
		if _, used := cn.Status.IPAM.Used[ip]; !used {
			return ip
		}
	}
	w.t.Fatalf("no free IP on %s", short)
	return ""
}

// started gives a pod its IP, as the kubelet reports it once the sandbox
// runs.
func (w *world) started(pod, ip string) {
	w.t.Helper()
	p := &corev1.Pod{}
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: w.ns, Name: pod}, p); err != nil {
		w.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if err := env.Client.Status().Update(bg, p); err != nil {
		w.t.Fatal(err)
	}
}

// seenByExtender waits until the extender's caches show each node with
// the given score, asking prioritize (which holds nothing) for a pod that
// does not exist.
func (w *world) seenByExtender(scores map[string]int64) {
	w.t.Helper()
	var names []string
	for short := range scores {
		names = append(names, w.nodeName(short))
	}
	body, _ := json.Marshal(extenderv1.ExtenderArgs{
		Pod:       &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "probe", UID: types.UID(w.ns + "-probe")}},
		NodeNames: &names,
	})
	var last extenderv1.HostPriorityList
	defer func() {
		if w.t.Failed() {
			w.t.Logf("last prioritize answer: %+v", last)
		}
	}()
	w.eventually("the extender to see the nodes", 30*time.Second, func() bool {
		resp, err := http.Post(w.sched.URL+"/prioritize", "application/json", bytes.NewReader(body))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		last = nil
		if json.NewDecoder(resp.Body).Decode(&last) != nil {
			return false
		}
		for _, h := range last {
			if h.Score != scores[strings.TrimPrefix(h.Host, w.name+"-")] {
				return false
			}
		}
		return len(last) == len(scores)
	})
}

// pods creates n pods for enipam-scheduler at once, selecting the
// world's nodes, each changed by mutate if set.
func (w *world) pods(prefix string, n int, mutate func(*corev1.Pod)) {
	w.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: corev1.PodSpec{
				SchedulerName: "enipam-scheduler",
				NodeSelector:  map[string]string{"enipam.io/schedtest": w.name},
				Containers:    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if mutate != nil {
			mutate(p)
			if v, ok := p.Spec.NodeSelector["kubernetes.io/hostname"]; ok {
				p.Spec.NodeSelector["kubernetes.io/hostname"] = w.nodeName(v)
			}
		}
		wg.Go(func() {
			if err := env.Client.Create(bg, p); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		w.t.Fatal(err)
	}
}

// pinned restricts a pod to one node of the world.
func pinned(short string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector["kubernetes.io/hostname"] = short }
}

func (w *world) list() []corev1.Pod {
	var pods corev1.PodList
	if err := env.Client.List(bg, &pods, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	return pods.Items
}

// placements counts the world's pods per node (short names).
func (w *world) placements() map[string]int {
	out := map[string]int{}
	for _, p := range w.list() {
		if p.Spec.NodeName != "" {
			out[strings.TrimPrefix(p.Spec.NodeName, w.name+"-")]++
		}
	}
	return out
}

// boundTo returns the short name of the pod's node, "" if unbound.
func (w *world) boundTo(pod string) string {
	p := &corev1.Pod{}
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: w.ns, Name: pod}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return ""
		}
		w.t.Fatal(err)
	}
	return strings.TrimPrefix(p.Spec.NodeName, w.name+"-")
}

// pending lists the unbound pods.
func (w *world) pending() []string {
	var out []string
	for _, p := range w.list() {
		if p.Spec.NodeName == "" {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// outcome counts bound pods, and unbound pods with a FailedScheduling
// event.
func (w *world) outcome() (bound, refused int) {
	events := w.events()
	for _, p := range w.list() {
		switch {
		case p.Spec.NodeName != "":
			bound++
		case events[p.Name] != "":
			refused++
		}
	}
	return bound, refused
}

// events maps each pod to the note of its latest FailedScheduling event.
func (w *world) events() map[string]string {
	var list eventsv1.EventList
	if err := env.Client.List(bg, &list, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]string{}
	latest := map[string]time.Time{}
	for _, e := range list.Items {
		if e.Reason != "FailedScheduling" {
			continue
		}
		at := e.EventTime.Time
		if e.Series != nil {
			at = e.Series.LastObservedTime.Time
		}
		if name := e.Regarding.Name; !at.Before(latest[name]) {
			out[name], latest[name] = e.Note, at
		}
	}
	return out
}

func (w *world) failedScheduling(pod string) string { return w.events()[pod] }

func (w *world) eventually(what string, timeout time.Duration, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			bound, refused := w.outcome()
			w.t.Fatalf("timed out waiting for %s (bound %d, refused %d, per node %v)", what, bound, refused, w.placements())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// checkChartNamesSchedulerMetrics holds the enipam_scheduler_ metrics the
// chart's dashboard and alert rules name (rendered by helm, parsed with
// Prometheus's parser) to the extender's scrape.
func checkChartNamesSchedulerMetrics(t *testing.T, scrape io.Reader) {
	t.Helper()
	scraped, err := promcheck.Parse(scrape)
	if err != nil {
		t.Fatal(err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	queries, err := promcheck.Render(promcheck.RepoPaths(root))
	if err != nil {
		t.Fatal(err)
	}
	used, err := promcheck.AllMetrics(queries)
	if err != nil {
		t.Fatal(err)
	}
	for n := range used {
		if !strings.HasPrefix(n, "enipam_scheduler_") {
			delete(used, n)
		}
	}
	missing := promcheck.Missing(used, scraped)
	t.Logf("%d enipam_scheduler_ metrics named by the chart, %d missing from the extender's scrape", len(used), len(missing))
	if len(used) == 0 {
		t.Error("the chart names no enipam_scheduler_ metric")
	}
	for _, m := range missing {
		t.Errorf("named by the chart but not in the extender's scrape: %s", m)
	}
}
