package tracker

import (
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// routing hands node's NodeRouting, with enis as its spec.enis (each ENI
// with fields Digest does not read, which the transform drops), through
// the transform to the tracker as its informer does.
func (f *fixture) routing(node string, enis ...enipamv1alpha1.NodeENI) any {
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for _, e := range enis {
		e.MAC, e.Number, e.SubnetID, e.SubnetCIDR, e.VPCCIDRs = "0a:00:00:00:00:01", 1, "subnet-a", "10.0.0.0/16", []string{"10.0.0.0/16"}
		nr.Spec.ENIs = append(nr.Spec.ENIs, e)
	}
	obj, _ := stripNodeRouting(nr)
	f.tr.routingSeen(obj)
	return obj
}

// stampedNode is node n1's CiliumNode with no status.eni.enis: db-0's
// address stamped on eni-1, db-2's inside a prefix of eni-1, and a free
// entry.
func stampedNode() *ciliumv2.CiliumNode {
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.0.10": {Resource: "eni-1", Owner: "db/db-0"},
		"10.0.0.12": {Resource: "eni-1"},
		"10.0.2.18": {Resource: "eni-1", Owner: "db/db-2"},
	}
	return cn
}

// onN1 is what the tracker says of n1: db-0's settled address, and
// whether db-2's claim, whose address 10.0.2.18 n1 holds, is pinned there.
func (f *fixture) onN1() (settled string, pinned bool) {
	settled, _ = f.tr.Settled("n1", "db/db-0")
	c, _ := f.tr.Claim("db", "db-2")
	return settled, c.Pinned
}

// TestTheENIsOfANodeRoutingSettleAndPinWithoutTheStatusCopy: node n1's
// CiliumNode has no status.eni.enis; its NodeRouting's spec.enis lists
// db-0's address on eni-1 and eni-1's prefix 10.0.2.16/28. Whichever of
// the two objects the tracker sees first, db-0's stamp is settled and
// db-2's claim is pinned to n1, as with the status copy
// (TestAStampSettlesOnlyThroughTheTransformWithItsENI). A NodeRouting
// write that takes the address and the prefix off eni-1 unsettles and
// unpins them, and wakes View's waiters; its deletion leaves them so.
func TestTheENIsOfANodeRoutingSettleAndPinWithoutTheStatusCopy(t *testing.T) {
	listed := enipamv1alpha1.NodeENI{ID: "eni-1", Addresses: []string{"10.0.0.10", "10.0.0.12"}, Prefixes: []string{"10.0.2.16/28"}}
	for _, routingFirst := range []bool{true, false} {
		f := newFixture(t)
		f.tr.claimSeen(&enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "db-2"},
			Status: enipamv1alpha1.StaticIPClaimStatus{Address: "10.0.2.18", NodeName: "n1"}})
		if routingFirst {
			f.routing("n1", listed)
			f.seen(stampedNode())
		} else {
			f.seen(stampedNode())
			f.routing("n1", listed)
		}
		if settled, pinned := f.onN1(); settled != "10.0.0.10" || !pinned {
			t.Fatalf("NodeRouting seen first %v: db-0 settled on %q, db-2 pinned %v; want 10.0.0.10, true", routingFirst, settled, pinned)
		}
	}

	f := newFixture(t)
	f.tr.claimSeen(&enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "db-2"},
		Status: enipamv1alpha1.StaticIPClaimStatus{Address: "10.0.2.18", NodeName: "n1"}})
	f.seen(stampedNode())
	obj := f.routing("n1", listed)
	_, changed := f.tr.View(incoming, []string{"n1"}, f.now)
	f.routing("n1", enipamv1alpha1.NodeENI{ID: "eni-1", Addresses: []string{"10.0.0.12"}})
	select {
	case <-changed:
	default:
		t.Fatal("a NodeRouting write of the node's ENIs did not wake the waiters")
	}
	if settled, pinned := f.onN1(); settled != "" || pinned {
		t.Errorf("eni-1 without db-0's address and the prefix: db-0 settled on %q, db-2 pinned %v; want neither", settled, pinned)
	}
	f.routing("n1", listed)
	f.tr.routingGone(cache.DeletedFinalStateUnknown{Obj: obj})
	if settled, pinned := f.onN1(); settled != "" || pinned {
		t.Errorf("NodeRouting deleted: db-0 settled on %q, db-2 pinned %v; want neither", settled, pinned)
	}
}

// TestTheNodeRoutingTransformKeepsWhatDigestReads: of spec.enis the
// transform keeps each ENI's ID, addresses and prefixes, nothing else.
func TestTheNodeRoutingTransformKeepsWhatDigestReads(t *testing.T) {
	f := newFixture(t)
	obj := f.routing("n1", enipamv1alpha1.NodeENI{ID: "eni-1", PrimaryIP: "10.0.0.5", Addresses: []string{"10.0.0.10"},
		Prefixes: []string{"10.0.2.16/28"}, IPv6Prefixes: []string{"2600:1f18::/80"}, Tags: map[string]string{"a": "b"}})
	got := obj.(*enipamv1alpha1.NodeRouting).Spec.ENIs
	want := enipamv1alpha1.NodeENI{ID: "eni-1", Addresses: []string{"10.0.0.10"}, Prefixes: []string{"10.0.2.16/28"}}
	if len(got) != 1 || !sameENIs(got, []enipamv1alpha1.NodeENI{want}) || got[0].MAC != "" || got[0].PrimaryIP != "" ||
		got[0].SubnetID != "" || got[0].VPCCIDRs != nil || got[0].IPv6Prefixes != nil || got[0].Tags != nil {
		t.Errorf("kept %+v, want %+v", got, want)
	}
}
