package operator_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// dualStackVPC: a VPC with an IPv6 /56 whose node subnet has a /64, and
// two m5.large (10 IPv6 slots per ENI, prefixes taken).
const dualStackVPC = `
account: "123456789012"
region: us-east-1
seed: 11
zones: [us-east-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  ipv6Cidr: 2600:1f18:abc:de00::/56
  subnets:
  - {id: subnet-0a000000000000001, name: nodes-a, cidr: 10.0.0.0/20, ipv6Cidr: 2600:1f18:abc:de01::/64, zone: us-east-1a}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0a000000000000002, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
`

// family splits a pool's (or use's) addresses by family.
func family(m ipamtypes.AllocationMap) (v4, v6 []netip.Addr) {
	for key := range m {
		ip := netip.MustParseAddr(key)
		if ip.Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}
	slices.SortFunc(v4, netip.Addr.Compare)
	slices.SortFunc(v6, netip.Addr.Compare)
	return v4, v6
}

// useIPv6 marks n free IPv6 pool addresses used, as Cilium's agent does
// for pods of a dual-stack or IPv6 node.
func (r *rig) useIPv6(name string, n int) {
	r.t.Helper()
	r.agentUpdate(name, func(cn *ciliumv2.CiliumNode) {
		if cn.Status.IPAM.Used == nil {
			cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		}
		_, v6 := family(cn.Spec.IPAM.Pool)
		for _, ip := range v6 {
			if _, used := cn.Status.IPAM.Used[ip.String()]; used || n == 0 {
				continue
			}
			cn.Status.IPAM.Used[ip.String()] = ipamtypes.AllocationIP{Owner: "default/pod-v6-" + ip.StringExpanded(), Resource: cn.Spec.IPAM.Pool[ip.String()].Resource}
			n--
		}
	})
}

// primaryPrefixes returns the IPv6 /80s ec2sim shows on an instance's
// primary ENI, and that ENI's ID.
func (r *rig) primaryPrefixes(instanceID string) (string, []netip.Prefix) {
	attached, _ := r.enisOf(instanceID)
	for _, e := range attached {
		if e.Attachment.DeviceIndex == 0 {
			var out []netip.Prefix
			for _, p := range e.IPv6Prefixes {
				out = append(out, netip.MustParsePrefix(p.IPv6Prefix))
			}
			return e.NetworkInterfaceID, out
		}
	}
	return "", nil
}

// TestDualStackPoolGetsAnIPv6WindowOnThePrimaryENI: m5.large under a
// dual-stack policy, pre-allocate 3. Its pool gets 5 IPv4 addresses (3
// and the agent's 2) and 5 IPv6 addresses, each family sized apart, the
// IPv6 ones from one /80 ec2sim shows on the node's primary ENI, named
// for it, after one AssignIpv6Addresses. As pods take 4 IPv6 addresses
// the window grows to keep 3 free, with no further IPv6 call, and every
// new address comes after the ones taken before (the walk goes forward).
func TestDualStackPoolGetsAnIPv6WindowOnThePrimaryENI(t *testing.T) {
	r := newRig(t, dualStackVPC)
	if err := r.c.Create(r.ctx, &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dual"}, Spec: enipamv1alpha1.ENIPolicySpec{
		PreAllocate: i32(3), IPFamilies: []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family}}}); err != nil {
		t.Fatal(err)
	}
	r.startOperator(r.options())
	r.addNode("node-d", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	cn := r.waitNode("node-d", 30*time.Second, "5 IPv4 and 5 IPv6 pool addresses", func(cn *ciliumv2.CiliumNode) bool {
		v4, v6 := family(cn.Spec.IPAM.Pool)
		return len(v4) == 5 && len(v6) == 5
	})
	primary, prefixes := r.primaryPrefixes("i-0a000000000000001")
	if len(prefixes) != 1 || prefixes[0].Bits() != 80 {
		t.Fatalf("primary ENI %s holds IPv6 prefixes %v, want one /80", primary, prefixes)
	}
	_, v6 := family(cn.Spec.IPAM.Pool)
	for _, ip := range v6 {
		if !prefixes[0].Contains(ip) || cn.Spec.IPAM.Pool[ip.String()].Resource != primary {
			t.Errorf("IPv6 pool address %s (on %q) is not of the primary ENI %s's /80 %s", ip, cn.Spec.IPAM.Pool[ip.String()].Resource, primary, prefixes[0])
		}
	}
	if n := r.calls("AssignIpv6Addresses"); n != 1 {
		t.Errorf("%d AssignIpv6Addresses calls, want 1", n)
	}
	_, told := r.waitTold("node-d")
	if listed, ok := told[primary]; !ok || len(listed.IPv6Prefixes) != 1 {
		t.Errorf("spec.enis' %s = %+v, want its /80 listed", primary, listed)
	}
	highest := v6[len(v6)-1]

	r.useIPv6("node-d", 4)
	cn = r.waitNode("node-d", 30*time.Second, "the IPv6 window grown to keep 3 free", func(cn *ciliumv2.CiliumNode) bool {
		_, v6 := family(cn.Spec.IPAM.Pool)
		return len(v6) == 7
	})
	v4, v6 := family(cn.Spec.IPAM.Pool)
	if len(v4) != 5 {
		t.Errorf("IPv4 pool %d addresses after IPv6 use, want 5 (each family sized apart)", len(v4))
	}
	for _, ip := range v6[5:] {
		if ip.Compare(highest) <= 0 || !prefixes[0].Contains(ip) {
			t.Errorf("new window address %s is not past %s in the /80", ip, highest)
		}
	}
	if n := r.calls("AssignIpv6Addresses"); n != 1 {
		t.Errorf("%d AssignIpv6Addresses calls after the window grew, want still 1", n)
	}
	if _, again := r.primaryPrefixes("i-0a000000000000001"); len(again) != 1 {
		t.Errorf("primary ENI holds %v after the window grew, want the one /80", again)
	}
}

// TestIPv6OnlyPoolHasNoIPv4: m5.large under a policy with ipFamilies
// [IPv6], pre-allocate 3: its pool is 5 IPv6 addresses of one /80 on the
// primary ENI, and no IPv4 address is asked of EC2 or pooled.
func TestIPv6OnlyPoolHasNoIPv4(t *testing.T) {
	r := newRig(t, dualStackVPC)
	if err := r.c.Create(r.ctx, &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "v6"}, Spec: enipamv1alpha1.ENIPolicySpec{
		PreAllocate: i32(3), IPFamilies: []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv6Family}}}); err != nil {
		t.Fatal(err)
	}
	r.startOperator(r.options())
	r.addNode("node-6", "i-0a000000000000002", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	r.waitNode("node-6", 30*time.Second, "5 IPv6 pool addresses", func(cn *ciliumv2.CiliumNode) bool {
		_, v6 := family(cn.Spec.IPAM.Pool)
		return len(v6) == 5
	})
	// One more look after the operator settled: nothing IPv4 comes late.
	time.Sleep(time.Second)
	v4, v6 := family(r.node("node-6").Spec.IPAM.Pool)
	if len(v4) != 0 || len(v6) != 5 {
		t.Errorf("pool: %d IPv4, %d IPv6; want 0 and 5", len(v4), len(v6))
	}
	for _, action := range []string{"AssignPrivateIpAddresses", "CreateNetworkInterface"} {
		if n := r.calls(action); n != 0 {
			t.Errorf("%d %s calls for an IPv6-only node", n, action)
		}
	}
	if n := r.calls("AssignIpv6Addresses"); n != 1 {
		t.Errorf("%d AssignIpv6Addresses calls, want 1", n)
	}
}

// TestIPv6WindowGivenBackWhenThePolicyDropsIPv6: m5.large under a
// dual-stack policy, pre-allocate 3, its IPv6 window of 5 in the pool.
// The policy drops IPv6: the window's addresses are marked for release
// (the IPv4 pool stays), and the /80 stays on the primary ENI while any
// of them is listed. Once the agent acknowledges them they leave the
// pool (released, with no EC2 call), and once it drops their handshake
// entries the /80 goes back with one UnassignIpv6Addresses.
func TestIPv6WindowGivenBackWhenThePolicyDropsIPv6(t *testing.T) {
	r := newRig(t, dualStackVPC)
	p := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dual"}, Spec: enipamv1alpha1.ENIPolicySpec{
		PreAllocate: i32(3), IPFamilies: []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family}}}
	if err := r.c.Create(r.ctx, p); err != nil {
		t.Fatal(err)
	}
	r.startOperator(r.options())
	r.addNode("node-d", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	r.waitNode("node-d", 30*time.Second, "5 IPv4 and 5 IPv6 pool addresses", func(cn *ciliumv2.CiliumNode) bool {
		v4, v6 := family(cn.Spec.IPAM.Pool)
		return len(v4) == 5 && len(v6) == 5
	})

	p = &enipamv1alpha1.ENIPolicy{}
	if err := r.c.Get(r.ctx, client.ObjectKey{Name: "dual"}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.IPFamilies = []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family}
	if err := r.c.Update(r.ctx, p); err != nil {
		t.Fatal(err)
	}
	cn := r.waitNode("node-d", 30*time.Second, "the window's 5 addresses marked", func(cn *ciliumv2.CiliumNode) bool {
		n := 0
		for ip, st := range cn.Status.IPAM.ReleaseIPs {
			if netip.MustParseAddr(ip).Is6() && st == "marked-for-release" {
				n++
			}
		}
		return n == 5
	})
	if v4, _ := family(cn.Spec.IPAM.Pool); len(v4) != 5 {
		t.Errorf("IPv4 pool %d addresses once IPv6 is dropped, want 5", len(v4))
	}
	if _, prefixes := r.primaryPrefixes("i-0a000000000000001"); len(prefixes) != 1 {
		t.Fatalf("primary ENI holds %v while the window is listed, want its /80", prefixes)
	}

	r.agentUpdate("node-d", func(cn *ciliumv2.CiliumNode) {
		for ip := range cn.Status.IPAM.ReleaseIPs {
			if netip.MustParseAddr(ip).Is6() {
				cn.Status.IPAM.ReleaseIPs[ip] = "ready-for-release"
			}
		}
	})
	r.waitNode("node-d", 30*time.Second, "the window released and out of the pool", func(cn *ciliumv2.CiliumNode) bool {
		_, v6 := family(cn.Spec.IPAM.Pool)
		released := 0
		for ip, st := range cn.Status.IPAM.ReleaseIPs {
			if netip.MustParseAddr(ip).Is6() && st == "released" {
				released++
			}
		}
		return len(v6) == 0 && released == 5
	})
	if n := r.calls("UnassignIpv6Addresses"); n != 0 {
		t.Errorf("%d UnassignIpv6Addresses calls while the handshake still lists the window", n)
	}
	r.agentUpdate("node-d", func(cn *ciliumv2.CiliumNode) {
		for ip := range cn.Status.IPAM.ReleaseIPs {
			if netip.MustParseAddr(ip).Is6() {
				delete(cn.Status.IPAM.ReleaseIPs, ip)
			}
		}
	})
	r.waitFor("the /80 given back", 30*time.Second, func() bool {
		_, prefixes := r.primaryPrefixes("i-0a000000000000001")
		return len(prefixes) == 0
	})
	if n := r.calls("UnassignIpv6Addresses"); n != 1 {
		t.Errorf("%d UnassignIpv6Addresses calls, want 1", n)
	}
}

// TestIPv6WindowSurvivesARestart: m5.large under a dual-stack policy,
// pre-allocate 3, its IPv6 window of 5 in the pool; the operator stops
// and another starts. Its describes predate its grace, so it trusts the
// /80 only once a later describe shows it; then, as pods take 4 IPv6
// addresses, the window grows to 7 from the same /80, past the highest
// address listed, with no second AssignIpv6Addresses.
func TestIPv6WindowSurvivesARestart(t *testing.T) {
	r := newRig(t, dualStackVPC)
	if err := r.c.Create(r.ctx, &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dual"}, Spec: enipamv1alpha1.ENIPolicySpec{
		PreAllocate: i32(3), IPFamilies: []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family}}}); err != nil {
		t.Fatal(err)
	}
	_, _, stop := r.startOperator(r.options())
	r.addNode("node-d", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	cn := r.waitNode("node-d", 30*time.Second, "5 IPv6 pool addresses", func(cn *ciliumv2.CiliumNode) bool {
		_, v6 := family(cn.Spec.IPAM.Pool)
		return len(v6) == 5
	})
	_, v6 := family(cn.Spec.IPAM.Pool)
	highest := v6[len(v6)-1]
	stop()

	r.startOperator(r.options())
	r.useIPv6("node-d", 4)
	cn = r.waitNode("node-d", 30*time.Second, "the IPv6 window grown to keep 3 free", func(cn *ciliumv2.CiliumNode) bool {
		_, v6 := family(cn.Spec.IPAM.Pool)
		return len(v6) == 7
	})
	_, prefixes := r.primaryPrefixes("i-0a000000000000001")
	_, v6 = family(cn.Spec.IPAM.Pool)
	for _, ip := range v6[5:] {
		if ip.Compare(highest) <= 0 || len(prefixes) != 1 || !prefixes[0].Contains(ip) {
			t.Errorf("window address %s after the restart is not past %s in the /80 %v", ip, highest, prefixes)
		}
	}
	if n := r.calls("AssignIpv6Addresses"); n != 1 {
		t.Errorf("%d AssignIpv6Addresses calls across the restart, want 1", n)
	}
}
