package poolcontroller_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/poolcontroller"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// journal records, in order, what one reconcile did: its CiliumNode
// writes ("status", "spec") and its EC2 calls that change something
// ("ec2 <action>").
type journal struct {
	mu    sync.Mutex
	steps []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.steps = append(j.steps, s)
	j.mu.Unlock()
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.steps
	j.steps = nil
	return out
}

// journaledCloud is the in-memory EC2 with its mutating calls of the pool
// journaled.
type journaledCloud struct {
	cloud.API
	j *journal
	// fail: how many of the next calls of each action fail.
	fail *faults
	// deciding: the calls made while it is set, reads included, are
	// counted in decided.
	deciding *atomic.Bool
	decided  *journal
	// described journals the ENIs of each describe by ID.
	described *journal
}

// count counts a call made while a decision runs.
func (c journaledCloud) count(action string) {
	if c.deciding.Load() {
		c.decided.add(action)
	}
}

func (c journaledCloud) GetENIs(ctx context.Context, eniIDs []string) ([]cloud.ENI, error) {
	c.count("GetENIs")
	c.described.add(strings.Join(eniIDs, ","))
	return c.API.GetENIs(ctx, eniIDs)
}

func (c journaledCloud) GetInstances(ctx context.Context, instanceIDs []string) ([]cloud.Instance, []cloud.ENI, error) {
	c.count("GetInstances")
	return c.API.GetInstances(ctx, instanceIDs)
}

func (c journaledCloud) ListENIs(ctx context.Context, vpcID string, known func(eniID string) (cloud.ENI, bool)) ([]cloud.ENI, error) {
	c.count("ListENIs")
	return c.API.ListENIs(ctx, vpcID, known)
}

func (c journaledCloud) ListAddresses(ctx context.Context) ([]cloud.Address, error) {
	c.count("ListAddresses")
	return c.API.ListAddresses(ctx)
}

// faults makes the next calls of an action fail.
type faults struct {
	mu   sync.Mutex
	left map[string]int
}

// next reports whether this call of action fails.
func (f *faults) next(action string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left[action] == 0 {
		return nil
	}
	f.left[action]--
	return errors.New("injected " + action + " failure")
}

func (f *faults) failNext(action string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left[action] = n
}

func (c journaledCloud) CreateENI(ctx context.Context, req cloud.CreateENIRequest) (cloud.ENI, error) {
	c.j.add("ec2 CreateENI")
	c.count("CreateENI")
	return c.API.CreateENI(ctx, req)
}

func (c journaledCloud) AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error) {
	c.j.add("ec2 AttachENI")
	c.count("AttachENI")
	return c.API.AttachENI(ctx, eniID, instanceID, deviceIndex)
}

func (c journaledCloud) AssignIPs(ctx context.Context, eniID string, count int) ([]netip.Addr, error) {
	c.j.add("ec2 AssignIPs")
	c.count("AssignIPs")
	return c.API.AssignIPs(ctx, eniID, count)
}

func (c journaledCloud) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	c.j.add("ec2 UnassignIPs")
	c.count("UnassignIPs")
	return c.API.UnassignIPs(ctx, eniID, ips)
}

func (c journaledCloud) AssignAddresses(ctx context.Context, eniID string, ips []netip.Addr, allowReassignment bool) error {
	c.j.add("ec2 AssignAddresses")
	c.count("AssignAddresses")
	return c.API.AssignAddresses(ctx, eniID, ips, allowReassignment)
}

func (c journaledCloud) AssociateAddress(ctx context.Context, allocationID, eniID string, privateIP netip.Addr, reassociate bool) (string, error) {
	c.j.add("ec2 AssociateAddress")
	c.count("AssociateAddress")
	if err := c.fail.next("AssociateAddress"); err != nil {
		return "", err
	}
	return c.API.AssociateAddress(ctx, allocationID, eniID, privateIP, reassociate)
}

func (c journaledCloud) DisassociateAddress(ctx context.Context, associationID string) error {
	c.j.add("ec2 DisassociateAddress")
	c.count("DisassociateAddress")
	if err := c.fail.next("DisassociateAddress"); err != nil {
		return err
	}
	return c.API.DisassociateAddress(ctx, associationID)
}

// writesRig is one node, node-1 (instance i-0d000000000000001, an
// m5.large: 3 ENIs of 10 addresses) in the in-memory EC2, served by the
// pool controller over a fake apiserver whose CiliumNode writes, like
// the EC2 calls that change something, are journaled.
type writesRig struct {
	t    testing.TB
	ctx  context.Context
	st   *ec2sim.State
	j    *journal
	base client.WithWatch
	r    *poolcontroller.Reconciler
	// calls counts the journaled EC2 calls by action.
	calls map[string]int
	// events are the reconciler's events; failClaimLists makes the
	// operator's lists of StaticIPClaims fail, failRoutingGets its reads
	// of NodeRoutings.
	events          *events.FakeRecorder
	failClaimLists  *atomic.Bool
	failRoutingGets *atomic.Bool
	// fail makes the next EC2 calls of an action fail.
	fail *faults
	// result is the last reconcile's answer.
	result ctrl.Result
	// onClaimGet, when set, runs before each of the operator's reads of
	// a StaticIPClaim by name, with the reads of this reconcile so far
	// (claimGets, this one counted).
	onClaimGet func(key client.ObjectKey, n int)
	claimGets  int
	// deciding is set from the start of a decision to the CiliumNode's
	// write, or to the decision's end when it asks for describes first;
	// decided journals the EC2 calls made meanwhile, reads included, and
	// decidedCalls keeps those of the last reconcile. decisions counts
	// the decisions of the last reconcile (onDecide).
	deciding     *atomic.Bool
	decided      *journal
	decidedCalls []string
	decisions    *atomic.Int32
	// described journals the ENIs of each describe by ID.
	described *journal
	// apiWrites journals the operator's apiserver writes; decidingAPI
	// is set from the start of a decision to its end, and decidedWrites
	// keeps the writes the last reconcile made meanwhile.
	apiWrites     *apiJournal
	decidingAPI   *atomic.Bool
	decidedWrites []string
	// decidedReads keeps the client reads (cache or apiserver) the last
	// reconcile made while deciding.
	decidedReads []string
	// decidedShared keeps the changes of the state shared between nodes
	// (the needs, the EC2 slots, the nodes' states, the metrics) the
	// last reconcile made while deciding.
	decidedShared []string
}

const writesNode, writesInstance = "node-1", "i-0d000000000000001"

// newWritesRig starts the rig with the policy spec, the node's
// CiliumNode spec and the other objects; eips Elastic IPs carrying
// eipTags are allocated in the account.
func newWritesRig(t testing.TB, policy enipamv1alpha1.ENIPolicySpec, spec ciliumv2.NodeSpec, eips int, eipTags map[string]string, objs ...client.Object) *writesRig {
	t.Helper()
	return newWritesRigPrepared(t, nil, policy, spec, eips, eipTags, objs...)
}

// newWritesRigPrepared is newWritesRig with prepare run on the in-memory
// EC2 before the inventory's first describes.
func newWritesRigPrepared(t testing.TB, prepare func(cloud.API), policy enipamv1alpha1.ENIPolicySpec, spec ciliumv2.NodeSpec, eips int, eipTags map[string]string, objs ...client.Object) *writesRig {
	t.Helper()
	vpc := ec2sim.VPCSpec{ID: "vpc-0d000000000000001", CIDRs: []string{"10.0.0.0/16"}, Subnets: []ec2sim.SubnetSpec{
		{ID: "subnet-0d000000000000001", CIDR: "10.0.0.0/20", Zone: "us-east-1a", Tags: map[string]string{"pods": "true"}},
	}}
	st, err := ec2sim.NewState(&ec2sim.Scenario{Account: "123456789012", Region: "us-east-1", Zones: []string{"us-east-1a"},
		VPCs:      []ec2sim.VPCSpec{vpc},
		Instances: []ec2sim.InstanceSpec{{ID: writesInstance, Name: writesNode, Type: "m5.large", Subnet: "subnet-0d000000000000001"}}}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var tags []ec2sim.Tag
	for k, v := range eipTags {
		tags = append(tags, ec2sim.Tag{Key: k, Value: v})
	}
	for range eips {
		if _, err := st.AllocateAddress(ec2sim.AllocateAddressRequest{TagSpecifications: []ec2sim.TagSpecification{{ResourceType: "elastic-ip", Tags: tags}}}); err != nil {
			t.Fatal(err)
		}
	}
	j := &journal{}
	fail := &faults{left: map[string]int{}}
	deciding, decided := &atomic.Bool{}, &journal{}
	described := &journal{}
	api := journaledCloud{API: cloudfake.New(st), j: j, fail: fail, deciding: deciding, decided: decided, described: described}
	if prepare != nil {
		prepare(cloudfake.New(st))
	}
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs,
		&enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Spec: policy},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: writesNode, UID: "uid-node-1"},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + writesInstance}},
		&ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: writesNode, UID: "uid-cn-1"}, Spec: spec},
	)
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, idx := range claims.Indexes() {
		b = b.WithIndex(idx.Object, idx.Field, idx.Extract)
	}
	base := b.WithStatusSubresource(&ciliumv2.CiliumNode{}, &enipamv1alpha1.NodeRouting{}, &enipamv1alpha1.ENIPolicy{}, &enipamv1alpha1.StaticIPClaim{}).
		WithObjects(objs...).Build()
	// The operator's client journals its CiliumNode writes.
	failClaimLists, failRoutingGets := &atomic.Bool{}, &atomic.Bool{}
	apiWrites, decidingAPI := &apiJournal{}, &atomic.Bool{}
	w := &writesRig{}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*enipamv1alpha1.NodeRouting); ok && failRoutingGets.Load() {
				return errors.New("the apiserver is gone")
			}
			if _, ok := obj.(*enipamv1alpha1.StaticIPClaim); ok && w.onClaimGet != nil {
				w.claimGets++
				w.onClaimGet(key, w.claimGets)
			}
			apiWrites.read(decidingAPI, fmt.Sprintf("get %T %s", obj, key))
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*enipamv1alpha1.StaticIPClaimList); ok && failClaimLists.Load() {
				return errors.New("the cache is gone")
			}
			apiWrites.read(decidingAPI, fmt.Sprintf("list %T", list))
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			apiWrites.count(decidingAPI, "create", obj, "")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			apiWrites.count(decidingAPI, "update", obj, "")
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			apiWrites.count(decidingAPI, "delete", obj, "")
			return c.Delete(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*ciliumv2.CiliumNode); ok {
				j.add("spec")
				deciding.Store(false)
			}
			apiWrites.count(decidingAPI, "patch", obj, "")
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			apiWrites.count(decidingAPI, "update", obj, sub)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*ciliumv2.CiliumNode); ok && sub == "status" {
				j.add("status")
				deciding.Store(false)
			}
			apiWrites.count(decidingAPI, "patch", obj, sub)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv := inventory.New(api, inventory.Options{VPCIDs: []string{vpc.ID}, ResyncInterval: time.Hour, ConsistencyGrace: time.Second, NotFoundRetry: time.Second}, log)
	go func() { _ = inv.Start(ctx) }()
	select {
	case <-inv.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("inventory never synced")
	}
	m, err := poolcontroller.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(1000)
	r := poolcontroller.New(c, api, inv, rec, m, poolcontroller.Options{
		Cluster: "test", Workers: 1, ConsistencyGrace: time.Second, RoutingPatience: time.Hour,
		RetryBase: time.Millisecond, RetryMax: time.Millisecond, BlockedRetry: time.Hour,
	}, log)
	// From the start of a decision to the CiliumNode's write (or the
	// reconcile's end), the EC2 calls are counted.
	decisions := &atomic.Int32{}
	poolcontroller.SetOnDecide(r, func(string) { deciding.Store(true); decidingAPI.Store(true); decisions.Add(1) })
	// The apiserver writes are counted to the decision's end (the
	// CiliumNode's write follows it, when there is one); the EC2 calls
	// too when the decision asks for describes first: they are made
	// before the node is decided again.
	poolcontroller.SetOnDecided(r, func(_ string, reads bool) {
		decidingAPI.Store(false)
		if reads {
			deciding.Store(false)
		}
	})
	// The changes of the state shared between nodes are counted to the
	// decision's end too: the decision only says what they are.
	poolcontroller.SetOnShared(r, func(what string) { apiWrites.shared(decidingAPI, what) })
	*w = writesRig{t: t, ctx: ctx, st: st, j: j, base: base, r: r, calls: map[string]int{}, events: rec, failClaimLists: failClaimLists, failRoutingGets: failRoutingGets, fail: fail,
		deciding: deciding, decided: decided, decisions: decisions, described: described, apiWrites: apiWrites, decidingAPI: decidingAPI}
	return w
}

// apiJournal journals the operator's apiserver writes: those made while
// a decision runs (decided), and all of them by kind and subresource
// (all); and its reads, of the cache or the apiserver, made while a
// decision runs (reads).
type apiJournal struct {
	mu      sync.Mutex
	decided []string
	all     map[string]int
	reads   []string
	// sharedChanges: the changes of the state shared between nodes made
	// while a decision runs.
	sharedChanges []string
	// order: every write, in order, as "<kind> <verb>".
	order []string
}

// takeOrder returns the writes made since the last call, in order.
func (a *apiJournal) takeOrder() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.order
	a.order = nil
	return out
}

// read journals a read made while deciding.
func (a *apiJournal) read(deciding *atomic.Bool, what string) {
	if !deciding.Load() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reads = append(a.reads, what)
}

// shared journals a change of the state shared between nodes made while
// deciding.
func (a *apiJournal) shared(deciding *atomic.Bool, what string) {
	if !deciding.Load() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sharedChanges = append(a.sharedChanges, what)
}

// takeShared returns the changes of the shared state made while
// deciding since the last call.
func (a *apiJournal) takeShared() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.sharedChanges
	a.sharedChanges = nil
	return out
}

// takeReads returns the reads made while deciding since the last call.
func (a *apiJournal) takeReads() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.reads
	a.reads = nil
	return out
}

// count journals a write of obj (sub: its subresource).
func (a *apiJournal) count(deciding *atomic.Bool, verb string, obj client.Object, sub string) {
	kind := fmt.Sprintf("%T", obj)
	if sub != "" {
		kind += "/" + sub
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.all == nil {
		a.all = map[string]int{}
	}
	a.all[kind]++
	a.order = append(a.order, kind+" "+verb)
	if deciding.Load() {
		a.decided = append(a.decided, verb+" "+kind+" "+obj.GetName())
	}
}

// take returns the writes made while deciding since the last take.
func (a *apiJournal) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.decided
	a.decided = nil
	return out
}

// total is how many writes of kind were made.
func (a *apiJournal) total(kind string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.all[kind]
}

// reconcile reconciles the node once and checks its journal: the
// CiliumNode's status and spec written at most once each, never after
// an EC2 call. It returns whether the reconcile called EC2, and the node
// before and after it.
func (w *writesRig) reconcile() (called bool, before, after *ciliumv2.CiliumNode) {
	w.t.Helper()
	before = get(w.t, w.base, writesNode)
	w.claimGets = 0
	w.decisions.Store(0)
	res, err := w.r.Reconcile(w.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: writesNode}})
	if err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	w.result = res
	w.deciding.Store(false)
	w.decidedCalls = w.decided.take()
	w.decidingAPI.Store(false)
	w.decidedWrites = w.apiWrites.take()
	w.decidedReads = w.apiWrites.takeReads()
	w.decidedShared = w.apiWrites.takeShared()
	steps := w.j.take()
	after = get(w.t, w.base, writesNode)
	writes := map[string]int{}
	for _, s := range steps {
		if s == "status" || s == "spec" {
			writes[s]++
			if called {
				w.t.Fatalf("the CiliumNode's %s written after an EC2 call, in one reconcile: %v", s, steps)
			}
			continue
		}
		called = true
		w.calls[strings.TrimPrefix(s, "ec2 ")]++
	}
	if writes["status"] > 1 || writes["spec"] > 1 {
		w.t.Fatalf("one reconcile wrote the status %d times and the spec %d times, want at most once each: %v", writes["status"], writes["spec"], steps)
	}
	return called, before, after
}

// route plays the node's enipam-agent: it reports routed what the
// CiliumNode lists on attached ENIs.
func (w *writesRig) route(cn *ciliumv2.CiliumNode) {
	w.t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := w.base.Get(w.ctx, client.ObjectKey{Name: writesNode}, nr); err != nil {
		return
	}
	attached := map[string]bool{}
	for _, e := range w.st.Dump().NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.Status == "attached" {
			attached[e.NetworkInterfaceID] = true
		}
	}
	if routed := agentsim.Routed(cn, &nr.Spec, func(id string) bool { return attached[id] }); !equality.Semantic.DeepEqual(routed, nr.Status.ENIs) {
		nr.Status.ENIs = routed
		if err := w.base.Status().Update(w.ctx, nr); err != nil {
			w.t.Fatal(err)
		}
	}
}

// TestCiliumNodeWrittenOncePerReconcileBeforeEC2: an m5.large (3 ENIs of
// 10 addresses) whose policy keeps the primary ENI for the host
// (first-interface-index 1), pre-allocates 4 and releases excess at
// once joins, has every pool address used until its pods need a second
// pod ENI, then frees them all, so its excess goes through the release
// handshake with the node's agent. Every reconcile writes the
// CiliumNode's status at most once and its spec at most once, and never
// after an EC2 call: what a reconcile decided is written first, and what
// its calls produced is written by the next. Through the run the pool
// grew in a reconcile that then called EC2, a second pod ENI was created,
// and the acknowledged addresses were unassigned and left the pool.
func TestCiliumNodeWrittenOncePerReconcileBeforeEC2(t *testing.T) {
	release, fi, pre := true, int32(1), int32(4)
	w := newWritesRig(t, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre, ReleaseExcessIPs: &release,
		ExcessIPReleaseDelay: &metav1.Duration{}, SubnetTags: map[string]string{"pods": "true"}}, ciliumv2.NodeSpec{}, 0, nil)
	ctx, base, st := w.ctx, w.base, w.st

	var (
		grewThenCalled int
		released       []string
	)
	// step reconciles the node, checks its journal, and plays the node's
	// agents: enipam-agent's routed report, and Cilium's agent using
	// every pool address (use) or none, acknowledging the addresses
	// marked for release and forgetting the released ones.
	step := func(use bool) *ciliumv2.CiliumNode {
		t.Helper()
		called, before, after := w.reconcile()
		if called && len(after.Spec.IPAM.Pool) > len(before.Spec.IPAM.Pool) {
			grewThenCalled++
		}
		for ip := range before.Spec.IPAM.Pool {
			if _, ok := after.Spec.IPAM.Pool[ip]; !ok && after.Status.IPAM.ReleaseIPs[ip] == ipamoption.IPAMReleased {
				released = append(released, ip)
			}
		}
		w.route(after)
		cn := after.DeepCopy()
		cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		if use {
			for ip, e := range cn.Spec.IPAM.Pool {
				cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: "pod-" + ip, Resource: e.Resource}
			}
		}
		for ip, st := range cn.Status.IPAM.ReleaseIPs {
			_, pooled := cn.Spec.IPAM.Pool[ip]
			switch {
			case st == ipamoption.IPAMMarkForRelease:
				cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMReadyForRelease
			case st == ipamoption.IPAMReleased && !pooled:
				delete(cn.Status.IPAM.ReleaseIPs, ip)
			}
		}
		if !equality.Semantic.DeepEqual(cn.Status.IPAM, after.Status.IPAM) {
			if err := base.Status().Update(ctx, cn); err != nil {
				t.Fatal(err)
			}
		}
		// The inventory learns that an attachment completed from its
		// describe of attaching ENIs, once a second.
		time.Sleep(100 * time.Millisecond)
		return after
	}

	// Grow: every address used until a second pod ENI holds addresses.
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatalf("no second pod ENI after %d reconciles (%d created)", i, w.calls["CreateENI"])
		}
		if cn := step(true); w.calls["CreateENI"] >= 2 && len(cn.Spec.IPAM.Pool) > 9 {
			break
		}
	}
	// Shrink: nothing used; the excess leaves through the handshake.
	for i := 0; len(released) == 0 || w.calls["UnassignIPs"] == 0; i++ {
		if i == 200 {
			t.Fatalf("no address released after %d reconciles (%d Unassigns)", i, w.calls["UnassignIPs"])
		}
		step(false)
	}
	if grewThenCalled == 0 {
		t.Errorf("no reconcile both grew the pool and called EC2: the write-before-act case was never exercised")
	}
	cn := get(t, base, writesNode)
	for _, ip := range released {
		if _, ok := cn.Spec.IPAM.Pool[ip]; ok {
			t.Errorf("released %s is back in the pool", ip)
		}
		if slices.ContainsFunc(st.Dump().NetworkInterfaces, func(e ec2sim.NetworkInterface) bool {
			return slices.ContainsFunc(e.PrivateIPAddresses, func(a ec2sim.PrivateIPAddress) bool { return a.PrivateIPAddress == ip })
		}) {
			t.Errorf("released %s is still assigned in EC2", ip)
		}
	}
	t.Logf("%d CreateENI, %d UnassignIPs, %d addresses released, %d reconciles grew the pool and then called EC2", w.calls["CreateENI"], w.calls["UnassignIPs"], len(released), grewThenCalled)
}

func get(t testing.TB, c client.Client, name string) *ciliumv2.CiliumNode {
	t.Helper()
	cn := &ciliumv2.CiliumNode{}
	if err := c.Get(context.Background(), k8stypes.NamespacedName{Name: name}, cn); err != nil {
		t.Fatal(err)
	}
	return cn
}

// TestCiliumNodeWrittenOnceWhenPlacingStaticAddresses: node-1, whose
// policy keeps the primary ENI for the host, is the node of claim
// ns/db-0 for 10.0.0.200, an address no ENI holds, or asks for an
// Elastic IP carrying cilium/static=egress (Cilium's
// ipam-static-ip-tags), or both. Through the reconciles that create the
// ENI the address needs, assign it there and pool it stamped once
// routed, and that associate the Elastic IP with the primary address and
// report it, each writes the CiliumNode's status and spec at most once,
// and never after an EC2 call: the placement's and the association's
// answers are written by the next reconcile.
func TestCiliumNodeWrittenOnceWhenPlacingStaticAddresses(t *testing.T) {
	const addr, owner = "10.0.0.200", "ns/db-0"
	for _, tc := range []struct {
		name       string
		claim, eip bool
	}{
		{name: "static address", claim: true},
		{name: "Elastic IP", eip: true},
		{name: "both", claim: true, eip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fi, pre := int32(1), int32(2)
			var tags map[string]string
			var objs []client.Object
			if tc.eip {
				tags = map[string]string{"cilium/static": "egress"}
			}
			if tc.claim {
				objs = append(objs, &enipamv1alpha1.StaticIPClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Generation: 1},
					Spec:       enipamv1alpha1.StaticIPClaimSpec{Address: addr, NodeName: writesNode},
					Status:     enipamv1alpha1.StaticIPClaimStatus{Phase: enipamv1alpha1.ClaimPending, ObservedGeneration: 1},
				})
			}
			w := newWritesRig(t, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre, SubnetTags: map[string]string{"pods": "true"}},
				ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{StaticIPTags: tags}}, 1, map[string]string{"cilium/static": "egress"}, objs...)
			done := func(cn *ciliumv2.CiliumNode) bool {
				return (!tc.claim || cn.Spec.IPAM.Pool[addr].Owner == owner) && (!tc.eip || cn.Status.IPAM.AssignedStaticIP != "")
			}
			var cn *ciliumv2.CiliumNode
			for i := 0; ; i++ {
				if i == 200 {
					t.Fatalf("after %d reconciles: pool entry %+v, assigned static IP %q; EC2 calls %v", i, cn.Spec.IPAM.Pool[addr], cn.Status.IPAM.AssignedStaticIP, w.calls)
				}
				if _, _, cn = w.reconcile(); done(cn) {
					break
				}
				w.route(cn)
				// The inventory learns that an attachment completed from
				// its describe of attaching ENIs, once a second.
				time.Sleep(100 * time.Millisecond)
			}
			if want := btoi(tc.claim); w.calls["AssignAddresses"] != want {
				t.Errorf("%d AssignAddresses (the claim's address), want %d; EC2 calls %v", w.calls["AssignAddresses"], want, w.calls)
			}
			if want := btoi(tc.eip); w.calls["AssociateAddress"] != want {
				t.Errorf("%d AssociateAddress, want %d; EC2 calls %v", w.calls["AssociateAddress"], want, w.calls)
			}
			if !tc.eip {
				return
			}
			nr := &enipamv1alpha1.NodeRouting{}
			if err := w.base.Get(w.ctx, client.ObjectKey{Name: writesNode}, nr); err != nil {
				t.Fatal(err)
			}
			var assoc string
			for _, a := range w.st.Dump().Addresses {
				if a.PublicIP == cn.Status.IPAM.AssignedStaticIP {
					assoc = a.AssociationID
				}
			}
			if rec := nr.Spec.StaticIP; assoc == "" || rec == nil || rec.PublicIP != cn.Status.IPAM.AssignedStaticIP || rec.AssociationID != assoc {
				t.Errorf("NodeRouting records %+v; EC2 has %s associated as %q", rec, cn.Status.IPAM.AssignedStaticIP, assoc)
			}
		})
	}
}

// TestCiliumNodeWrittenOnceWhenReleasingTheStaticIP: node-1 has the
// Elastic IP carrying cilium/static=egress associated with its primary
// address and reported; then its agent stops asking (the tags removed)
// or asks for another address (cilium/static=other, whose one free
// Elastic IP the account holds). The reconcile that releases the address
// writes the CiliumNode, assigned-static-ip cleared, before the
// DisassociateAddress, makes no association itself and asks to be
// looked at again at once; the NodeRouting's record and finalizer go
// only after the call. With other tags, the next reconciles associate
// the other address, and report it.
func TestCiliumNodeWrittenOnceWhenReleasingTheStaticIP(t *testing.T) {
	egress, other := map[string]string{"cilium/static": "egress"}, map[string]string{"cilium/static": "other"}
	for _, tc := range []struct {
		name string
		tags map[string]string
	}{
		{name: "tags removed"},
		{name: "tags changed", tags: other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fi, pre := int32(1), int32(2)
			w := newWritesRig(t, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre, SubnetTags: map[string]string{"pods": "true"}},
				ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{StaticIPTags: egress}}, 1, egress)
			alloc, err := w.st.AllocateAddress(ec2sim.AllocateAddressRequest{TagSpecifications: []ec2sim.TagSpecification{{
				ResourceType: "elastic-ip", Tags: []ec2sim.Tag{{Key: "cilium/static", Value: "other"}}}}})
			if err != nil {
				t.Fatal(err)
			}
			// until reconciles the node until done, playing its agent.
			until := func(what string, done func(*ciliumv2.CiliumNode) bool) *ciliumv2.CiliumNode {
				t.Helper()
				for i := 0; ; i++ {
					_, _, cn := w.reconcile()
					if done(cn) {
						return cn
					}
					if i == 200 {
						t.Fatalf("no %s after %d reconciles: assigned static IP %q; EC2 calls %v", what, i, cn.Status.IPAM.AssignedStaticIP, w.calls)
					}
					w.route(cn)
					time.Sleep(100 * time.Millisecond)
				}
			}
			first := until("static IP", func(cn *ciliumv2.CiliumNode) bool { return cn.Status.IPAM.AssignedStaticIP != "" }).Status.IPAM.AssignedStaticIP
			if first == alloc.PublicIP {
				t.Fatalf("the node got %s, which does not carry its tags", first)
			}

			cn := get(t, w.base, writesNode)
			orig := cn.DeepCopy()
			cn.Spec.IPAM.StaticIPTags = tc.tags
			if err := w.base.Patch(w.ctx, cn, client.MergeFrom(orig)); err != nil {
				t.Fatal(err)
			}
			w.calls = map[string]int{}
			_, _, after := w.reconcile()
			if w.calls["DisassociateAddress"] != 1 || w.calls["AssociateAddress"] != 0 {
				t.Errorf("the releasing reconcile made EC2 calls %v, want one DisassociateAddress and no AssociateAddress", w.calls)
			}
			if after.Status.IPAM.AssignedStaticIP != "" {
				t.Errorf("assigned-static-ip %q after the release, want none", after.Status.IPAM.AssignedStaticIP)
			}
			if w.result.RequeueAfter <= 0 || w.result.RequeueAfter > time.Millisecond {
				t.Errorf("the releasing reconcile asks to be looked at again after %v, want at once", w.result.RequeueAfter)
			}
			for _, a := range w.st.Dump().Addresses {
				if a.PublicIP == first && a.AssociationID != "" {
					t.Errorf("%s still associated (%s) after the release", first, a.AssociationID)
				}
			}
			nr := &enipamv1alpha1.NodeRouting{}
			if err := w.base.Get(w.ctx, client.ObjectKey{Name: writesNode}, nr); err != nil {
				t.Fatal(err)
			}
			if nr.Spec.StaticIP != nil || len(nr.Finalizers) > 0 {
				t.Errorf("NodeRouting still records %+v, finalizers %v", nr.Spec.StaticIP, nr.Finalizers)
			}
			if tc.tags == nil {
				w.reconcile()
				if w.calls["AssociateAddress"] != 0 || w.calls["DisassociateAddress"] != 1 {
					t.Errorf("EC2 calls %v after the release, want none more", w.calls)
				}
				return
			}
			cn = until("new static IP", func(cn *ciliumv2.CiliumNode) bool { return cn.Status.IPAM.AssignedStaticIP != "" })
			if got := cn.Status.IPAM.AssignedStaticIP; got != alloc.PublicIP {
				t.Errorf("assigned-static-ip %q, want %s (the address carrying the new tags)", got, alloc.PublicIP)
			}
			if w.calls["AssociateAddress"] != 1 || w.calls["DisassociateAddress"] != 1 {
				t.Errorf("EC2 calls %v, want one DisassociateAddress and one AssociateAddress", w.calls)
			}
		})
	}
}

// TestStaticIPFailureStandsWhileRetried: node-1 asks for the Elastic IP
// carrying cilium/static=egress, and EC2 refuses its first
// AssociateAddress; or it has it and stops asking, and EC2 refuses its
// first DisassociateAddress. The failure, met by the executor after the
// CiliumNode's write, is written in the operator-status by the next
// reconcile, which tries the same action again; once that succeeded,
// the reconcile after clears it.
func TestStaticIPFailureStandsWhileRetried(t *testing.T) {
	egress := map[string]string{"cilium/static": "egress"}
	for _, tc := range []struct {
		name, action, says string
		release            bool
	}{
		{name: "association", action: "AssociateAddress", says: "associating Elastic IP"},
		{name: "release", action: "DisassociateAddress", says: "disassociating Elastic IP", release: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fi, pre := int32(1), int32(2)
			w := newWritesRig(t, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre, SubnetTags: map[string]string{"pods": "true"}},
				ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{StaticIPTags: egress}}, 1, egress)
			if !tc.release {
				w.fail.failNext(tc.action, 1)
			}
			var cn *ciliumv2.CiliumNode
			for i := 0; ; i++ {
				if i == 200 {
					t.Fatalf("no static IP after %d reconciles: EC2 calls %v, operator-status %q", i, w.calls, cn.Status.IPAM.OperatorStatus.Error)
				}
				if _, _, cn = w.reconcile(); cn.Status.IPAM.AssignedStaticIP != "" {
					break
				}
				if !tc.release && w.calls[tc.action] == 1 {
					break
				}
				w.route(cn)
				time.Sleep(100 * time.Millisecond)
			}
			if tc.release {
				w.fail.failNext(tc.action, 1)
				orig := cn.DeepCopy()
				cn.Spec.IPAM.StaticIPTags = nil
				if err := w.base.Patch(w.ctx, cn, client.MergeFrom(orig)); err != nil {
					t.Fatal(err)
				}
				w.calls = map[string]int{}
				w.reconcile()
			}
			if w.calls[tc.action] != 1 {
				t.Fatalf("EC2 calls %v, want one %s, refused", w.calls, tc.action)
			}
			_, _, cn = w.reconcile()
			if got := cn.Status.IPAM.OperatorStatus.Error; !strings.Contains(got, tc.says) {
				t.Errorf("operator-status %q after the refused %s, want it to say %q", got, tc.action, tc.says)
			}
			if w.calls[tc.action] != 2 {
				t.Errorf("EC2 calls %v, want the %s tried again", w.calls, tc.action)
			}
			_, _, cn = w.reconcile()
			if got := cn.Status.IPAM.OperatorStatus.Error; got != "" {
				t.Errorf("operator-status %q once the %s went through, want none", got, tc.action)
			}
			if want := map[bool]string{false: "an address", true: "none"}[tc.release]; (cn.Status.IPAM.AssignedStaticIP == "") != tc.release {
				t.Errorf("assigned-static-ip %q, want %s", cn.Status.IPAM.AssignedStaticIP, want)
			}
		})
	}
}

// TestReassignmentWaitsForItsClaimReadAgain: claim ns/db-0 asks for
// 10.0.0.200 on node-1, and EC2 has the address on an ENI of the cluster
// attached nowhere, so node-1's reconcile decides to reassign it onto an
// ENI of its own. The decision reads the claim from the apiserver; the
// executor reads it again right before the call (stillTargeted), since
// the CiliumNode's write sits between the two. When kube-scheduler's
// bind retry asks the claim onto node-2, or the claim is deleted,
// between those two reads, no reassignment is made, then or later, and
// the address stays where it was; left alone, the same reconcile makes
// it.
func TestReassignmentWaitsForItsClaimReadAgain(t *testing.T) {
	const addr, subnet = "10.0.0.200", "subnet-0d000000000000001"
	for _, tc := range []struct {
		name string
		// change changes the claim between the decision's read and the
		// executor's; nil: left alone.
		change func(w *writesRig, c *enipamv1alpha1.StaticIPClaim) error
	}{
		{name: "left alone"},
		{name: "asked onto another node", change: func(w *writesRig, c *enipamv1alpha1.StaticIPClaim) error {
			c.Spec.NodeName = "node-2"
			return w.base.Update(w.ctx, c)
		}},
		{name: "deleted", change: func(w *writesRig, c *enipamv1alpha1.StaticIPClaim) error {
			return w.base.Delete(w.ctx, c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fi, pre := int32(1), int32(2)
			var holder string
			prepare := func(api cloud.API) {
				eni, err := api.CreateENI(context.Background(), cloud.CreateENIRequest{SubnetID: subnet, Tags: map[string]string{cloud.TagCluster: "test"}})
				if err != nil {
					t.Fatal(err)
				}
				if err := api.AssignAddresses(context.Background(), eni.ID, []netip.Addr{netip.MustParseAddr(addr)}, false); err != nil {
					t.Fatal(err)
				}
				holder = eni.ID
			}
			w := newWritesRigPrepared(t, prepare, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre, SubnetTags: map[string]string{"pods": "true"}},
				ciliumv2.NodeSpec{}, 0, nil, &enipamv1alpha1.StaticIPClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Generation: 1},
					Spec:       enipamv1alpha1.StaticIPClaimSpec{Address: addr, NodeName: writesNode},
					Status:     enipamv1alpha1.StaticIPClaimStatus{Phase: enipamv1alpha1.ClaimPending, ObservedGeneration: 1},
				})
			// The decision reads the claim once in the reconcile that
			// decides the reassignment; the executor's read is the
			// second.
			changed := false
			w.onClaimGet = func(key client.ObjectKey, n int) {
				if n != 2 || tc.change == nil || changed || key.Name != "db-0" {
					return
				}
				c := &enipamv1alpha1.StaticIPClaim{}
				if err := w.base.Get(w.ctx, key, c); err != nil {
					t.Fatal(err)
				}
				if err := tc.change(w, c); err != nil {
					t.Fatal(err)
				}
				changed = true
			}
			holds := func() string {
				for _, e := range w.st.Dump().NetworkInterfaces {
					if slices.ContainsFunc(e.PrivateIPAddresses, func(a ec2sim.PrivateIPAddress) bool { return a.PrivateIPAddress == addr }) {
						return e.NetworkInterfaceID
					}
				}
				return ""
			}
			for i := 0; i < 200 && !changed && w.calls["AssignAddresses"] == 0; i++ {
				_, _, cn := w.reconcile()
				if w.calls["AssignAddresses"] > 0 && w.claimGets < 2 {
					t.Fatalf("the reassignment was made after %d reads of its claim in its reconcile, want the decision's and the executor's", w.claimGets)
				}
				w.route(cn)
				time.Sleep(100 * time.Millisecond)
			}
			if tc.change == nil {
				if w.calls["AssignAddresses"] != 1 || holds() == holder {
					t.Fatalf("no reassignment of a claim left alone: EC2 calls %v, %s on %s", w.calls, addr, holds())
				}
				return
			}
			if !changed {
				t.Fatalf("no reconcile read the claim twice (EC2 calls %v): the reassignment was never decided", w.calls)
			}
			for range 5 {
				w.reconcile()
			}
			if n := w.calls["AssignAddresses"]; n != 0 || holds() != holder {
				t.Errorf("%d AssignAddresses after the claim was %s, %s on %s; want none, the address left on %s", n, tc.name, addr, holds(), holder)
			}
		})
	}
}

// TestNoEC2CallWhileDeciding: node-1 has a pod ENI of the cluster,
// attached before the operator started, whose three addresses its agent
// reports routed and its pool lacks: the operator's first describes may
// predate an earlier process's Unassign, so the addresses enter the pool
// only once a describe by ID made after the consistency grace confirms
// them. That describe is asked for by a decision (decideReads), and made
// once it is over, before the node is decided again on what it showed:
// from the start of each decision to the CiliumNode's write (or to its
// end, for one that asks for a describe), no EC2 call is made, reads
// included; the addresses enter the pool in the write of the reconcile
// that described their ENI.
func TestNoEC2CallWhileDeciding(t *testing.T) {
	fi, pre := int32(1), int32(2)
	var eniID string
	var ips []string
	prepare := func(api cloud.API) {
		ctx := context.Background()
		eni, err := api.CreateENI(ctx, cloud.CreateENIRequest{SubnetID: "subnet-0d000000000000001", SecondaryIPs: 3, Tags: map[string]string{cloud.TagCluster: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ip := range attachAt1(t, api, eni.ID).IPs {
			ips = append(ips, ip.String())
		}
		eniID = eni.ID
	}
	w := newWritesRigPrepared(t, prepare, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre, SubnetTags: map[string]string{"pods": "true"}},
		ciliumv2.NodeSpec{}, 0, nil)
	if len(ips) != 3 {
		t.Fatalf("the pod ENI holds %v, want 3 addresses", ips)
	}
	pooled := func(cn *ciliumv2.CiliumNode) bool {
		for _, ip := range ips {
			if _, ok := cn.Spec.IPAM.Pool[ip]; !ok {
				return false
			}
		}
		return true
	}
	decided := 0
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatalf("%v never pooled after %d reconciles; EC2 calls %v", ips, i, w.calls)
		}
		w.described.take()
		_, before, after := w.reconcile()
		described := w.described.take()
		if len(w.decidedCalls) > 0 {
			t.Errorf("reconcile %d made EC2 calls %v between the start of its decision and the CiliumNode's write", i, w.decidedCalls)
		}
		if pooled(after) {
			if pooled(before) {
				t.Fatalf("%v pooled before the reconcile that confirmed them", ips)
			}
			if !slices.Contains(described, eniID) {
				t.Errorf("%v pooled by a reconcile that described %v, not %s", ips, described, eniID)
			}
			// The describe is asked for by a decision (decideReads),
			// whose window closes before it is made; the node is then
			// decided again on what it showed.
			if n := w.decisions.Load(); n != 2 {
				t.Errorf("the reconcile that described %s decided %d times, want 2: asking for the describe, then on what it showed", eniID, n)
			}
			decided = i
			break
		}
		w.route(after)
		// Past the consistency grace (1 s), describes are trusted.
		time.Sleep(300 * time.Millisecond)
	}
	if n := w.calls["CreateENI"] + w.calls["AssignIPs"]; n != 0 {
		t.Errorf("%d new ENIs or addresses asked for, want none: the ENI's addresses serve the node", n)
	}
	t.Logf("%s's addresses %v pooled by reconcile %d", eniID, ips, decided)
}

// TestNoEC2CallWhileDecidingOnADetachedENI: node-1's primary ENI holds
// three addresses and its pod ENI of the cluster none, both from before
// the operator started; the policy releases excess at once and
// consolidates an ENI left empty for a millisecond. The pod ENI is
// detached, then deleted once EC2 shows it detached: the describe by ID
// that tells is made while the reconcile reads; from the start of each
// decision to the CiliumNode's write, no EC2 call is made, reads
// included.
func TestNoEC2CallWhileDecidingOnADetachedENI(t *testing.T) {
	release, pre := true, int32(2)
	on := true
	var eniID string
	prepare := func(api cloud.API) {
		ctx := context.Background()
		_, enis, err := api.GetInstances(ctx, []string{writesInstance})
		if err != nil || len(enis) == 0 {
			t.Fatalf("the instance's ENIs: %v, %v", enis, err)
		}
		if _, err := api.AssignIPs(ctx, enis[0].ID, 3); err != nil {
			t.Fatal(err)
		}
		eni, err := api.CreateENI(ctx, cloud.CreateENIRequest{SubnetID: "subnet-0d000000000000001", Tags: map[string]string{cloud.TagCluster: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		attachAt1(t, api, eni.ID)
		eniID = eni.ID
	}
	w := newWritesRigPrepared(t, prepare, enipamv1alpha1.ENIPolicySpec{PreAllocate: &pre, ReleaseExcessIPs: &release,
		ExcessIPReleaseDelay: &metav1.Duration{}, SubnetTags: map[string]string{"pods": "true"},
		Consolidation: &enipamv1alpha1.Consolidation{Enabled: &on, Delay: &metav1.Duration{Duration: time.Millisecond}}}, ciliumv2.NodeSpec{}, 0, nil)
	gone := func() bool {
		return !slices.ContainsFunc(w.st.Dump().NetworkInterfaces, func(e ec2sim.NetworkInterface) bool { return e.NetworkInterfaceID == eniID })
	}
	for i := 0; !gone(); i++ {
		if i == 100 {
			t.Fatalf("%s not deleted after %d reconciles", eniID, i)
		}
		w.described.take()
		_, _, after := w.reconcile()
		if len(w.decidedCalls) > 0 {
			t.Errorf("reconcile %d made EC2 calls %v between the start of its decision and the CiliumNode's write (it described %v)", i, w.decidedCalls, w.described.take())
		}
		w.route(after)
		time.Sleep(300 * time.Millisecond)
	}
}

// TestNoAPIWriteWhileDeciding: node-1 asks for an Elastic IP carrying
// cilium/static=egress, free in the account (the association's record),
// or already associated with its primary address before the operator
// started (a record of the address found there); or it is the node of
// claim ns/db-0 for 10.0.0.200, an address no ENI holds, whose notes
// tell where its placement stands. From the start of each decision to
// the CiliumNode's write, no apiserver write is made, nor any read of the
// cache (the pool's inputs are read beforehand): the association's
// record is the executor's, right before its call; the found address's
// record goes with the NodeRouting's write; the notes follow the
// CiliumNode's write. Nor is the state shared between nodes changed
// while deciding (the needs, the EC2 slots, the nodes' states, the
// metrics): the decision says what the reconcile changes there after
// it. The node reports the Elastic IP only once its record is stored,
// and the claim's address ends in the pool, stamped.
func TestNoAPIWriteWhileDeciding(t *testing.T) {
	const addr, owner = "10.0.0.200", "ns/db-0"
	egress := map[string]string{"cilium/static": "egress"}
	for _, tc := range []struct {
		name         string
		eip, onFirst bool
		claim        bool
	}{
		{name: "association", eip: true},
		{name: "found on the primary address", eip: true, onFirst: true},
		{name: "claim notes", claim: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fi, pre := int32(1), int32(2)
			var tags map[string]string
			var objs []client.Object
			if tc.eip {
				tags = egress
			}
			if tc.claim {
				objs = append(objs, &enipamv1alpha1.StaticIPClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Generation: 1},
					Spec:       enipamv1alpha1.StaticIPClaimSpec{Address: addr, NodeName: writesNode},
					Status:     enipamv1alpha1.StaticIPClaimStatus{Phase: enipamv1alpha1.ClaimPending, ObservedGeneration: 1},
				})
			}
			var prepare func(cloud.API)
			if tc.onFirst {
				prepare = func(api cloud.API) {
					ctx := context.Background()
					_, enis, err := api.GetInstances(ctx, []string{writesInstance})
					if err != nil {
						t.Fatal(err)
					}
					addrs, err := api.ListAddresses(ctx)
					if err != nil || len(addrs) != 1 {
						t.Fatalf("Elastic IPs %v, %v; want one", addrs, err)
					}
					for _, e := range enis {
						if e.DeviceIndex == 0 {
							if _, err := api.AssociateAddress(ctx, addrs[0].AllocationID, e.ID, e.PrimaryIP, false); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			w := newWritesRigPrepared(t, prepare, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre, SubnetTags: map[string]string{"pods": "true"}},
				ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{StaticIPTags: tags}}, 1, egress, objs...)
			done := func(cn *ciliumv2.CiliumNode) bool {
				return (!tc.claim || cn.Spec.IPAM.Pool[addr].Owner == owner) && (!tc.eip || cn.Status.IPAM.AssignedStaticIP != "")
			}
			var cn *ciliumv2.CiliumNode
			for i := 0; ; i++ {
				if i == 200 {
					t.Fatalf("after %d reconciles: pool entry %+v, assigned static IP %q; EC2 calls %v", i, cn.Spec.IPAM.Pool[addr], cn.Status.IPAM.AssignedStaticIP, w.calls)
				}
				_, _, cn = w.reconcile()
				if len(w.decidedWrites) > 0 {
					t.Errorf("reconcile %d made apiserver writes %v between the start of its decision and the CiliumNode's write", i, w.decidedWrites)
				}
				if len(w.decidedReads) > 0 {
					t.Errorf("reconcile %d read %v while deciding", i, w.decidedReads)
				}
				if len(w.decidedShared) > 0 {
					t.Errorf("reconcile %d changed the state shared between nodes while deciding: %v", i, w.decidedShared)
				}
				if ip := cn.Status.IPAM.AssignedStaticIP; ip != "" {
					nr := &enipamv1alpha1.NodeRouting{}
					if err := w.base.Get(w.ctx, client.ObjectKey{Name: writesNode}, nr); err != nil {
						t.Fatal(err)
					}
					if nr.Spec.StaticIP == nil || nr.Spec.StaticIP.PublicIP != ip || len(nr.Finalizers) == 0 {
						t.Errorf("reconcile %d reports %s while the NodeRouting records %+v, finalizers %v", i, ip, nr.Spec.StaticIP, nr.Finalizers)
					}
				}
				if done(cn) {
					break
				}
				w.route(cn)
				time.Sleep(100 * time.Millisecond)
			}
			if want := btoi(tc.eip && !tc.onFirst); w.calls["AssociateAddress"] != want {
				t.Errorf("%d AssociateAddress, want %d; EC2 calls %v", w.calls["AssociateAddress"], want, w.calls)
			}
			if tc.claim && w.apiWrites.total("*v1alpha1.StaticIPClaim/status") == 0 {
				t.Errorf("no note written on %s", owner)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestUnreadableObjectsAreNoEC2Error: when the StaticIPClaims
// concerning a node cannot be listed, or its NodeRouting cannot be read,
// the node is not served and the warning names the cause
// (StaticIPClaimsUnreadable, NodeRoutingUnreadable), not an EC2 refusal;
// once they can be read again, the node is served.
func TestUnreadableObjectsAreNoEC2Error(t *testing.T) {
	for _, tc := range []struct {
		name, reason, says string
		fail               func(*writesRig) *atomic.Bool
	}{
		{"claims", poolcontroller.ReasonClaimsUnreadable, "static IP claims", func(w *writesRig) *atomic.Bool { return w.failClaimLists }},
		{"NodeRouting", poolcontroller.ReasonRoutingUnreadable, "NodeRouting", func(w *writesRig) *atomic.Bool { return w.failRoutingGets }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fi, pre := int32(1), int32(2)
			w := newWritesRig(t, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre, SubnetTags: map[string]string{"pods": "true"}},
				ciliumv2.NodeSpec{}, 0, nil)
			tc.fail(w).Store(true)
			_, _, cn := w.reconcile()
			if len(w.calls) != 0 || len(cn.Spec.IPAM.Pool) != 0 {
				t.Errorf("a node whose %s cannot be read was served: EC2 calls %v, pool %v", tc.name, w.calls, cn.Spec.IPAM.Pool)
			}
			var reasons []string
			for len(w.events.Events) > 0 {
				e := <-w.events.Events
				reasons = append(reasons, e)
			}
			if !slices.ContainsFunc(reasons, func(e string) bool { return strings.HasPrefix(e, "Warning "+tc.reason+" ") }) ||
				slices.ContainsFunc(reasons, func(e string) bool { return strings.Contains(e, poolcontroller.ReasonEC2Error) }) {
				t.Errorf("events %q, want a %s warning and no %s", reasons, tc.reason, poolcontroller.ReasonEC2Error)
			}
			if !strings.Contains(cn.Status.IPAM.OperatorStatus.Error, tc.says) {
				t.Errorf("operator-status %q does not say the %s could not be read", cn.Status.IPAM.OperatorStatus.Error, tc.name)
			}
			tc.fail(w).Store(false)
			for i := 0; w.calls["CreateENI"] == 0; i++ {
				if i == 50 {
					t.Fatalf("the node was not served once its %s could be read: EC2 calls %v", tc.name, w.calls)
				}
				w.reconcile()
			}
		})
	}
}

// attachAt1 attaches eniID to the rig's instance at device index 1 and
// returns it once EC2 shows it attached.
func attachAt1(t *testing.T, api cloud.API, eniID string) cloud.ENI {
	t.Helper()
	ctx := context.Background()
	if _, err := api.AttachENI(ctx, eniID, writesInstance, 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		got, err := api.GetENIs(ctx, []string{eniID})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0].AttachmentStatus == cloud.AttachmentAttached {
			return got[0]
		}
		if i == 100 {
			t.Fatalf("%s never attached: %+v", eniID, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestJoiningNodeWritesEachObjectInTheReconcilesOrder: node-1, an
// m5.large whose policy keeps the primary ENI for the host
// (first-interface-index 1) and pre-allocates 8, joins with no
// NodeRouting yet: from nothing, or with a pod ENI of 8 addresses
// already attached (a node the operator first sees with its ENIs). It
// is reconciled, its agent reporting what the CiliumNode lists, until
// its pool holds 8 addresses. Every reconcile writes the CiliumNode
// first (status, then spec), then the NodeRouting (the reconcile's one
// apply, which makes it in the first reconcile): the read writes
// nothing. Through the join the operator writes the CiliumNode's status
// once, its spec once from nothing and twice with the ENI there, and
// the NodeRouting 3 times either way (before the read stopped writing:
// the same from nothing, and 4 NodeRouting writes with the ENI there,
// where the read made the NodeRouting before the CiliumNode's status
// and the reconcile's write applied it again after).
func TestJoiningNodeWritesEachObjectInTheReconcilesOrder(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		attached                  bool
		specWrites, routingWrites int
	}{
		{name: "from nothing", specWrites: 1, routingWrites: 3},
		{name: "with a pod ENI attached", attached: true, specWrites: 2, routingWrites: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prepare func(cloud.API)
			if tc.attached {
				prepare = func(api cloud.API) {
					ctx := context.Background()
					eni, err := api.CreateENI(ctx, cloud.CreateENIRequest{SubnetID: "subnet-0d000000000000001", SecondaryIPs: 8,
						Tags: map[string]string{cloud.TagCluster: "test", cloud.TagInstance: writesInstance}})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := api.AttachENI(ctx, eni.ID, writesInstance, 1); err != nil {
						t.Fatal(err)
					}
				}
			}
			fi, pre := int32(1), int32(8)
			w := newWritesRigPrepared(t, prepare, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre}, ciliumv2.NodeSpec{}, 0, nil)
			const (
				status  = "*v2.CiliumNode/status patch"
				spec    = "*v2.CiliumNode patch"
				routing = "*v1alpha1.NodeRouting patch"
			)
			rank := map[string]int{status: 0, spec: 1, routing: 2}
			counts := map[string]int{}
			for i := 0; ; i++ {
				if i == 100 {
					t.Fatalf("node-1's pool not filled after %d reconciles; writes %v", i, counts)
				}
				_, _, cn := w.reconcile()
				order := w.apiWrites.takeOrder()
				if i == 0 && (len(order) == 0 || order[len(order)-1] != routing) {
					t.Errorf("the first reconcile wrote %v; want the NodeRouting made last", order)
				}
				last := -1
				for _, o := range order {
					r, ok := rank[o]
					if !ok {
						t.Fatalf("reconcile %d wrote %q: %v", i, o, order)
					}
					if r <= last {
						t.Errorf("reconcile %d wrote %v; want status, spec, NodeRouting, each at most once, in that order", i, order)
					}
					last = r
					counts[o]++
				}
				if len(cn.Spec.IPAM.Pool) >= 8 {
					break
				}
				w.route(cn)
				time.Sleep(100 * time.Millisecond)
			}
			// No status write: the joining node's ENIs reach its agent in
			// the NodeRouting's spec.enis, and their copy into
			// status.eni.enis waits a resync interval past the join.
			if counts[status] != 0 || counts[spec] != tc.specWrites || counts[routing] > tc.routingWrites {
				t.Errorf("writes through the join: %d status, %d spec, %d NodeRouting; want 0, %d and at most %d",
					counts[status], counts[spec], counts[routing], tc.specWrites, tc.routingWrites)
			}
			t.Logf("writes through the join: %d status, %d spec, %d NodeRouting", counts[status], counts[spec], counts[routing])
		})
	}
}
