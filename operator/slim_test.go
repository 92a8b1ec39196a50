package operator

import (
	"encoding/json"
	"runtime"
	"testing"
	"unsafe"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// decodedRouting is steady NodeRouting i as the cache decodes it.
func decodedRouting(t *testing.T, i int) *enipamv1alpha1.NodeRouting {
	t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := json.Unmarshal(steadyRouting(i), nr); err != nil {
		t.Fatal(err)
	}
	return nr
}

// TestSlimNodeRoutingChangesNoValue: the cache's transform of
// NodeRoutings changes no value, spec.enis included, which the operator
// reads from the cache: it applies its spec from the cached object and
// pools what the cached status lists. Its lists lose the decoder's
// slack, what two nodes repeat shares storage, and the agent's report of
// an ENI shares the list of its addresses with spec.enis.
func TestSlimNodeRoutingChangesNoValue(t *testing.T) {
	a, b := decodedRouting(t, 1), decodedRouting(t, 2)
	want, _ := json.Marshal(a)
	if len(a.Spec.ENIs) == 0 {
		t.Fatal("the NodeRouting lists no spec.enis: the test shows nothing of them")
	}
	if cap(a.Status.ENIs[0].IPs) == len(a.Status.ENIs[0].IPs) || cap(a.Spec.ENIs[0].Addresses) == len(a.Spec.ENIs[0].Addresses) {
		t.Fatal("the decoder left no slack: the test shows nothing")
	}
	for _, nr := range []*enipamv1alpha1.NodeRouting{a, b} {
		if _, err := slimNodeRouting(nr); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
	}
	if got, _ := json.Marshal(a); string(got) != string(want) {
		t.Fatalf("transformed NodeRouting differs:\n got %s\nwant %s", got, want)
	}
	for i, e := range a.Status.ENIs {
		if cap(e.IPs) != len(e.IPs) {
			t.Errorf("ENI %s: %d addresses in an array of %d", e.ID, len(e.IPs), cap(e.IPs))
		}
		if &e.IPs[0] != &a.Spec.ENIs[i].Addresses[0] {
			t.Errorf("ENI %s: the report's addresses and spec.enis' are two arrays", e.ID)
		}
	}
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q do not share storage", what, x, y)
		}
	}
	same("zone", a.Spec.Capacity.AvailabilityZone, b.Spec.Capacity.AvailabilityZone)
	same("condition reason", a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason)
	same("owner kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind)
	same("spec.enis subnet", a.Spec.ENIs[0].SubnetID, b.Spec.ENIs[0].SubnetID)
	same("ENI ID in spec and report", a.Spec.ENIs[0].ID, a.Status.ENIs[0].ID)
	if &a.Spec.Capacity.Subnets[0] != &b.Spec.Capacity.Subnets[0] {
		t.Error("two nodes' lists of subnets are two arrays")
	}
	if &a.Spec.ENIs[0].VPCCIDRs[0] != &b.Spec.ENIs[0].VPCCIDRs[0] {
		t.Error("two nodes' lists of VPC CIDRs are two arrays")
	}
}

// TestSlimCiliumNodeSharesLists: each ENI's addresses lose the decoder's
// slack, every ENI of a VPC shares one list of its CIDRs, and the JSON is
// unchanged.
func TestSlimCiliumNodeSharesLists(t *testing.T) {
	var nodes []*ciliumv2.CiliumNode
	var want [][]byte
	for i := range 2 {
		cn := &ciliumv2.CiliumNode{}
		if err := json.Unmarshal(steadyNodeAsServed(i), cn); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(cn)
		want = append(want, raw)
		if _, err := slimCiliumNode(cn); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, cn)
	}
	var cidrs []*byte
	for i, cn := range nodes {
		if got, _ := json.Marshal(cn); string(got) != string(want[i]) {
			t.Fatalf("transformed node differs:\n got %s\nwant %s", got, want[i])
		}
		for id, e := range cn.Status.ENI.ENIs {
			if len(e.Addresses) != 9 || cap(e.Addresses) != len(e.Addresses) {
				t.Errorf("ENI %s: %d addresses in an array of %d", id, len(e.Addresses), cap(e.Addresses))
			}
			cidrs = append(cidrs, (*byte)(unsafe.Pointer(&e.VPC.CIDRs[0])))
		}
	}
	for _, p := range cidrs[1:] {
		if p != cidrs[0] {
			t.Fatalf("the VPC's CIDRs are %d lists, want one shared", len(cidrs))
		}
	}
}

// TestSlimCiliumNodePacksAddresses: the pool's addresses, the keys of
// spec.ipam.pool, lie in one string, and each used entry's key is its
// pool entry's, with the JSON unchanged (TestSlimCiliumNodeSharesLists).
func TestSlimCiliumNodePacksAddresses(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	if err := json.Unmarshal(steadyNodeAsServed(7), cn); err != nil {
		t.Fatal(err)
	}
	if _, err := slimCiliumNode(cn); err != nil {
		t.Fatal(err)
	}
	pool, used := cn.Spec.IPAM.Pool, cn.Status.IPAM.Used
	if len(pool) != 18 || len(used) != 5 {
		t.Fatalf("%d pool and %d used entries, want 18 and 5", len(pool), len(used))
	}
	at := map[string]uintptr{}
	lo, hi, n := ^uintptr(0), uintptr(0), uintptr(0)
	for ip := range pool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(ip)))
		at[ip] = p
		lo, hi, n = min(lo, p), max(hi, p+uintptr(len(ip))), n+uintptr(len(ip))
	}
	if hi-lo != n {
		t.Errorf("the pool's %d addresses (%d bytes) span %d bytes, want one string", len(pool), n, hi-lo)
	}
	for ip := range used {
		if uintptr(unsafe.Pointer(unsafe.StringData(ip))) != at[ip] {
			t.Errorf("used %s is a string of its own, not its pool entry's", ip)
		}
	}
}

// TestSlimCiliumNodeSharesENIIDsWithoutCopy: a CiliumNode with no copy
// of its ENIs in status.eni.enis (as this release writes most of them)
// keeps each ENI's ID once: every pool and used entry naming an ENI
// shares one string, with the JSON unchanged.
func TestSlimCiliumNodeSharesENIIDsWithoutCopy(t *testing.T) {
	raw := steadyNodeUncopied(7)
	cn := &ciliumv2.CiliumNode{}
	if err := json.Unmarshal(raw, cn); err != nil {
		t.Fatal(err)
	}
	if _, err := slimCiliumNode(cn); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(cn); string(got) != string(raw) {
		t.Fatalf("transformed CiliumNode differs:\n got %s\nwant %s", got, raw)
	}
	ids := map[string]*byte{}
	for _, m := range []map[string]ipamtypes.AllocationIP{cn.Spec.IPAM.Pool, cn.Status.IPAM.Used} {
		for ip, e := range m {
			p, ok := ids[e.Resource]
			if !ok {
				ids[e.Resource] = unsafe.StringData(e.Resource)
				continue
			}
			if p != unsafe.StringData(e.Resource) {
				t.Errorf("%s: ENI %s is a string of its own", ip, e.Resource)
			}
		}
	}
	if len(ids) != 2 {
		t.Errorf("%d ENIs named, want 2", len(ids))
	}
}

// TestSlimNodeRoutingENIsWithoutAddresses: a NodeRouting whose spec.enis
// lists an ENI with no address (a primary ENI, a new one) that the
// agent's report lists with addresses, or lists without, is kept with
// its values unchanged.
func TestSlimNodeRoutingENIsWithoutAddresses(t *testing.T) {
	nr := decodedRouting(t, 3)
	nr.Spec.ENIs[0].Addresses = nil
	nr.Status.ENIs[1].IPs = nil
	nr.Status.ENIs[1].MAC = "02:00:00:ff:ff:ff"
	want, _ := json.Marshal(nr)
	if _, err := slimNodeRouting(nr); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(nr); string(got) != string(want) {
		t.Fatalf("transformed NodeRouting differs:\n got %s\nwant %s", got, want)
	}
}
