package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/room"
	"github.com/enipam/enipam/scheduler/tracker"
)

// fakeState plays the tracker: nodes as the test sets them, the holds
// filter places, and a change channel the test can fire.
type fakeState struct {
	mu      sync.Mutex
	synced  bool
	nodes   map[string]room.Node
	holds   map[types.UID][]string
	claims  map[string]room.Claim
	intents map[types.UID]waiting.Intent
	changed chan struct{}
}

func newFakeState(nodes ...room.Node) *fakeState {
	s := &fakeState{synced: true, nodes: map[string]room.Node{}, holds: map[types.UID][]string{},
		claims: map[string]room.Claim{}, intents: map[types.UID]waiting.Intent{}, changed: make(chan struct{})}
	for _, n := range nodes {
		s.nodes[n.Name] = n
	}
	return s
}

func (s *fakeState) Synced() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.synced }

func (s *fakeState) View(_ *corev1.Pod, names []string, _ time.Time) ([]room.Node, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]room.Node, len(names))
	for i, n := range names {
		out[i] = s.nodes[n]
		out[i].Name = n
	}
	return out, s.changed
}

func (s *fakeState) Hold(pod *corev1.Pod, nodes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[pod.UID] = nodes
}

func (s *fakeState) Claim(namespace, name string) (room.Claim, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.claims[namespace+"/"+name]
	return c, ok
}

func (s *fakeState) Intent(uid types.UID) (waiting.Intent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.intents[uid]
	return i, ok
}

func (s *fakeState) Settled(node, owner string) (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.nodes[node].Pool; p != nil {
		return p.Settled[owner], s.changed
	}
	return "", s.changed
}

// set replaces a node and wakes the waiters, as a watch event does.
func (s *fakeState) set(n room.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[n.Name] = n
	close(s.changed)
	s.changed = make(chan struct{})
}

func newExtender(t *testing.T, s State, cfg Config) (*Extender, *prometheus.Registry) {
	t.Helper()
	e, reg, _ := newBindingExtender(t, s, cfg)
	return e, reg
}

// writer is an in-memory apiserver for the bind verb's writes: claims
// kept, Bindings recorded.
type writer struct {
	client.WithWatch
	mu      sync.Mutex
	bound   map[string]string // "namespace/name" → node
	patches int
	reads   int // CiliumNodes read
}

// readCiliumNodes counts the CiliumNodes read.
func (w *writer) readCiliumNodes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads
}

// patched counts the patches written.
func (w *writer) patched() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.patches
}

func (w *writer) bindings() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.bound)
}

func newBindingExtender(t *testing.T, s State, cfg Config) (*Extender, *prometheus.Registry, *writer) {
	t.Helper()
	scheme, err := tracker.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{bound: map[string]string{}}
	w.WithWatch = fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*ciliumv2.CiliumNode); ok {
				w.mu.Lock()
				w.reads++
				w.mu.Unlock()
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.mu.Lock()
			w.patches++
			w.mu.Unlock()
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceCreate: func(_ context.Context, _ client.Client, sub string, obj client.Object, sr client.Object, _ ...client.SubResourceCreateOption) error {
			b, ok := sr.(*corev1.Binding)
			if sub != "binding" || !ok {
				return fmt.Errorf("unexpected subresource %s", sub)
			}
			w.mu.Lock()
			w.bound[obj.GetNamespace()+"/"+obj.GetName()] = b.Target.Name
			w.mu.Unlock()
			return nil
		},
	}).Build()
	reg := prometheus.NewRegistry()
	e, err := New(s, w, cfg, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return e, reg, w
}

func podNamed(name string, hostNetwork bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{HostNetwork: hostNetwork},
	}
}

func names(n ...string) *[]string { return &n }

var (
	atCapacity = &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 27,
		Reason: "instance at capacity: 3/3 ENIs attached, usable ENIs full (10 addresses each)"}
	growable = &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 4, CanGrow: true}
)

// cluster of four nodes: one with a free address, one full at capacity,
// one that can grow, one without a CiliumNode.
func cluster() *fakeState {
	return newFakeState(
		room.Node{Name: "free", Pool: &room.Pool{Size: 10, Free: 2}, Capacity: atCapacity},
		room.Node{Name: "full", Pool: &room.Pool{Size: 27}, Capacity: atCapacity},
		room.Node{Name: "grow", Pool: &room.Pool{Size: 4}, Capacity: growable},
		room.Node{Name: "bare"},
	)
}

// TestFilterKeepsNodesWithAnAddressAndSaysWhyOthersFail: the pod passes
// where an address is free or can come; the full node and the node
// without a CiliumNode are refused as unresolvable, each with its reason
// in words; the pod is held on the nodes it passed.
func TestFilterKeepsNodesWithAnAddressAndSaysWhyOthersFail(t *testing.T) {
	s := cluster()
	e, reg := newExtender(t, s, DefaultConfig())
	p := podNamed("web-1", false)
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: p, NodeNames: names("free", "full", "grow", "bare")})
	if res.Error != "" || !slices.Equal(*res.NodeNames, []string{"free", "grow"}) {
		t.Fatalf("filter: %+v", res)
	}
	if len(res.FailedNodes) != 0 {
		t.Errorf("refusals that preemption could resolve: %v", res.FailedNodes)
	}
	want := map[string]string{
		"full": "no free IP; instance at capacity: 3/3 ENIs attached, usable ENIs full (10 addresses each)",
		"bare": room.ReasonNoCiliumNode,
	}
	for n, reason := range want {
		if res.FailedAndUnresolvableNodes[n] != reason {
			t.Errorf("%s refused with %q, want %q", n, res.FailedAndUnresolvableNodes[n], reason)
		}
	}
	if !slices.Equal(s.holds[p.UID], []string{"free", "grow"}) {
		t.Errorf("held on %v", s.holds[p.UID])
	}
	if got := metricValue(t, reg, "enipam_scheduler_node_refusals_total", "reason", "no_ip"); got != 1 {
		t.Errorf("no_ip refusals %v", got)
	}
}

// TestHostNetworkPodsPassEverywhere: a pod on the host network takes no
// pool address; every node passes and scores alike, even before the
// caches are synced.
func TestHostNetworkPodsPassEverywhere(t *testing.T) {
	s := cluster()
	s.synced = false
	e, _ := newExtender(t, s, DefaultConfig())
	args := &extenderv1.ExtenderArgs{Pod: podNamed("agent", true), NodeNames: names("free", "full", "bare")}
	res := e.Filter(context.Background(), args)
	if res.Error != "" || len(*res.NodeNames) != 3 || len(res.FailedAndUnresolvableNodes) != 0 {
		t.Errorf("filter: %+v", res)
	}
	scores, err := e.Prioritize(context.Background(), args)
	if err != nil || len(scores) != 3 || scores[0].Score != scores[1].Score || scores[1].Score != scores[2].Score {
		t.Errorf("prioritize: %v %v", scores, err)
	}
}

// TestNothingIsPlacedBeforeTheCachesSync: until the first lists arrive,
// filter answers an error, so kube-scheduler retries the pod rather than
// place it blind.
func TestNothingIsPlacedBeforeTheCachesSync(t *testing.T) {
	s := cluster()
	s.synced = false
	e, _ := newExtender(t, s, DefaultConfig())
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: podNamed("web-1", false), NodeNames: names("free")})
	if res.Error != ErrNotSynced.Error() {
		t.Errorf("filter before sync: %+v", res)
	}
}

// TestPrioritizePrefersAnAddressNowOverGrowth: free now scores 10, can
// grow 3.
func TestPrioritizePrefersAnAddressNowOverGrowth(t *testing.T) {
	e, _ := newExtender(t, cluster(), DefaultConfig())
	got, err := e.Prioritize(context.Background(), &extenderv1.ExtenderArgs{Pod: podNamed("web-1", false), NodeNames: names("grow", "free")})
	want := extenderv1.HostPriorityList{{Host: "grow", Score: 3}, {Host: "free", Score: extenderv1.MaxExtenderPriority}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("prioritize = %v, %v; want %v", got, err, want)
	}
}

// TestFilterWaitsForJustPlacedPodsToBeSeen: the node's last free address
// is held by a pod the scheduler passed an instant ago. Filter waits for
// the watches to move instead of refusing: the held pod turns out bound
// elsewhere, the hold goes, and the node passes.
func TestFilterWaitsForJustPlacedPodsToBeSeen(t *testing.T) {
	s := newFakeState(room.Node{Name: "a", Pool: &room.Pool{Size: 27, Free: 1}, Capacity: atCapacity, Promised: 1, Held: 1, Young: 1})
	e, reg := newExtender(t, s, Config{SettleTimeout: 10 * time.Second})
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.set(room.Node{Name: "a", Pool: &room.Pool{Size: 27, Free: 1}, Capacity: atCapacity})
	}()
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: podNamed("web-2", false), NodeNames: names("a")})
	if !slices.Equal(*res.NodeNames, []string{"a"}) {
		t.Fatalf("filter: %+v", res)
	}
	if n := metricValue(t, reg, "enipam_scheduler_settle_waits_total"); n != 1 {
		t.Errorf("settle waits %v", n)
	}
}

// TestFilterRefusesOnceTheWaitIsOver: the held pod's placement is never
// seen within the settle timeout; the node is refused (the pod may well
// be there), and a node refused for lack of room is refused at once.
func TestFilterRefusesOnceTheWaitIsOver(t *testing.T) {
	s := newFakeState(
		room.Node{Name: "a", Pool: &room.Pool{Size: 27, Free: 1}, Capacity: atCapacity, Promised: 1, Held: 1, Young: 1},
		room.Node{Name: "full", Pool: &room.Pool{Size: 27}, Capacity: atCapacity},
	)
	e, _ := newExtender(t, s, Config{SettleTimeout: 50 * time.Millisecond})
	start := time.Now()
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: podNamed("web-2", false), NodeNames: names("a", "full")})
	if len(*res.NodeNames) != 0 || len(res.FailedAndUnresolvableNodes) != 2 {
		t.Fatalf("filter: %+v", res)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("returned after %v, before the settle timeout", d)
	}
	e2, _ := newExtender(t, newFakeState(room.Node{Name: "full", Pool: &room.Pool{Size: 27}, Capacity: atCapacity}), Config{SettleTimeout: time.Hour})
	done := make(chan struct{})
	go func() {
		e2.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: podNamed("web-3", false), NodeNames: names("full")})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("filter waited on a node that has no room whatever the holds")
	}
}

// TestHTTPSpeaksKubeSchedulersJSON: the verbs over HTTP, as
// kube-scheduler's extender client posts them: filter with a whole
// NodeList (nodeCacheCapable false) answers a NodeList; prioritize
// answers a host priority list; a body that does not decode is a 400;
// other methods and paths are not served; each call is counted.
func TestHTTPSpeaksKubeSchedulersJSON(t *testing.T) {
	e, reg, w := newBindingExtender(t, cluster(), DefaultConfig())
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	post := func(verb string, body []byte) *http.Response {
		t.Helper()
		resp, err := http.Post(srv.URL+"/"+verb, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	nodes := &corev1.NodeList{}
	for _, n := range []string{"free", "full"} {
		nodes.Items = append(nodes.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: podNamed("web-1", false), Nodes: nodes})

	resp := post(VerbFilter, body)
	var fr extenderv1.ExtenderFilterResult
	if err := json.NewDecoder(resp.Body).Decode(&fr); err != nil || resp.StatusCode != 200 {
		t.Fatalf("filter: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if fr.Nodes == nil || len(fr.Nodes.Items) != 1 || fr.Nodes.Items[0].Name != "free" || fr.NodeNames != nil || !strings.HasPrefix(fr.FailedAndUnresolvableNodes["full"], "no free IP") {
		t.Errorf("filter answer: %+v", fr)
	}

	resp = post(VerbPrioritize, body)
	var hp extenderv1.HostPriorityList
	if err := json.NewDecoder(resp.Body).Decode(&hp); err != nil || resp.StatusCode != 200 || len(hp) != 2 || hp[0].Score != 10 {
		t.Errorf("prioritize: %d %v %v", resp.StatusCode, hp, err)
	}
	resp.Body.Close()

	if resp = post(VerbFilter, []byte("{not json")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad body: %d", resp.StatusCode)
	}
	resp.Body.Close()
	bindBody, _ := json.Marshal(extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "web-1", PodUID: "uid-web-1", Node: "free"})
	resp = post(VerbBind, bindBody)
	var br extenderv1.ExtenderBindingResult
	if err := json.NewDecoder(resp.Body).Decode(&br); err != nil || resp.StatusCode != 200 || br.Error != "" {
		t.Errorf("bind: %d %+v %v", resp.StatusCode, br, err)
	}
	resp.Body.Close()
	if got := w.bindings(); len(got) != 1 || got["web/web-1"] != "free" {
		t.Errorf("bindings %v, want web/web-1 on free", got)
	}
	get, err := http.Get(srv.URL + "/" + VerbFilter)
	if err != nil || get.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET filter: %v %v", get.StatusCode, err)
	}
	get.Body.Close()

	for _, c := range []struct {
		verb, result string
		want         float64
	}{{"filter", "ok", 1}, {"prioritize", "ok", 1}, {"filter", "bad_request", 1}} {
		if got := metricValue(t, reg, "enipam_scheduler_requests_total", "verb", c.verb, "result", c.result); got != c.want {
			t.Errorf("requests{%s,%s} = %v", c.verb, c.result, got)
		}
	}
}

// metricValue reads one counter or gauge of reg, selected by name and
// label pairs; 0 if absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
					continue metric
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
