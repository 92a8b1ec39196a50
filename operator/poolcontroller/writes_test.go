package poolcontroller_test

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
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
}

func (c journaledCloud) CreateENI(ctx context.Context, req cloud.CreateENIRequest) (cloud.ENI, error) {
	c.j.add("ec2 CreateENI")
	return c.API.CreateENI(ctx, req)
}

func (c journaledCloud) AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error) {
	c.j.add("ec2 AttachENI")
	return c.API.AttachENI(ctx, eniID, instanceID, deviceIndex)
}

func (c journaledCloud) AssignIPs(ctx context.Context, eniID string, count int) ([]netip.Addr, error) {
	c.j.add("ec2 AssignIPs")
	return c.API.AssignIPs(ctx, eniID, count)
}

func (c journaledCloud) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	c.j.add("ec2 UnassignIPs")
	return c.API.UnassignIPs(ctx, eniID, ips)
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
	const node, instance = "node-1", "i-0d000000000000001"
	vpc := ec2sim.VPCSpec{ID: "vpc-0d000000000000001", CIDRs: []string{"10.0.0.0/16"}, Subnets: []ec2sim.SubnetSpec{
		{ID: "subnet-0d000000000000001", CIDR: "10.0.0.0/20", Zone: "us-east-1a", Tags: map[string]string{"pods": "true"}},
	}}
	st, err := ec2sim.NewState(&ec2sim.Scenario{Account: "123456789012", Region: "us-east-1", Zones: []string{"us-east-1a"},
		VPCs:      []ec2sim.VPCSpec{vpc},
		Instances: []ec2sim.InstanceSpec{{ID: instance, Name: node, Type: "m5.large", Subnet: "subnet-0d000000000000001"}}}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	api := journaledCloud{API: cloudfake.New(st), j: j}
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	release, fi, pre := true, int32(1), int32(4)
	objs := []client.Object{
		&enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Spec: enipamv1alpha1.ENIPolicySpec{
			FirstInterfaceIndex: &fi, PreAllocate: &pre, ReleaseExcessIPs: &release,
			ExcessIPReleaseDelay: &metav1.Duration{}, SubnetTags: map[string]string{"pods": "true"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-node-1"},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}},
		&ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-cn-1"}},
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, idx := range claims.Indexes() {
		b = b.WithIndex(idx.Object, idx.Field, idx.Extract)
	}
	base := b.WithStatusSubresource(&ciliumv2.CiliumNode{}, &enipamv1alpha1.NodeRouting{}, &enipamv1alpha1.ENIPolicy{}, &enipamv1alpha1.StaticIPClaim{}).
		WithObjects(objs...).Build()
	// The operator's client journals its CiliumNode writes.
	c := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*ciliumv2.CiliumNode); ok {
				j.add("spec")
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*ciliumv2.CiliumNode); ok && sub == "status" {
				j.add("status")
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	r := poolcontroller.New(c, api, inv, events.NewFakeRecorder(1000), m, poolcontroller.Options{
		Cluster: "test", Workers: 1, ConsistencyGrace: time.Second, RoutingPatience: time.Hour,
		RetryBase: time.Millisecond, RetryMax: time.Millisecond, BlockedRetry: time.Hour,
	}, log)

	var (
		grewThenCalled, created, unassigned int
		released                            []string
	)
	// step reconciles the node, checks its journal, and plays the node's
	// agents: enipam-agent's routed report, and Cilium's agent using
	// every pool address (use) or none, acknowledging the addresses
	// marked for release and forgetting the released ones.
	step := func(use bool) *ciliumv2.CiliumNode {
		t.Helper()
		before := get(t, base, node)
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: node}}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		steps := j.take()
		after := get(t, base, node)
		writes, called := map[string]int{}, false
		for _, s := range steps {
			if s == "status" || s == "spec" {
				writes[s]++
				if called {
					t.Fatalf("the CiliumNode's %s written after an EC2 call, in one reconcile: %v", s, steps)
				}
				continue
			}
			called = true
			switch s {
			case "ec2 CreateENI":
				created++
			case "ec2 UnassignIPs":
				unassigned++
			}
		}
		if writes["status"] > 1 || writes["spec"] > 1 {
			t.Fatalf("one reconcile wrote the status %d times and the spec %d times, want at most once each: %v", writes["status"], writes["spec"], steps)
		}
		if called && len(after.Spec.IPAM.Pool) > len(before.Spec.IPAM.Pool) {
			grewThenCalled++
		}
		for ip := range before.Spec.IPAM.Pool {
			if _, ok := after.Spec.IPAM.Pool[ip]; !ok && after.Status.IPAM.ReleaseIPs[ip] == ipamoption.IPAMReleased {
				released = append(released, ip)
			}
		}

		nr := &enipamv1alpha1.NodeRouting{}
		if err := base.Get(ctx, client.ObjectKey{Name: node}, nr); err == nil {
			attached := map[string]bool{}
			for _, e := range st.Dump().NetworkInterfaces {
				if e.Attachment != nil && e.Attachment.Status == "attached" {
					attached[e.NetworkInterfaceID] = true
				}
			}
			if routed := agentsim.Routed(after, &nr.Spec, func(id string) bool { return attached[id] }); !equality.Semantic.DeepEqual(routed, nr.Status.ENIs) {
				nr.Status.ENIs = routed
				if err := base.Status().Update(ctx, nr); err != nil {
					t.Fatal(err)
				}
			}
		}
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
			t.Fatalf("no second pod ENI after %d reconciles (%d created)", i, created)
		}
		if cn := step(true); created >= 2 && len(cn.Spec.IPAM.Pool) > 9 {
			break
		}
	}
	// Shrink: nothing used; the excess leaves through the handshake.
	for i := 0; len(released) == 0 || unassigned == 0; i++ {
		if i == 200 {
			t.Fatalf("no address released after %d reconciles (%d Unassigns)", i, unassigned)
		}
		step(false)
	}
	if grewThenCalled == 0 {
		t.Errorf("no reconcile both grew the pool and called EC2: the write-before-act case was never exercised")
	}
	cn := get(t, base, node)
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
	t.Logf("%d CreateENI, %d UnassignIPs, %d addresses released, %d reconciles grew the pool and then called EC2", created, unassigned, len(released), grewThenCalled)
}

func get(t *testing.T, c client.Client, name string) *ciliumv2.CiliumNode {
	t.Helper()
	cn := &ciliumv2.CiliumNode{}
	if err := c.Get(context.Background(), k8stypes.NamespacedName{Name: name}, cn); err != nil {
		t.Fatal(err)
	}
	return cn
}
