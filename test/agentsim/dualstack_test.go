package agentsim_test

import (
	"net/netip"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// TestDualStackPodsGetOneAddressOfEachFamily: a dual-stack agent on a
// pool of 4 IPv4 and 3 IPv6 addresses. Router, health and one pod each
// get an IPv4 and an IPv6 address (IPv4 first), all distinct and
// recorded used; a second pod waits, IPv4 being left but no IPv6, and
// gets both once an IPv6 address enters the pool. An IPv6-only agent
// hands out IPv6 alone, whatever IPv4 its pool lists.
func TestDualStackPodsGetOneAddressOfEachFamily(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	v4 := ips("10.3.0.", 4)
	v6 := []string{"2001:db8::a:0:0:1", "2001:db8::a:0:0:2", "2001:db8::a:0:0:3", "2001:db8::a:0:0:4"}
	createNode(t, name, ipamtypes.IPAMSpec{}, pool(append(v4, v6[:3]...)...))
	sim := startSim(t, agentsim.Options{IPFamilies: []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family}})
	a := sim.AddAgent(name)
	waitReady(t, a)

	want := map[string]string{}
	for _, owner := range []string{agentsim.RouterOwner, agentsim.HealthOwner} {
		for _, ip := range a.IPs(owner) {
			want[ip.String()] = owner
		}
	}
	r := receive(t, allocateLater(a, "default/p1"), "p1's addresses")
	if r.Err != nil || len(r.IPs) != 2 || !r.IPs[0].Is4() || !r.IPs[1].Is6() || r.IP != r.IPs[0] {
		t.Fatalf("p1: %+v, want an IPv4 then an IPv6 address", r)
	}
	for _, ip := range r.IPs {
		want[ip.String()] = "default/p1"
	}
	if len(want) != 6 {
		t.Fatalf("router, health and p1 hold %v, want 6 distinct addresses", want)
	}
	eventually(t, "status.ipam.used shows both families of all three", usedIs(t, name, want))

	p2 := allocateLater(a, "default/p2")
	if f := a.Figures(); f.PendingWaits != 1 {
		t.Fatalf("p2 with IPv4 left and no IPv6: %d waiting, want 1", f.PendingWaits)
	}
	setPool(t, name, pool(append(v4, v6...)...))
	r = receive(t, p2, "p2's addresses")
	if r.Err != nil || len(r.IPs) != 2 || r.IPs[1] != netip.MustParseAddr(v6[3]) {
		t.Fatalf("p2: %+v, want an IPv4 address and %s", r, v6[3])
	}
	noViolations(t, sim)

	only6 := nodeName(t, "b")
	createNode(t, only6, ipamtypes.IPAMSpec{}, pool("10.3.1.10", "2001:db8::b:0:0:1", "2001:db8::b:0:0:2", "2001:db8::b:0:0:3"))
	sim6 := startSim(t, agentsim.Options{IPFamilies: []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv6Family}})
	b := sim6.AddAgent(only6)
	waitReady(t, b)
	r = receive(t, allocateLater(b, "default/p3"), "p3's address")
	if r.Err != nil || len(r.IPs) != 1 || !r.IP.Is6() {
		t.Fatalf("p3 on the IPv6-only agent: %+v, want one IPv6 address", r)
	}
	noViolations(t, sim6)
}
