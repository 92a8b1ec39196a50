package demand_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/demand"
	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

var bg = context.Background()

// fixture is one test's namespace and a running Watch.
type fixture struct {
	t       *testing.T
	ns      string
	w       *demand.Watch
	mu      sync.Mutex
	changed map[string]int
}

func newFixture(t *testing.T, name string, opts demand.Options, before func(f *fixture)) *fixture {
	t.Helper()
	f := &fixture{t: t, ns: "demand-" + name, changed: map[string]int{}}
	if err := env.Client.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(bg, &corev1.Pod{}, client.InNamespace(f.ns), client.GracePeriodSeconds(0))
	})
	if before != nil {
		before(f)
	}
	f.w = demand.New(env.Client, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.w.OnChange(func(node string) {
		f.mu.Lock()
		f.changed[node]++
		f.mu.Unlock()
	})
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- f.w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch stopped with %v", err)
		}
	})
	f.eventually("the watch synced", f.w.HasSynced)
	return f
}

type podOpt func(*corev1.Pod)

func hostNetwork(p *corev1.Pod) { p.Spec.HostNetwork = true }
func static(p *corev1.Pod) {
	p.Annotations = map[string]string{enipamv1alpha1.StaticIPAnnotation: "true"}
}

// pod creates a pod bound to node ("" for none).
func (f *fixture) pod(name, node string, opts ...podOpt) *corev1.Pod {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	for _, o := range opts {
		o(p)
	}
	if err := env.Client.Create(bg, p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// started gives a pod its address, as its kubelet reports it.
func (f *fixture) started(p *corev1.Pod, ip string) {
	f.t.Helper()
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(p), p); err != nil {
		f.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	if err := env.Client.Status().Update(bg, p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(bg, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		f.t.Fatalf("%s never happened: %v", what, err)
	}
}

func (f *fixture) node(short string) string { return f.ns + "-" + short }

func (f *fixture) changes(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed[node]
}

func none(string) bool { return false }

// TestWaitingCountsBoundPodsThatTakeAPoolAddress: of the pods bound to a
// node without an address, the ordinary ones count; host-network pods
// (never in the watch), static-IP pods (their address is their own),
// unbound pods and pods of other nodes do not. A pod that got its address
// keeps counting until Cilium's agent lists it; a pod being deleted stops
// counting. Each change that matters is told for its node.
func TestWaitingCountsBoundPodsThatTakeAPoolAddress(t *testing.T) {
	f := newFixture(t, "count", demand.Options{StartedGrace: time.Hour, History: time.Hour, MaxArrivals: 16}, nil)
	n1, n2 := f.node("n1"), f.node("n2")
	web := f.pod("web", n1)
	f.pod("host", n1, hostNetwork)
	f.pod("db", n1, static)
	f.pod("later", "")
	f.pod("other", n2)
	f.eventually("web counted on n1, other on n2", func() bool {
		return f.w.Waiting(n1, none) == 1 && f.w.Waiting(n2, none) == 1
	})
	if got := len(f.w.Arrivals(n1, time.Hour)); got != 1 {
		t.Errorf("%d arrivals on n1, want 1 (web; not the host-network or static-IP pod)", got)
	}
	if f.changes(n1) == 0 {
		t.Error("no change told for n1")
	}

	// web gets its address: it left the watch but the agent has not listed
	// it yet.
	f.started(web, "10.9.0.10")
	f.eventually("web left the watch", func() bool {
		pods, _ := f.w.Counts()
		return pods == 2 // db and other; later is not bound, host on the host network
	})
	if got := f.w.Waiting(n1, none); got != 1 {
		t.Errorf("web started, not listed by the agent: n1 waits for %d, want 1", got)
	}
	listed := func(owner string) bool { return owner == f.ns+"/web" }
	if got := f.w.Waiting(n1, listed); got != 0 {
		t.Errorf("web listed by the agent: n1 waits for %d, want 0", got)
	}
	if got := f.w.Waiting(n1, none); got != 0 {
		t.Errorf("once listed, web is forgotten: n1 waits for %d, want 0", got)
	}

	// A pod being deleted before it started stops counting.
	gone := f.pod("gone", n1)
	f.eventually("gone counted", func() bool { return f.w.Waiting(n1, none) == 1 })
	before := f.changes(n1)
	if err := env.Client.Delete(bg, gone); err != nil { // the default grace period: a deletion mark first
		t.Fatal(err)
	}
	f.eventually("gone no longer counted", func() bool { return f.w.Waiting(n1, none) == 0 })
	if f.changes(n1) == before {
		t.Error("the deletion was not told")
	}
}

// TestPodsBoundBeforeTheWatchStartedAreDemandNotArrivals: a restarted
// operator counts the pods already waiting, but does not take them for a
// burst that just happened.
func TestPodsBoundBeforeTheWatchStartedAreDemandNotArrivals(t *testing.T) {
	var n string
	f := newFixture(t, "restart", demand.DefaultOptions(), func(f *fixture) {
		n = f.node("n1")
		for _, name := range []string{"a", "b", "c"} {
			f.pod(name, n)
		}
	})
	f.eventually("three pods waiting", func() bool { return f.w.Waiting(n, none) == 3 })
	if got := len(f.w.Arrivals(n, time.Hour)); got != 0 {
		t.Errorf("%d arrivals, want 0: the pods were bound before the watch started", got)
	}
	f.pod("d", n)
	f.eventually("d arrived", func() bool { return len(f.w.Arrivals(n, time.Hour)) == 1 })
}

// TestStartedPodsAreForgottenAfterTheGrace: a pod the agent never lists
// (its report lost, the pod gone) stops counting after the grace.
func TestStartedPodsAreForgottenAfterTheGrace(t *testing.T) {
	f := newFixture(t, "grace", demand.Options{StartedGrace: 500 * time.Millisecond, History: time.Hour, MaxArrivals: 16}, nil)
	n := f.node("n1")
	p := f.pod("web", n)
	f.eventually("web counted", func() bool { return f.w.Waiting(n, none) == 1 })
	f.started(p, "10.9.0.11")
	f.eventually("web forgotten after the grace", func() bool { return f.w.Waiting(n, none) == 0 })
}
