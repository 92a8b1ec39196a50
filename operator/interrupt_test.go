package operator_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/ciliumnode"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/poolcontroller"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// errKilled stands for the process dying right after a call: EC2 acted,
// the operator never learnt it.
var errKilled = errors.New("killed")

// interruptScenario: one m5.large (3 ENIs × 10 addresses) in a VPC with a
// tagged pod subnet; the node's policy keeps pods off the primary ENI, so
// its first allocation needs a new ENI.
const interruptScenario = `
account: "123456789012"
clusterName: test
region: us-east-1
seed: 11
zones: [us-east-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, name: nodes-a, cidr: 10.0.0.0/24, zone: us-east-1a}
  - {id: subnet-0a000000000000002, name: pods-a, cidr: 10.0.16.0/20, zone: us-east-1a, tags: {pods: "true"}}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
`

// interruptWorld is EC2 (ec2sim's state behind the in-memory cloud), an
// in-memory apiserver shared by the operator's successive lives, and the
// node's two agents played step by step.
type interruptWorld struct {
	t     *testing.T
	state *ec2sim.State
	cloud *cloudfake.Cloud
	c     client.Client
	// failSpec, when set, refuses the operator's next spec patch of the
	// CiliumNode (the status patch before it goes through).
	failSpec bool
	// used are the addresses the node's pods hold.
	used map[string]bool
	// api, when set, stands between the operator and cloud (a describe
	// that lags EC2).
	api cloud.API
}

func newInterruptWorld(t *testing.T) *interruptWorld {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(interruptScenario))
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
	w := &interruptWorld{t: t, state: st, cloud: cloudfake.New(st), used: map[string]bool{}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-node-1"},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0a000000000000001"}}
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-cn-1"},
		Spec: ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{PreAllocate: 4}}}
	policy := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Spec: enipamv1alpha1.ENIPolicySpec{
		FirstInterfaceIndex: i32(1), SubnetTags: map[string]string{"pods": "true"},
	}}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, idx := range claims.Indexes() {
		b = b.WithIndex(idx.Object, idx.Field, idx.Extract)
	}
	w.c = b.WithStatusSubresource(&ciliumv2.CiliumNode{}, &enipamv1alpha1.NodeRouting{}, &enipamv1alpha1.ENIPolicy{}, &enipamv1alpha1.StaticIPClaim{}).
		WithObjects(node, cn, policy).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if _, ok := obj.(*ciliumv2.CiliumNode); ok && w.failSpec {
					w.failSpec = false
					return errors.New("spec patch lost")
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	return w
}

// life is one run of the operator: a fresh inventory and controller, as
// after a restart, reconciling the node until it is served or the cloud
// kills it.
type life struct {
	r      *poolcontroller.Reconciler
	cancel context.CancelFunc
}

func (w *interruptWorld) start(opts poolcontroller.Options) *life {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w.t.Cleanup(cancel)
	api, inv, m, log := startProcess(ctx, w.t, w.cloud, w.api)
	return &life{r: poolcontroller.New(w.c, api, inv, events.NewFakeRecorder(100), m, opts, log), cancel: cancel}
}

// startProcess starts what a fresh operator process has before its
// controllers: its logger, its cloud (api when set, else the fake), an
// inventory synced from it, and metrics; it all ends with ctx.
func startProcess(ctx context.Context, t *testing.T, fake cloud.API, api cloud.API) (cloud.API, *inventory.Inventory, *poolcontroller.Metrics, *slog.Logger) {
	t.Helper()
	var logOut io.Writer = io.Discard
	if testing.Verbose() {
		logOut = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	if api == nil {
		api = fake
	}
	inv := inventory.New(api, inventory.Options{
		VPCIDs: []string{"vpc-0a000000000000001"}, ResyncInterval: time.Hour, ConsistencyGrace: time.Second, NotFoundRetry: time.Second,
	}, log)
	go func() { _ = inv.Start(ctx) }()
	select {
	case <-inv.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("inventory never synced")
	}
	m, err := poolcontroller.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return api, inv, m, log
}

func interruptOptions() poolcontroller.Options {
	return poolcontroller.Options{
		Cluster: "test", Workers: 1,
		Defaults:         defaultsForTest(),
		ConsistencyGrace: time.Second, RoutingPatience: time.Hour,
		RetryBase: time.Millisecond, RetryMax: time.Millisecond, BlockedRetry: time.Hour,
	}
}

// reconcile runs one reconcile of the node and one step of its agents.
func (w *interruptWorld) reconcile(l *life) error {
	_, err := l.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "node-1"}})
	w.agents()
	return err
}

// converge reconciles until the pool holds at least want free addresses
// and nothing is in the handshake but released entries, giving up once
// its patience is spent (the inventory learns of completed attachments
// once a second).
func (w *interruptWorld) converge(l *life, want int) *ciliumv2.CiliumNode {
	w.t.Helper()
	var cn *ciliumv2.CiliumNode
	for p := newPatience(); !p.spent(); {
		_ = w.reconcile(l)
		cn = w.node()
		if free(cn) >= want && pending(cn) == 0 {
			return cn
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.t.Fatalf("never converged: pool %d, free %d, release-ips %v, operator-status %q",
		len(cn.Spec.IPAM.Pool), free(cn), cn.Status.IPAM.ReleaseIPs, cn.Status.IPAM.OperatorStatus.Error)
	return nil
}

// told is what the node's agent is told to route (ciliumnode.ENIs): the
// NodeRouting's spec.enis, and the ENIs only a copy in status.eni.enis
// lists.
func (w *interruptWorld) told() map[string]awstypes.ENI {
	w.t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: "node-1"}, nr); err != nil {
		w.t.Fatal(err)
	}
	enis, _ := ciliumnode.ENIs(w.node(), &nr.Spec)
	return enis
}

func (w *interruptWorld) node() *ciliumv2.CiliumNode {
	cn := &ciliumv2.CiliumNode{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: "node-1"}, cn); err != nil {
		w.t.Fatal(err)
	}
	return cn
}

// agents plays Cilium's agent (status.ipam.used, the handshake: ready for
// free marked addresses, entries of released ones dropped once out of the
// pool) and enipam's agent (routed: what status.eni.enis lists on
// attached ENIs, as the real agent reports it).
func (w *interruptWorld) agents() {
	ctx := context.Background()
	cn := w.node()
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	for ip := range w.used {
		cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: "default/pod"}
	}
	for ip, st := range cn.Status.IPAM.ReleaseIPs {
		_, inPool := cn.Spec.IPAM.Pool[ip]
		switch {
		case st == ipamoption.IPAMMarkForRelease && w.used[ip]:
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
	if err := w.c.Get(ctx, client.ObjectKey{Name: "node-1"}, nr); err != nil {
		return
	}
	attached := map[string]bool{}
	for _, e := range w.state.Dump().NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.Status == "attached" {
			attached[e.NetworkInterfaceID] = true
		}
	}
	nr.Status.ENIs = agentsim.Routed(cn, &nr.Spec, func(id string) bool { return attached[id] })
	if err := w.c.Status().Update(ctx, nr); err != nil {
		w.t.Fatal(err)
	}
}

// check asserts the invariants from EC2's state and the CiliumNode once
// the node converged: checkPool's, and the instance has exactly wantENIs
// ENIs (the primary included) with no ENI tagged for it left unattached.
func (w *interruptWorld) check(cn *ciliumv2.CiliumNode, wantENIs int) {
	w.t.Helper()
	enis, orphans := w.checkPool(cn)
	if enis != wantENIs || orphans != 0 {
		w.t.Errorf("instance has %d ENIs and %d unattached ones tagged for it, want %d and 0", enis, orphans, wantENIs)
	}
}

// checkPool asserts what holds at every moment, an interruption included:
// every free pool address (not used, not in the handshake) is on its ENI
// of the instance in EC2. A released address may linger only until the
// next reconcile. It returns the instance's attached ENIs and the
// unattached ones tagged for it.
func (w *interruptWorld) checkPool(cn *ciliumv2.CiliumNode) (enis, orphans int) {
	w.t.Helper()
	onInstance := map[string]string{}
	for _, e := range w.state.Dump().NetworkInterfaces {
		tagged := false
		for _, tag := range e.Tags {
			tagged = tagged || (tag.Key == cloud.TagInstance && tag.Value == "i-0a000000000000001")
		}
		if e.Attachment != nil && e.Attachment.InstanceID == "i-0a000000000000001" {
			enis++
			for _, a := range e.PrivateIPAddresses {
				if !a.Primary {
					onInstance[a.PrivateIPAddress] = e.NetworkInterfaceID
				}
			}
		} else if tagged {
			orphans++
		}
	}
	for ip, entry := range cn.Spec.IPAM.Pool {
		_, inHandshake := cn.Status.IPAM.ReleaseIPs[ip]
		if !inHandshake && !w.used[ip] && onInstance[ip] != entry.Resource {
			w.t.Errorf("free pool address %s (on %s) is not on that ENI in EC2 (EC2: %q)", ip, entry.Resource, onInstance[ip])
		}
	}
	return enis, orphans
}

// TestInterruptedSteps: each row kills the operator right after one step
// (the call went through, the process never learnt it) or loses one write,
// then a fresh operator, with no memory of the first, serves the node. The
// invariants hold after every row, and the node ends with exactly the ENIs
// it needs. Node: m5.large, first interface index 1, pre-allocate 4.
func TestInterruptedSteps(t *testing.T) {
	rows := []struct {
		name string
		// setup brings the node to where the interruption happens, with
		// the first life.
		setup func(w *interruptWorld, l *life)
		// interrupt arms the failure and runs the first life into it.
		interrupt func(w *interruptWorld, l *life)
		wantENIs  int
	}{
		{name: "after Create", wantENIs: 2,
			interrupt: func(w *interruptWorld, l *life) {
				w.cloud.After(cloudfake.CreateNetworkInterface, 1, cloudfake.Fail(errKilled))
				_ = w.reconcile(l)
			}},
		{name: "after Attach", wantENIs: 2,
			interrupt: func(w *interruptWorld, l *life) {
				w.cloud.After(cloudfake.AttachNetworkInterface, 1, cloudfake.Fail(errKilled))
				_ = w.reconcile(l)
			}},
		{name: "after Assign", wantENIs: 2,
			setup: func(w *interruptWorld, l *life) { w.converge(l, 4) },
			interrupt: func(w *interruptWorld, l *life) {
				w.useFree(4)
				w.cloud.After(cloudfake.AssignPrivateIpAddresses, 1, cloudfake.Fail(errKilled))
				_ = w.reconcile(l)
			}},
		{name: "after Unassign", wantENIs: 2,
			setup: func(w *interruptWorld, l *life) { w.converge(l, 4); w.useFree(4); w.converge(l, 4) },
			interrupt: func(w *interruptWorld, l *life) {
				w.used = map[string]bool{} // the pods leave: excess is marked, then acknowledged
				w.cloud.After(cloudfake.UnassignPrivateIpAddresses, 1, cloudfake.Fail(errKilled))
				w.until(l, func() bool { return w.cloud.Calls()[cloudfake.UnassignPrivateIpAddresses] > 0 })
			}},
		{name: "between the status and the spec patch of a release", wantENIs: 2,
			setup: func(w *interruptWorld, l *life) { w.converge(l, 4); w.useFree(4); w.converge(l, 4) },
			interrupt: func(w *interruptWorld, l *life) {
				w.used = map[string]bool{}
				w.until(l, func() bool { return pending(w.node()) > 0 }) // marked
				w.failSpec = true
				w.until(l, func() bool { return !w.failSpec })
				cn := w.node()
				released := 0
				for ip, st := range cn.Status.IPAM.ReleaseIPs {
					if _, inPool := cn.Spec.IPAM.Pool[ip]; inPool && st == ipamoption.IPAMReleased {
						released++
					}
				}
				if released == 0 {
					w.t.Fatal("the lost spec write left no released address in the pool: the row tests nothing")
				}
			}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newInterruptWorld(t)
			opts := interruptOptions()
			first := w.start(opts)
			if row.setup != nil {
				row.setup(w, first)
			}
			row.interrupt(w, first)
			first.cancel()
			w.checkPool(w.node())

			second := w.start(opts)
			cn := w.converge(second, 4)
			w.check(cn, row.wantENIs)
			for ip, st := range cn.Status.IPAM.ReleaseIPs {
				if _, inPool := cn.Spec.IPAM.Pool[ip]; inPool && st == ipamoption.IPAMReleased {
					t.Errorf("released %s is still in the pool", ip)
				}
			}
			if got := w.cloud.Calls()[cloudfake.CreateNetworkInterface]; got != 1 {
				t.Errorf("CreateNetworkInterface calls = %d, want 1: the restarted operator must find the first ENI", got)
			}
		})
	}
}

// useFree hands n free pool addresses to pods.
func (w *interruptWorld) useFree(n int) {
	cn := w.node()
	for ip := range cn.Spec.IPAM.Pool {
		if n == 0 {
			break
		}
		if _, leaving := cn.Status.IPAM.ReleaseIPs[ip]; leaving || w.used[ip] {
			continue
		}
		w.used[ip] = true
		n--
	}
	w.agents()
}

func free(cn *ciliumv2.CiliumNode) int {
	n := 0
	for ip := range cn.Spec.IPAM.Pool {
		_, used := cn.Status.IPAM.Used[ip]
		_, leaving := cn.Status.IPAM.ReleaseIPs[ip]
		if !used && !leaving {
			n++
		}
	}
	return n
}

func pending(cn *ciliumv2.CiliumNode) int {
	n := 0
	for _, st := range cn.Status.IPAM.ReleaseIPs {
		if st != ipamoption.IPAMReleased {
			n++
		}
	}
	return n
}

func defaultsForTest() policy.Defaults {
	return policy.Defaults{Knobs: pool.Knobs{PreAllocate: 4, AgentEndpoints: 2}, ReleaseExcessIPs: true}
}

// until reconciles (with the agents' steps) until done, at most 10 times.
func (w *interruptWorld) until(l *life, done func() bool) {
	w.t.Helper()
	for range 10 {
		if done() {
			return
		}
		_ = w.reconcile(l)
	}
	if !done() {
		w.t.Fatal("the interruption never happened")
	}
}

// laggingCloud answers describes as EC2 did before an Unassign: the
// addresses in stale are still shown on their ENI until the deadline.
type laggingCloud struct {
	*cloudfake.Cloud
	stale map[string][]netip.Addr // ENI ID → addresses unassigned already
	until time.Time
}

func (c *laggingCloud) lag(enis []cloud.ENI) []cloud.ENI {
	if time.Now().After(c.until) {
		return enis
	}
	for i := range enis {
		// Clipped: an entry may share its list with the caller's view.
		enis[i].IPs = append(slices.Clip(enis[i].IPs), c.stale[enis[i].ID]...)
	}
	return enis
}

func (c *laggingCloud) ListENIs(ctx context.Context, vpcID string, known func(string) (cloud.ENI, bool)) ([]cloud.ENI, error) {
	enis, err := c.Cloud.ListENIs(ctx, vpcID, known)
	return c.lag(enis), err
}

func (c *laggingCloud) GetENIs(ctx context.Context, ids []string) ([]cloud.ENI, error) {
	enis, err := c.Cloud.GetENIs(ctx, ids)
	return c.lag(enis), err
}

func (c *laggingCloud) GetInstances(ctx context.Context, ids []string) ([]cloud.Instance, []cloud.ENI, error) {
	in, enis, err := c.Cloud.GetInstances(ctx, ids)
	return in, c.lag(enis), err
}

// TestRestartOnADescribeThatPredatesAnUnassign: an operator released an
// address to the end (Unassign, released, the agent dropped the entry) and
// stopped; its successor's first describes still show the address on the
// ENI, as EC2's lagging reads do, while EC2 has given it to another ENI.
// The address never re-enters the pool, at any reconcile, and the pool
// refills from addresses EC2 really has.
func TestRestartOnADescribeThatPredatesAnUnassign(t *testing.T) {
	w := newInterruptWorld(t)
	opts := interruptOptions()
	first := w.start(opts)
	cn := w.converge(first, 4)
	first.cancel()

	// The released address: gone from EC2, the pool and the handshake.
	var gone netip.Addr
	var eni string
	for ip, entry := range cn.Spec.IPAM.Pool {
		gone, eni = netip.MustParseAddr(ip), entry.Resource
		break
	}
	if err := w.cloud.UnassignIPs(context.Background(), eni, []netip.Addr{gone}); err != nil {
		t.Fatal(err)
	}
	// EC2 has given it to someone else since.
	if _, err := w.state.CreateNetworkInterface(ec2sim.CreateNetworkInterfaceRequest{
		SubnetID: "subnet-0a000000000000002", PrivateIPAddress: gone.String(),
	}); err != nil {
		t.Fatal(err)
	}
	delete(cn.Spec.IPAM.Pool, gone.String())
	if err := w.c.Update(context.Background(), cn); err != nil {
		t.Fatal(err)
	}

	w.api = &laggingCloud{Cloud: w.cloud, stale: map[string][]netip.Addr{eni: {gone}}, until: time.Now().Add(500 * time.Millisecond)}
	second := w.start(opts) // trusts describes a grace (1 s) after its start
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		_ = w.reconcile(second)
		cn = w.node()
		if _, ok := cn.Spec.IPAM.Pool[gone.String()]; ok {
			t.Fatalf("%s, unassigned before the restart, is back in the pool on a lagging describe", gone)
		}
		w.checkPool(cn)
		time.Sleep(50 * time.Millisecond)
	}
	cn = w.converge(second, 4)
	w.check(cn, 2)
	if _, ok := cn.Spec.IPAM.Pool[gone.String()]; ok {
		t.Fatalf("%s is in the pool", gone)
	}
}

// hidingCloud answers describes without the ENIs in hidden until the
// deadline, as EC2's describes miss an ENI created seconds ago.
type hidingCloud struct {
	*cloudfake.Cloud
	hidden map[string]bool
	until  time.Time
}

func (c *hidingCloud) hide(enis []cloud.ENI) []cloud.ENI {
	if time.Now().After(c.until) {
		return enis
	}
	return slices.DeleteFunc(enis, func(e cloud.ENI) bool { return c.hidden[e.ID] })
}

func (c *hidingCloud) ListENIs(ctx context.Context, vpcID string, known func(string) (cloud.ENI, bool)) ([]cloud.ENI, error) {
	enis, err := c.Cloud.ListENIs(ctx, vpcID, known)
	return c.hide(enis), err
}

func (c *hidingCloud) GetENIs(ctx context.Context, ids []string) ([]cloud.ENI, error) {
	enis, err := c.Cloud.GetENIs(ctx, ids)
	return c.hide(enis), err
}

func (c *hidingCloud) GetInstances(ctx context.Context, ids []string) ([]cloud.Instance, []cloud.ENI, error) {
	in, enis, err := c.Cloud.GetInstances(ctx, ids)
	return in, c.hide(enis), err
}

// TestTakeOverWhileAnENIIsInvisible: the operator that takes over does
// not see, for a moment, the ENI its predecessor created. What the node
// agent is told (the NodeRouting's spec.enis: the node has no copy in
// status.eni.enis) keeps listing that ENI meanwhile, so the agent never
// stops routing its addresses (a report that still lists them could
// otherwise let an unrouted address into the pool), and the pool keeps
// them.
func TestTakeOverWhileAnENIIsInvisible(t *testing.T) {
	w := newInterruptWorld(t)
	opts := interruptOptions()
	first := w.start(opts)
	cn := w.converge(first, 4)
	first.cancel()
	if len(cn.Status.ENI.ENIs) != 0 {
		t.Fatalf("status.eni.enis lists %d ENIs, want none: the agent has not reported, so may route spec.enis", len(cn.Status.ENI.ENIs))
	}
	var eni string
	for id, e := range w.told() {
		if e.Number == 1 {
			eni = id
		}
	}
	if eni == "" {
		t.Fatal("no secondary ENI")
	}
	pooled := len(cn.Spec.IPAM.Pool)

	w.api = &hidingCloud{Cloud: w.cloud, hidden: map[string]bool{eni: true}, until: time.Now().Add(700 * time.Millisecond)}
	second := w.start(opts)
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		_ = w.reconcile(second)
		cn = w.node()
		if _, ok := w.told()[eni]; !ok {
			t.Fatalf("spec.enis dropped %s while EC2's describes missed it", eni)
		}
		if len(cn.Spec.IPAM.Pool) < pooled {
			t.Fatalf("the pool shrank from %d to %d while EC2's describes missed %s", pooled, len(cn.Spec.IPAM.Pool), eni)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cn = w.converge(second, 4)
	w.check(cn, 2)
}
