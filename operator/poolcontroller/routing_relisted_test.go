package poolcontroller

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestReportOverAnEarlierSpecVouchesOnlyForTheENIsStillListed: the
// interleaving of test/e2e's handed-before-routed failure (the reclaim
// test in the package run: the NodeRouting an earlier test's node of the
// same name left, whose spec.enis and report list eni-1, and ec2sim's
// seed gives the new node the same ENI ID and addresses). A reconcile
// sees eni-1 nowhere on the instance and applies spec.enis without it
// (generation 2): the agent unroutes it and reports so. The next
// reconcile, the ENI now attached, reads a cache that has not delivered
// that report: the report there, over generation 1, lists eni-1 routed.
// It must not vouch for eni-1's addresses, which the agent's union lost
// with generation 2; once the agent reports over the generation that
// lists eni-1 again, it does.
func TestReportOverAnEarlierSpecVouchesOnlyForTheENIsStillListed(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := enipamv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("10.3.16.7")
	eni := func(id string, number int, ips ...string) awstypes.ENI {
		e := awstypes.ENI{ID: id, MAC: "02:00:00:00:00:0" + id[len(id)-1:], Number: number}
		e.Subnet.ID, e.Subnet.CIDR = "subnet-b", ciliumip.PrefixFrom(netip.MustParsePrefix("10.3.16.0/20"))
		for _, ip := range ips {
			e.Addresses = append(e.Addresses, ciliumip.AddrFrom(netip.MustParseAddr(ip)))
		}
		return e
	}
	primary, second := eni("eni-0", 0), eni("eni-1", 1, "10.3.16.7", "10.3.16.8")
	report := func(gen int64, enis ...string) enipamv1alpha1.NodeRoutingStatus {
		st := enipamv1alpha1.NodeRoutingStatus{ObservedGeneration: gen, RoutesSpecENIs: true}
		for _, id := range enis {
			e := enipamv1alpha1.RoutedENI{ID: id}
			if id == "eni-1" {
				e.Number, e.IPs = 1, []string{"10.3.16.7", "10.3.16.8"}
			}
			st.ENIs = append(st.ENIs, e)
		}
		return st
	}
	// What an earlier life of the node left: eni-1 listed and routed.
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-nr", Generation: 1},
		Spec: enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-4", FirstInterfaceIndex: 1,
			ENIs: []enipamv1alpha1.NodeENI{specENI(&primary, nil), specENI(&second, nil)}},
		Status: report(1, "eni-0", "eni-1")}
	var stale *enipamv1alpha1.NodeRouting // what the lagging cache shows
	base := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nr).WithStatusSubresource(nr).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if stale != nil {
				stale.DeepCopyInto(obj.(*enipamv1alpha1.NodeRouting))
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			before := &enipamv1alpha1.NodeRouting{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), before); err != nil {
				return err
			}
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			nr := obj.(*enipamv1alpha1.NodeRouting)
			if equality.Semantic.DeepEqual(before.Spec, nr.Spec) {
				return nil
			}
			nr.Generation = before.Generation + 1 // as the apiserver does
			return c.Update(ctx, nr)
		},
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &Reconciler{client: c, now: time.Now, log: log, nodes: map[string]*memory{}, inv: inventory.New(nil, inventory.Options{}, log)}
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}}
	onInstance := func(enis ...awstypes.ENI) snapshot.Node {
		var snap snapshot.Node
		for _, e := range enis {
			snap.ENIs = append(snap.ENIs, cloud.ENI{ID: e.ID, InstanceID: "i-4", DeviceIndex: e.Number})
		}
		return snap
	}
	// reconcile reads the NodeRouting with EC2 showing enis on the
	// instance, lists them in spec.enis and writes; it returns the
	// report's word on eni-1's first address as the reconcile read it.
	reconcile := func(enis ...awstypes.ENI) bool {
		t.Helper()
		s := testSync(r, cn, deciding{mem: r.memory("n1"), cn: cn.DeepCopy(),
			nodeState: nodeState{instanceID: "i-4", haveSnap: true, snap: onInstance(enis...)}})
		s.cfg.FirstInterfaceIndex = 1
		if err := s.syncRouting(context.Background()); err != nil {
			t.Fatal(err)
		}
		routed := s.routed != nil && s.routed("eni-1", addr)
		listed := map[string]awstypes.ENI{}
		for _, e := range enis {
			listed[e.ID] = e
		}
		s.wantRoutingENIs(listed, nil)
		if err := s.writeRouting(context.Background()); err != nil {
			t.Fatal(err)
		}
		return routed
	}
	stored := func() *enipamv1alpha1.NodeRouting {
		got := &enipamv1alpha1.NodeRouting{}
		if err := base.Get(context.Background(), types.NamespacedName{Name: "n1"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	agentReports := func(st enipamv1alpha1.NodeRoutingStatus) {
		t.Helper()
		got := stored()
		got.Status = st
		if err := base.Status().Update(context.Background(), got); err != nil {
			t.Fatal(err)
		}
	}

	stale = stored() // generation 1, the earlier life's report
	reconcile(primary)
	if got := stored(); got.Generation != 2 || len(got.Spec.ENIs) != 1 {
		t.Fatalf("scenario: the first apply left generation %d with %d ENIs listed, want 2 and 1", got.Generation, len(got.Spec.ENIs))
	}
	agentReports(report(2, "eni-0")) // eni-1 unrouted; the cache has not delivered it
	if reconcile(primary, second) {
		t.Error("a report over generation 1 vouched for eni-1's addresses after generation 2 dropped eni-1 from spec.enis")
	}
	if got := stored(); got.Generation != 3 || len(got.Spec.ENIs) != 2 {
		t.Fatalf("scenario: the second apply left generation %d with %d ENIs listed, want 3 and 2", got.Generation, len(got.Spec.ENIs))
	}

	stale = nil // the cache caught up; the agent routes eni-1 again
	agentReports(report(3, "eni-0", "eni-1"))
	if !reconcile(primary, second) {
		t.Error("the agent's report over the generation listing eni-1 does not vouch for its addresses")
	}
	// A report over an earlier generation still vouches for an ENI the
	// newer spec lists: the agent routes the newer list, eni-1 in it.
	stale = stored()
	stale.Generation++
	if !reconcile(primary, second) {
		t.Error("a report over an earlier generation does not vouch for an ENI the newer spec.enis still lists")
	}
}
