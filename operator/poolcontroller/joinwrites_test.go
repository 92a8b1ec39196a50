package poolcontroller

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// joinRig plays the writes of a joining node's reconciles: the
// CiliumNode and NodeRouting in a client (a change of the NodeRouting's
// spec makes a new generation, as the apiserver does), the instance's
// ENIs as EC2 shows them, the agent's report; each reconcile writes what
// the operator's would (write, then writeRouting) and the writes are
// counted.
type joinRig struct {
	t      *testing.T
	c      client.Client
	r      *Reconciler
	now    time.Time
	status int // CiliumNode status writes
	spec   int // CiliumNode spec writes
	// routingWrites counts NodeRouting patches and applies.
	routingWrites int
	enis          []cloud.ENI
	policy        policy.Config
	reported      bool
}

func newJoinRig(t *testing.T) *joinRig {
	j := &joinRig{t: t, now: time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)}
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}}
	cn.Spec.InstanceID = "i-1"
	j.c = interceptor.NewClient(fakeAPIServer(t, cn), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			nr, ok := obj.(*enipamv1alpha1.NodeRouting)
			if !ok {
				j.spec++
				return c.Patch(ctx, obj, patch, opts...)
			}
			j.routingWrites++
			before := &enipamv1alpha1.NodeRouting{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), before); client.IgnoreNotFound(err) != nil {
				return err
			}
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if equality.Semantic.DeepEqual(before.Spec, nr.Spec) {
				return nil
			}
			nr.Generation = before.Generation + 1 // as the apiserver does
			return c.Update(ctx, nr)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*ciliumv2.CiliumNode); ok {
				j.status++
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	j.restart()
	// m5.large under first interface index 1: 9 secondaries an ENI;
	// pre-allocate 8 and Cilium's 2 addresses need both ENIs.
	j.policy = policy.Config{Config: pool.Config{Knobs: pool.Knobs{PreAllocate: 8, AgentEndpoints: 2}, FirstInterfaceIndex: 1}, IPv4: true}
	j.enis = []cloud.ENI{{ID: "eni-0", MAC: "02:00:00:00:00:00", DeviceIndex: 0, SubnetID: "subnet-a", InstanceID: "i-1",
		Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached, PrimaryIP: netip.MustParseAddr("10.0.0.5")}}
	return j
}

// restart gives the rig a new Reconciler, with memories and metrics of
// its own: the operator's process started again (or upgraded).
func (j *joinRig) restart() {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		j.t.Fatal(err)
	}
	j.r = New(j.c, nil, inventory.New(nil, inventory.Options{}, log), nil, m,
		Options{BlockedRetry: time.Minute, ConsistencyGrace: time.Minute, Now: func() time.Time { return j.now }}, log)
}

// attach adds ENI n (device index n) with 9 secondaries, attaching.
func (j *joinRig) attach(n byte) {
	e := cloud.ENI{ID: "eni-" + string('0'+n), MAC: "02:00:00:00:00:0" + string('0'+n), DeviceIndex: int(n), SubnetID: "subnet-a",
		InstanceID: "i-1", Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttaching,
		PrimaryIP: netip.AddrFrom4([4]byte{10, 0, n, 4})}
	for i := range 9 {
		e.IPs = append(e.IPs, netip.AddrFrom4([4]byte{10, 0, n, byte(10 + i)}))
	}
	j.enis = append(j.enis, e)
}

// attached marks ENI id attached.
func (j *joinRig) attached(id string) {
	for i := range j.enis {
		if j.enis[i].ID == id {
			j.enis[i].AttachmentStatus = cloud.AttachmentAttached
		}
	}
}

// report writes the agent's report: every attached secondary ENI routed
// that the agent was told of, with routesSpecENIs as the agent says it.
func (j *joinRig) report(routesSpec bool, fromSpec bool) {
	nr := j.routing()
	cn := j.node()
	told := map[string]bool{}
	if fromSpec {
		for _, e := range nr.Spec.ENIs {
			told[e.ID] = true
		}
	}
	for id := range cn.Status.ENI.ENIs {
		told[id] = true
	}
	nr.Status = enipamv1alpha1.NodeRoutingStatus{ObservedGeneration: nr.Generation, RoutesSpecENIs: routesSpec}
	for _, e := range j.enis {
		if e.DeviceIndex == 0 || e.AttachmentStatus != cloud.AttachmentAttached || !told[e.ID] {
			continue
		}
		r := enipamv1alpha1.RoutedENI{ID: e.ID, MAC: e.MAC, Number: int32(e.DeviceIndex)}
		for _, ip := range e.IPs {
			r.IPs = append(r.IPs, ip.String())
		}
		nr.Status.ENIs = append(nr.Status.ENIs, r)
	}
	meta.SetStatusCondition(&nr.Status.Conditions, metav1.Condition{Type: enipamv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: enipamv1alpha1.ReasonRouted})
	if err := j.c.Status().Update(context.Background(), nr); err != nil {
		j.t.Fatal(err)
	}
	j.reported = true
}

func (j *joinRig) node() *ciliumv2.CiliumNode {
	cn := &ciliumv2.CiliumNode{}
	if err := j.c.Get(context.Background(), types.NamespacedName{Name: "n1"}, cn); err != nil {
		j.t.Fatal(err)
	}
	return cn
}

func (j *joinRig) routing() *enipamv1alpha1.NodeRouting {
	nr := &enipamv1alpha1.NodeRouting{}
	if err := j.c.Get(context.Background(), types.NamespacedName{Name: "n1"}, nr); err != nil {
		j.t.Fatal(err)
	}
	return nr
}

// reconcile runs the write side of one reconcile: the pool is every
// address of an attached ENI the agent reports routed, the rest awaits;
// the write is decided (decideWrite), then made.
func (j *joinRig) reconcile() {
	ctx := context.Background()
	s := j.prepare()
	s.decideWrite()
	if err := s.write(ctx); err != nil {
		j.t.Fatal(err)
	}
	if err := s.writeRouting(ctx); err != nil {
		j.t.Fatal(err)
	}
}

// prepare makes a reconcile's sync up to its writes: the NodeRouting
// read, the pool decided.
func (j *joinRig) prepare() *nodeSync {
	ctx := context.Background()
	cn := j.node()
	s := j.r.newSync(ctx, cn, nil)
	s.instanceID, s.cfg, s.haveSnap = "i-1", j.policy, true
	s.snap = snapshot.Node{Instance: cloud.Instance{ID: "i-1", Type: "m5.large", VPCID: "vpc-1", AZ: "us-east-1a", SubnetID: "subnet-a"},
		Type: cloud.InstanceType{Name: "m5.large", MaxENIs: 3, IPv4PerENI: 10}, ENIs: slices.Clone(j.enis)}
	if err := s.readDecideRouting(ctx); err != nil {
		j.t.Fatal(err)
	}
	s.pool = &poolView{cn: s.cn}
	routed := s.routed
	if s.cn.Spec.IPAM.Pool == nil {
		s.cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	}
	for _, e := range j.enis {
		if e.DeviceIndex == 0 {
			continue
		}
		for _, ip := range e.IPs {
			if e.AttachmentStatus == cloud.AttachmentAttached && routed != nil && routed(e.ID, ip) {
				s.cn.Spec.IPAM.Pool[ip.String()] = ipamtypes.AllocationIP{Resource: e.ID}
			} else {
				s.pool.awaiting++
			}
		}
	}
	s.countPool()
	return s
}

// TestJoiningM5LargeWritesNoStatusPerENI: an m5.large node (first
// interface index 1, pre-allocate 8 plus Cilium's 2 addresses: two ENIs
// of 9) whose second ENI comes after its first is pooled: each ENI is
// told to the agent in the NodeRouting's spec.enis before any of its
// addresses is pooled, the pool takes each ENI's addresses once it is
// routed (two spec writes), and the CiliumNode's status is never written
// for them, during the join or after it: nothing reads a copy of the
// ENIs in status.eni.enis. An agent that reports without routesSpecENIs
// (an earlier version, which routes status.eni.enis alone) gets the
// copy at once.
func TestJoiningM5LargeWritesNoStatusPerENI(t *testing.T) {
	t.Run("agent routes spec.enis", func(t *testing.T) {
		j := newJoinRig(t)
		j.attach(1) // asked for in the reconcile that makes the NodeRouting
		j.reconcile()
		if got := specIDs(j.routing()); !slices.Equal(got, []string{"eni-0", "eni-1"}) {
			t.Fatalf("NodeRouting spec.enis %v, want eni-0 and eni-1 before any address of eni-1 is pooled", got)
		}
		j.attached("eni-1")
		j.report(true, true)
		j.reconcile()
		if n := len(j.node().Spec.IPAM.Pool); n != 9 {
			t.Fatalf("pool of %d addresses after eni-1 was routed, want its 9", n)
		}
		j.attach(2) // the second ENI, created once the first is pooled
		j.reconcile()
		if got := specIDs(j.routing()); !slices.Equal(got, []string{"eni-0", "eni-1", "eni-2"}) {
			t.Fatalf("NodeRouting spec.enis %v, want eni-2 listed too", got)
		}
		j.attached("eni-2")
		j.report(true, true)
		j.reconcile()
		if n := len(j.node().Spec.IPAM.Pool); n != 18 {
			t.Fatalf("pool of %d addresses after eni-2 was routed, want 18", n)
		}
		if j.status != 0 || j.spec != 2 {
			t.Errorf("joining: %d CiliumNode status writes and %d spec writes, want 0 and 2 (one per ENI's pool)", j.status, j.spec)
		}
		if n := len(j.node().Status.ENI.ENIs); n != 0 {
			t.Errorf("status.eni.enis lists %d ENIs during the join, want none yet", n)
		}

		// A resync interval later, and again: no copy of the ENIs into
		// status.eni.enis, which nothing reads.
		for range 2 {
			j.now = j.now.Add(61 * time.Second)
			j.reconcile()
		}
		if j.status != 0 || j.spec != 2 {
			t.Errorf("%d status writes and %d spec writes after the resync interval, want 0 and 2", j.status, j.spec)
		}
		if got := slices.Sorted(maps.Keys(j.node().Status.ENI.ENIs)); len(got) != 0 {
			t.Errorf("status.eni.enis %v, want none", got)
		}
		var copies dto.Metric
		if err := j.r.metrics.eniCopies.Write(&copies); err != nil || copies.GetCounter().GetValue() != 0 {
			n := copies.GetCounter().GetValue()
			t.Errorf("enipam_ciliumnode_eni_copies_total %v, want 0", n)
		}
	})

	t.Run("earlier agent", func(t *testing.T) {
		j := newJoinRig(t)
		j.attach(1)
		j.reconcile()
		if j.status != 0 {
			t.Fatalf("%d status writes before the agent reported, want 0 (it may route spec.enis)", j.status)
		}
		j.attached("eni-1")
		j.report(false, false) // routes status.eni.enis alone: nothing yet
		j.reconcile()
		if j.status != 1 || len(j.node().Status.ENI.ENIs) != 2 {
			t.Fatalf("%d status writes, status.eni.enis %v; want the ENIs listed at once for an earlier agent",
				j.status, slices.Sorted(maps.Keys(j.node().Status.ENI.ENIs)))
		}
		j.report(false, false)
		j.reconcile()
		if n := len(j.node().Spec.IPAM.Pool); n != 9 {
			t.Errorf("pool of %d addresses once the earlier agent routed eni-1, want 9", n)
		}
	})
}

func specIDs(nr *enipamv1alpha1.NodeRouting) []string {
	var ids []string
	for _, e := range nr.Spec.ENIs {
		ids = append(ids, e.ID)
	}
	return ids
}
