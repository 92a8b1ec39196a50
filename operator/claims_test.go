package operator_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/operator/claimcontroller"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/gc"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/poolcontroller"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// staticScenario: three m5.large (3 ENIs × 10 addresses) in us-east-1a
// and one in us-east-1b, a tagged pod subnet per zone; pods stay off the
// primary ENI.
const staticScenario = `
account: "123456789012"
region: us-east-1
seed: 13
zones: [us-east-1a, us-east-1b]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, name: nodes-a, cidr: 10.0.0.0/24, zone: us-east-1a}
  - {id: subnet-0a000000000000002, name: pods-a, cidr: 10.0.16.0/20, zone: us-east-1a, tags: {pods: "true"}}
  - {id: subnet-0b000000000000001, name: nodes-b, cidr: 10.0.1.0/24, zone: us-east-1b}
  - {id: subnet-0b000000000000002, name: pods-b, cidr: 10.0.32.0/20, zone: us-east-1b, tags: {pods: "true"}}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0a000000000000002, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0a000000000000003, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0b000000000000001, type: m5.large, subnet: nodes-b, securityGroups: [nodes]}
`

// staticNodes are the scenario's nodes: name → instance and zone.
var staticNodes = []struct{ name, instance, zone string }{
	{"node-1", "i-0a000000000000001", "us-east-1a"},
	{"node-2", "i-0a000000000000002", "us-east-1a"},
	{"node-3", "i-0a000000000000003", "us-east-1a"},
	{"node-b", "i-0b000000000000001", "us-east-1b"},
}

// staticWorld is EC2 (ec2sim's state behind the in-memory cloud), an
// in-memory apiserver, and every node's two agents played step by step.
type staticWorld struct {
	t *testing.T
	// lives counts the operator's runs (start).
	lives int
	state *ec2sim.State
	cloud *cloudfake.Cloud
	c     client.WithWatch
	// used are the addresses each node's pods hold: node → ip → owner.
	used map[string]map[string]string
	// failSpecOf, when set, refuses the operator's next spec patch of
	// that CiliumNode (its status patch goes through).
	failSpecOf string
	// api, when set, stands between the operator and cloud.
	api cloud.API
	// recorder keeps the claim controller's events.
	recorder *events.FakeRecorder
	// slowHandshake: Cilium's agent of these nodes has not made its next
	// CiliumNode write yet, so it answers no mark for release and drops
	// no released entry.
	slowHandshake map[string]bool
	// endpointRoutes: these nodes' Cilium runs with endpoint routes, so
	// their enipam-agent can tell an address no endpoint holds
	// (answering the NodeRouting's endpoint queries); quiet: the
	// enipam-agent of these nodes answers none.
	endpointRoutes, quiet map[string]bool
	// failQueriesOf, when set, refuses the operator's next change of that
	// NodeRouting's endpoint queries.
	failQueriesOf string
}

func newStaticWorld(t *testing.T) *staticWorld {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(staticScenario))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ec2sim.NewState(sc, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	w := &staticWorld{t: t, state: st, cloud: cloudfake.New(st), used: map[string]map[string]string{}, recorder: events.NewFakeRecorder(1000),
		slowHandshake: map[string]bool{}, endpointRoutes: map[string]bool{}, quiet: map[string]bool{}}
	objs := []client.Object{&enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Spec: enipamv1alpha1.ENIPolicySpec{
		FirstInterfaceIndex: i32(1), SubnetTags: map[string]string{"pods": "true"},
	}}}
	for _, n := range staticNodes {
		w.used[n.name] = map[string]string{}
		objs = append(objs,
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, UID: k8stypes.UID("uid-" + n.name)},
				Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", n.zone, n.instance)}},
			&ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: n.name, UID: k8stypes.UID("uid-cn-" + n.name)},
				Spec: ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{PreAllocate: 4}}})
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, idx := range claims.Indexes() {
		b = b.WithIndex(idx.Object, idx.Field, idx.Extract)
	}
	w.c = b.WithStatusSubresource(&ciliumv2.CiliumNode{}, &enipamv1alpha1.NodeRouting{}, &enipamv1alpha1.ENIPolicy{}, &enipamv1alpha1.StaticIPClaim{}).
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if cn, ok := obj.(*ciliumv2.CiliumNode); ok && w.failSpecOf == cn.Name {
					w.failSpecOf = ""
					return errors.New("spec patch lost")
				}
				if nr, ok := obj.(*enipamv1alpha1.NodeRouting); ok {
					return w.patchWithGeneration(ctx, c, nr, patch, opts...)
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	return w
}

// staticLife is one run of the operator: a fresh inventory, pool
// controller and claim controller, as after a restart.
type staticLife struct {
	pools  *poolcontroller.Reconciler
	claims *claimcontroller.Reconciler
	// gc collects leaked Elastic IPs on first sight.
	gc     *gc.Collector
	inv    *inventory.Inventory
	cancel context.CancelFunc
	// reg holds the pool controller's metrics.
	reg *prometheus.Registry
}

func (w *staticWorld) start() *staticLife {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w.t.Cleanup(cancel)
	api, inv, _, log := startProcess(ctx, w.t, w.cloud, w.api)
	reg := prometheus.NewRegistry()
	m, err := poolcontroller.NewMetrics(reg)
	if err != nil {
		w.t.Fatal(err)
	}
	// Each run is a term of its own, as a restarted process is.
	w.lives++
	term := fmt.Sprintf("life-%d", w.lives)
	opts := interruptOptions()
	opts.Term = term
	pools := poolcontroller.New(w.c, api, inv, events.NewFakeRecorder(1000), m, opts, log)
	claims := claimcontroller.New(w.c, api, inv, w.recorder, claimcontroller.Options{Cluster: "test", PublicIPRetry: 50 * time.Millisecond, Term: term}, log)
	collector, err := gc.New(api, inv, w.c, gc.Options{Cluster: "test", MaxPerPass: 25, MinAge: time.Nanosecond}, prometheus.NewRegistry(), log)
	if err != nil {
		w.t.Fatal(err)
	}
	return &staticLife{pools: pools, claims: claims, gc: collector, inv: inv, cancel: cancel, reg: reg}
}

// step runs one reconcile of every claim and every node, then one step
// of every node's agents, checking the invariants after each write.
func (w *staticWorld) step(l *staticLife) {
	w.t.Helper()
	ctx := context.Background()
	var claims enipamv1alpha1.StaticIPClaimList
	if err := w.c.List(ctx, &claims); err != nil {
		w.t.Fatal(err)
	}
	for _, c := range claims.Items {
		_, _ = l.claims.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
	}
	for _, n := range staticNodes {
		_, _ = l.pools.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: n.name}})
		w.invariants()
	}
	for _, n := range staticNodes {
		w.agentStep(n.name)
	}
	w.invariants()
}

// untilSteps and untilTime bound a wait that steps a world (patience):
// it gives up only once both are spent. The steps are the bound that
// matters (what the world does is counted in steps); the time keeps a
// step's real-time waits (graces of a second or two) covered where
// steps are fast (300 take about 10 s on an idle machine), and keeps a
// loaded machine, where a step takes ten times as long, from failing a
// test on its speed.
const (
	untilSteps = 300
	untilTime  = 15 * time.Second
)

// patience counts a wait's steps against untilSteps and untilTime.
type patience struct {
	steps    int
	deadline time.Time
}

func newPatience() *patience { return &patience{deadline: time.Now().Add(untilTime)} }

// spent counts a step and reports whether the wait is to give up: both
// its steps and its time are spent.
func (p *patience) spent() bool {
	p.steps++
	return p.steps > untilSteps && time.Now().After(p.deadline)
}

// until steps until done, giving up once its patience is spent.
func (w *staticWorld) until(l *staticLife, what string, done func() bool) {
	w.t.Helper()
	for p := newPatience(); !p.spent(); {
		if done() {
			return
		}
		w.step(l)
		time.Sleep(20 * time.Millisecond)
	}
	if !done() {
		w.t.Fatalf("never happened: %s; pools: %s", what, w.describe())
	}
}

// agentStep plays node's Cilium agent (status.ipam.used from w.used; the
// handshake: ready for a marked address no pod holds, do-not-release for
// one held, released entries dropped once out of the pool) and its
// enipam-agent (routed: what status.eni.enis lists on attached ENIs).
func (w *staticWorld) agentStep(node string) {
	ctx := context.Background()
	cn := w.node(node)
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	for ip, owner := range w.used[node] {
		cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: owner}
	}
	for ip, st := range cn.Status.IPAM.ReleaseIPs {
		_, inPool := cn.Spec.IPAM.Pool[ip]
		_, held := w.used[node][ip]
		switch {
		case w.slowHandshake[node]:
		case st == ipamoption.IPAMMarkForRelease && (held || !inPool):
			cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMDoNotRelease
		case st == ipamoption.IPAMMarkForRelease:
			cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMReadyForRelease
		case st == ipamoption.IPAMReleased && !inPool:
			delete(cn.Status.IPAM.ReleaseIPs, ip)
		}
	}
	if err := w.c.Status().Update(ctx, cn); err != nil {
		w.t.Fatal(err)
	}
	nr := &enipamv1alpha1.NodeRouting{}
	if err := w.c.Get(ctx, client.ObjectKey{Name: node}, nr); err != nil {
		return
	}
	attached := map[string]bool{}
	for _, e := range w.state.Dump().NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.Status == "attached" {
			attached[e.NetworkInterfaceID] = true
		}
	}
	nr.Status.ENIs = agentsim.Routed(cn, &nr.Spec, func(id string) bool { return attached[id] })
	if !w.quiet[node] {
		nr.Status.Endpoints = w.endpoints(node, nr)
		nr.Status.Remaps = w.remaps(nr)
	}
	if err := w.c.Status().Update(ctx, nr); err != nil {
		w.t.Fatal(err)
	}
}

// allocate plays a pod's CNI ADD on node as Cilium's agent answers it
// (nodeStore.allocateNext): the entry stamped with owner, else any free
// one. It returns the address.
func (w *staticWorld) allocate(node, owner string) string {
	w.t.Helper()
	cn := w.node(node)
	for ip, e := range cn.Spec.IPAM.Pool {
		if e.Owner == owner {
			w.used[node][ip] = owner
			return ip
		}
	}
	for ip, e := range cn.Spec.IPAM.Pool {
		_, held := w.used[node][ip]
		_, leaving := cn.Status.IPAM.ReleaseIPs[ip]
		if e.Owner == "" && !held && !leaving {
			w.used[node][ip] = owner
			return ip
		}
	}
	w.t.Fatalf("no address for %s on %s", owner, node)
	return ""
}

// release plays a pod's CNI DEL.
func (w *staticWorld) release(node, owner string) {
	for ip, o := range w.used[node] {
		if o == owner {
			delete(w.used[node], ip)
		}
	}
}

func (w *staticWorld) node(name string) *ciliumv2.CiliumNode {
	w.t.Helper()
	cn := &ciliumv2.CiliumNode{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: name}, cn); err != nil {
		w.t.Fatal(err)
	}
	return cn
}

func (w *staticWorld) claim(name string) *enipamv1alpha1.StaticIPClaim {
	w.t.Helper()
	c := &enipamv1alpha1.StaticIPClaim{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, c); err != nil {
		w.t.Fatal(err)
	}
	return c
}

// createClaim creates a claim as a user or enipam-scheduler would.
func (w *staticWorld) createClaim(name string, spec enipamv1alpha1.StaticIPClaimSpec) {
	w.t.Helper()
	if spec.ReclaimPolicy == "" {
		spec.ReclaimPolicy = enipamv1alpha1.ReclaimRetain
	}
	c := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: spec}
	if err := w.c.Create(context.Background(), c); err != nil {
		w.t.Fatal(err)
	}
}

// target writes spec.nodeName as enipam-scheduler's bind verb does.
func (w *staticWorld) target(name, node string) {
	w.t.Helper()
	c := w.claim(name)
	orig := c.DeepCopy()
	c.Spec.NodeName = node
	if err := w.c.Patch(context.Background(), c, client.MergeFrom(orig)); err != nil {
		w.t.Fatal(err)
	}
}

// pod creates or deletes the pod of a claim's name, bound to node.
func (w *staticWorld) pod(name, node string, exists bool) {
	w.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	var err error
	if exists {
		err = w.c.Create(context.Background(), p)
	} else {
		err = w.c.Delete(context.Background(), p)
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

// stampedOn returns the node whose pool stamps owner's address, and the
// address, once the stamp holds (no handshake entry).
func (w *staticWorld) stampedOn(owner string) (string, string) {
	for _, n := range staticNodes {
		cn := w.node(n.name)
		for ip, e := range cn.Spec.IPAM.Pool {
			if _, hs := cn.Status.IPAM.ReleaseIPs[ip]; e.Owner == owner && !hs {
				return n.name, ip
			}
		}
	}
	return "", ""
}

// eniHolding returns the ENI and instance EC2 has ip on.
func (w *staticWorld) eniHolding(ip string) (eni, instance string, count int) {
	for _, e := range w.state.Dump().NetworkInterfaces {
		for _, a := range e.PrivateIPAddresses {
			if a.PrivateIPAddress == ip {
				eni, count = e.NetworkInterfaceID, count+1
				if e.Attachment != nil {
					instance = e.Attachment.InstanceID
				}
			}
		}
	}
	return eni, instance, count
}

// invariants checks what must hold at every moment: no address in two
// pools or on two ENIs; a stamped address in the pool of the node whose
// ENI holds it or, while it moves, in no pool at all once off its old
// ENI; every free ordinary pool address on its ENI of the node's
// instance; no two pods holding one address.
func (w *staticWorld) invariants() {
	w.t.Helper()
	where := map[string]string{} // ip → instance
	eniOf := map[string]string{}
	for _, e := range w.state.Dump().NetworkInterfaces {
		ips := make([]string, 0, len(e.PrivateIPAddresses))
		for _, a := range e.PrivateIPAddresses {
			ips = append(ips, a.PrivateIPAddress)
		}
		for _, p := range e.IPv4Prefixes {
			pfx := netip.MustParsePrefix(p.IPv4Prefix)
			for ip := pfx.Masked().Addr(); pfx.Contains(ip); ip = ip.Next() {
				ips = append(ips, ip.String())
			}
		}
		for _, ip := range ips {
			if other, dup := eniOf[ip]; dup {
				w.t.Errorf("%s on %s and %s in EC2", ip, other, e.NetworkInterfaceID)
			}
			eniOf[ip] = e.NetworkInterfaceID
			if e.Attachment != nil {
				where[ip] = e.Attachment.InstanceID
			}
		}
	}
	inPool := map[string]string{}
	holders := map[string]string{}
	for _, n := range staticNodes {
		cn := w.node(n.name)
		for ip, e := range cn.Spec.IPAM.Pool {
			if other, dup := inPool[ip]; dup {
				w.t.Errorf("%s in the pools of %s and %s", ip, other, n.name)
			}
			inPool[ip] = n.name
			_, hs := cn.Status.IPAM.ReleaseIPs[ip]
			_, held := w.used[n.name][ip]
			if where[ip] != n.instance && !hs && (e.Owner != "" || !held) {
				w.t.Errorf("%s in %s's pool (owner %q) is on %q of instance %q in EC2", ip, n.name, e.Owner, eniOf[ip], where[ip])
			}
		}
		for ip, owner := range w.used[n.name] {
			if other, dup := holders[ip]; dup {
				w.t.Errorf("%s held by %s and by %s on %s", ip, other, owner, n.name)
			}
			holders[ip] = owner
		}
	}
	if f := w.publicIPs(false); f.Total() != 0 {
		w.t.Errorf("Elastic IPs: %s: %v", f, f.Details)
	}
}

func (w *staticWorld) describe() string {
	out := ""
	for _, n := range staticNodes {
		cn := w.node(n.name)
		stamped := map[string]string{}
		for ip, e := range cn.Spec.IPAM.Pool {
			if e.Owner != "" {
				stamped[ip] = e.Owner
			}
		}
		out += fmt.Sprintf("\n  %s: pool %d stamped %v release %v status %q", n.name, len(cn.Spec.IPAM.Pool), stamped, cn.Status.IPAM.ReleaseIPs, cn.Status.IPAM.OperatorStatus.Error)
	}
	var claims enipamv1alpha1.StaticIPClaimList
	_ = w.c.List(context.Background(), &claims)
	for _, c := range claims.Items {
		r := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady)
		msg := ""
		if r != nil {
			msg = r.Reason + ": " + r.Message
		}
		out += fmt.Sprintf("\n  claim %s: %s %s on %s (%s) %s", c.Name, c.Status.Phase, c.Status.Address, c.Status.NodeName, c.Spec.NodeName, msg)
	}
	return out
}

// converge steps until every node's pool holds 4 free addresses.
func (w *staticWorld) converge(l *staticLife) {
	w.t.Helper()
	w.until(l, "every pool holds 4 free addresses", func() bool {
		for _, n := range staticNodes {
			if free(w.node(n.name)) < 4 {
				return false
			}
		}
		return true
	})
}

// placed places a first claim default/db-0 on node-1 and starts its pod
// there: the operator stamps a free address of node-1.
func (w *staticWorld) placed(l *staticLife) string {
	w.t.Helper()
	w.converge(l)
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{})
	w.target("db-0", "node-1")
	w.until(l, "db-0 bound on node-1", func() bool {
		node, _ := w.stampedOn("default/db-0")
		return node == "node-1" && w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound
	})
	_, ip := w.stampedOn("default/db-0")
	w.pod("db-0", "node-1", true)
	if got := w.allocate("node-1", "default/db-0"); got != ip {
		w.t.Fatalf("db-0 got %s, want its stamped %s", got, ip)
	}
	return ip
}

// moved checks the end of a move of ip to node: stamped there, on that
// node's instance only, in no other pool.
func (w *staticWorld) moved(ip, node, instance string) {
	w.t.Helper()
	if n, got := w.stampedOn("default/db-0"); n != node || got != ip {
		w.t.Fatalf("db-0 stamped on %q with %q, want %s with %s:%s", n, got, node, ip, w.describe())
	}
	if _, in, count := w.eniHolding(ip); in != instance || count != 1 {
		w.t.Errorf("%s on instance %q (%d ENIs), want %s only", ip, in, count, instance)
	}
	if c := w.claim("db-0"); c.Status.Phase != enipamv1alpha1.ClaimBound || c.Status.Address != ip || c.Status.NodeName != node {
		w.t.Errorf("claim status %s %s on %s, want Bound %s on %s", c.Status.Phase, c.Status.Address, c.Status.NodeName, ip, node)
	}
}

// TestStaticIPFollowsItsPodToAnotherNode: db-0's address, stamped on
// node-1 and held by its pod, stays while the pod exists there; once the
// pod is gone and the claim asks for node-2, it leaves node-1's pool
// through the handshake, moves in EC2 to node-2's ENI, is routed there,
// and is stamped in node-2's pool; the new pod gets it. At no step is it
// in two pools, or on node-2 while node-1's pool lists it. Nodes: m5.large,
// first interface index 1, pre-allocate 4.
func TestStaticIPFollowsItsPodToAnotherNode(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)

	w.target("db-0", "node-2")
	for range 5 {
		w.step(l)
	}
	if n, _ := w.stampedOn("default/db-0"); n != "node-1" {
		t.Fatalf("db-0's address left node-1 while its pod runs there:%s", w.describe())
	}
	if r := meta.FindStatusCondition(w.claim("db-0").Status.Conditions, enipamv1alpha1.ClaimReady); r == nil || r.Reason != enipamv1alpha1.ReasonWaitingForOldPod {
		t.Errorf("claim condition %+v, want %s", r, enipamv1alpha1.ReasonWaitingForOldPod)
	}

	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
	w.pod("db-0", "node-2", true)
	if got := w.allocate("node-2", "default/db-0"); got != ip {
		t.Fatalf("db-0 got %s on node-2, want %s", got, ip)
	}
}

func reqClaim(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: name}}
}

func reqNode(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}
}

// TestClaimBadInputMovesNothing: each bad request gets its condition on
// the claim and an event, and nothing moves: the pools and EC2 are as
// before.
func TestClaimBadInputMovesNothing(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	cn := w.node("node-2")
	var inUse, primary string
	for ip := range cn.Spec.IPAM.Pool {
		// One that stays in the pool: not on its way out through the
		// release handshake (an excess address may be).
		if _, leaving := cn.Status.IPAM.ReleaseIPs[ip]; !leaving {
			inUse = ip
			break
		}
	}
	w.used["node-2"][inUse] = "default/web-0"
	for _, e := range w.state.Dump().NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.InstanceID == "i-0a000000000000003" {
			for _, a := range e.PrivateIPAddresses {
				if a.Primary {
					primary = a.PrivateIPAddress
				}
			}
		}
	}
	w.createClaim("held", enipamv1alpha1.StaticIPClaimSpec{Address: "10.0.16.200"})
	for range 3 {
		w.step(l)
	}
	// node-2 replaces the address its pod took before the snapshot.
	w.converge(l)
	before := w.snapshot()
	callsBefore := w.cloud.Calls()
	rows := []struct{ name, addr, node, reason string }{
		{"outside", "192.168.7.7", "node-1", enipamv1alpha1.ReasonAddressOutside},
		{"reserved", "10.0.16.1", "node-1", enipamv1alpha1.ReasonAddressOutside},
		{"in-use", inUse, "node-1", enipamv1alpha1.ReasonAddressTaken},
		{"primary", primary, "node-1", enipamv1alpha1.ReasonAddressTaken},
		{"twice", "10.0.16.200", "node-1", enipamv1alpha1.ReasonAddressTaken},
		{"other-zone", "10.0.16.201", "node-b", enipamv1alpha1.ReasonWrongZone},
	}
	for _, r := range rows {
		w.createClaim(r.name, enipamv1alpha1.StaticIPClaimSpec{Address: r.addr, NodeName: r.node})
	}
	for range 5 {
		w.step(l)
	}
	for _, r := range rows {
		c := w.claim(r.name)
		cond := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady)
		if cond == nil || cond.Reason != r.reason || cond.Status != metav1.ConditionFalse {
			t.Errorf("claim %s (%s): condition %+v, want %s", r.name, r.addr, cond, r.reason)
			continue
		}
		t.Logf("%s: %s %s: %s", r.name, c.Status.Phase, cond.Reason, cond.Message)
	}
	if after := w.snapshot(); after != before {
		t.Errorf("pools or EC2 changed:\nbefore %s\nafter  %s", before, after)
	}
	for _, a := range []cloudfake.Action{cloudfake.AssignPrivateIpAddresses, cloudfake.UnassignPrivateIpAddresses, cloudfake.CreateNetworkInterface} {
		if callsBefore[a] != w.cloud.Calls()[a] {
			t.Errorf("%s calls went from %d to %d", a, callsBefore[a], w.cloud.Calls()[a])
		}
	}
}

// snapshot prints every pool and every address EC2 has, sorted.
func (w *staticWorld) snapshot() string {
	var lines []string
	for _, n := range staticNodes {
		cn := w.node(n.name)
		for ip, e := range cn.Spec.IPAM.Pool {
			lines = append(lines, fmt.Sprintf("%s %s %s %s", n.name, ip, e.Owner, cn.Status.IPAM.ReleaseIPs[ip]))
		}
	}
	for _, e := range w.state.Dump().NetworkInterfaces {
		for _, a := range e.PrivateIPAddresses {
			lines = append(lines, e.NetworkInterfaceID+" "+a.PrivateIPAddress)
		}
	}
	slices.Sort(lines)
	return fmt.Sprint(lines)
}
