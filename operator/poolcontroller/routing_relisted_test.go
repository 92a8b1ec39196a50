package poolcontroller

import (
	"context"
	"net/netip"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestReportOverAnEarlierSpecVouchesOnlyForWhatItStillLists: the
// interleaving named for test/e2e's handed-before-routed failure (the
// reclaim test in the package run pooled two addresses of node-4's
// primary ENI that its report listed, then dropped, then listed again;
// at that test's start node-4's spec.enis has been seen listing ENIs and
// addresses of node-4's subnet that EC2 did not show there). A reconcile sees an address (or a whole ENI)
// nowhere on the instance and applies spec.enis without it (generation
// 2): the agent unroutes it and reports so. The next reconcile, the
// address assigned again, reads a cache that has not delivered that
// report: the report there, over generation 1, lists it routed. It must
// not vouch for it, which the agent's union lost with generation 2; once
// the agent reports over the generation that lists it again, it does.
func TestReportOverAnEarlierSpecVouchesOnlyForWhatItStillLists(t *testing.T) {
	eni := func(id string, number int, ips ...string) awstypes.ENI {
		e := awstypes.ENI{ID: id, MAC: "02:00:00:00:00:0" + id[len(id)-1:], Number: number}
		e.Subnet.ID, e.Subnet.CIDR = "subnet-b", ciliumip.PrefixFrom(netip.MustParsePrefix("10.3.16.0/20"))
		for _, ip := range ips {
			e.Addresses = append(e.Addresses, ciliumip.AddrFrom(netip.MustParseAddr(ip)))
		}
		return e
	}
	t.Run("an ENI dropped and listed again", func(t *testing.T) {
		primary, second := eni("eni-0", 0), eni("eni-1", 1, "10.3.16.7", "10.3.16.8")
		relisted(t, "eni-1", []awstypes.ENI{primary, second}, []awstypes.ENI{primary}, []awstypes.ENI{primary, second})
	})
	t.Run("an address dropped from its ENI and listed again", func(t *testing.T) {
		held, bare := eni("eni-0", 0, "10.3.16.7", "10.3.16.8"), eni("eni-0", 0, "10.3.16.5")
		relisted(t, "eni-0", []awstypes.ENI{held}, []awstypes.ENI{bare}, []awstypes.ENI{held})
	})
}

// relisted plays the interleaving on node n1 (instance i-4, first
// interface index 0): spec.enis and the agent's report over generation 1
// list before (the report with 10.3.16.7 and 10.3.16.8 on the ENI probe),
// a reconcile sees dropped on the instance, the next one, over the
// lagging cache, relisted. probe's 10.3.16.7 is what is looked up.
func relisted(t *testing.T, probe string, before, dropped, relisted []awstypes.ENI) {
	addr := netip.MustParseAddr("10.3.16.7")
	report := func(gen int64, enis ...awstypes.ENI) enipamv1alpha1.NodeRoutingStatus {
		st := enipamv1alpha1.NodeRoutingStatus{ObservedGeneration: gen, RoutesSpecENIs: true}
		for _, e := range enis {
			r := enipamv1alpha1.RoutedENI{ID: e.ID, MAC: e.MAC, Number: int32(e.Number)}
			for _, a := range e.Addresses {
				r.IPs = append(r.IPs, a.Addr.String())
			}
			st.ENIs = append(st.ENIs, r)
		}
		return st
	}
	var listed []enipamv1alpha1.NodeENI
	for i := range before {
		listed = append(listed, specENI(&before[i], nil))
	}
	// What an earlier life of the node left: the address listed and routed.
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-nr", Generation: 1},
		Spec:   enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-4", ENIs: listed},
		Status: report(1, before...)}
	w := newRoutingWorld(t, nr)
	w.intercept(w.laggingCache())
	w.r.inv = inventory.New(nil, inventory.Options{}, w.r.log)
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
		s := testSync(w.r, w.cn, deciding{mem: w.r.memory("n1"), cn: w.cn.DeepCopy(),
			nodeState: nodeState{instanceID: "i-4", haveSnap: true, snap: onInstance(enis...)}})
		if err := s.readDecideRouting(context.Background()); err != nil {
			t.Fatal(err)
		}
		routed := s.routed != nil && s.routed(probe, addr)
		listed := map[string]awstypes.ENI{}
		for _, e := range enis {
			listed[e.ID] = e
		}
		s.routing.Spec.ENIs = s.wantRoutingENIs(listed, nil).list
		if err := s.writeRouting(context.Background()); err != nil {
			t.Fatal(err)
		}
		return routed
	}
	agentReports := func(st enipamv1alpha1.NodeRoutingStatus) {
		t.Helper()
		got := w.stored()
		got.Status = st
		if err := w.base.Status().Update(context.Background(), got); err != nil {
			t.Fatal(err)
		}
	}

	w.stale = w.stored() // generation 1, the earlier life's report
	reconcile(dropped...)
	if got := w.stored(); got.Generation != 2 {
		t.Fatalf("scenario: the first apply left generation %d, want 2", got.Generation)
	}
	agentReports(report(2, dropped...)) // unrouted; the cache has not delivered it
	if reconcile(relisted...) {
		t.Errorf("a report over generation 1 vouched for %s on %s after generation 2 dropped it from spec.enis", addr, probe)
	}
	if got := w.stored(); got.Generation != 3 {
		t.Fatalf("scenario: the second apply left generation %d, want 3", got.Generation)
	}

	w.stale = nil // the cache caught up; the agent routes it again
	agentReports(report(3, relisted...))
	if !reconcile(relisted...) {
		t.Errorf("the agent's report over the generation listing %s does not vouch for it", addr)
	}
	// A report over an earlier generation still vouches for what the
	// newer spec lists: the agent routes the newer list.
	w.stale = w.stored()
	w.stale.Generation++
	if !reconcile(relisted...) {
		t.Errorf("a report over an earlier generation does not vouch for %s, which the newer spec.enis still lists on %s", addr, probe)
	}
}
