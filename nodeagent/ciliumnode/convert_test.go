package ciliumnode_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/ciliumnode"
	"github.com/enipam/enipam/nodeagent/routing"
)

// ciliumNode builds a CiliumNode as the operator writes it; options add
// ENIs, pool IPs and spec.eni settings.
func ciliumNode(opts ...func(*ciliumv2.CiliumNode)) *ciliumv2.CiliumNode {
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-10.ec2.internal"}}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	for _, o := range opts {
		o(cn)
	}
	return cn
}

func withENI(id string, number int, mac, cidr string, tags map[string]string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		e := awstypes.ENI{ID: id, Number: number, MAC: mac, Tags: tags}
		if p, err := netip.ParsePrefix(cidr); err == nil {
			e.Subnet = awstypes.AwsSubnet{ID: "subnet-" + id, CIDR: iputil.PrefixFrom(p)}
		}
		cn.Status.ENI.ENIs[id] = e
	}
}

func withPool(resource string, ips ...string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		for _, ip := range ips {
			cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: resource}
		}
	}
}

// spec is a NodeRouting spec with first interface index first and the
// exclude tags given as key, value pairs.
func spec(first int32, excludeTags ...string) *enipamv1alpha1.NodeRoutingSpec {
	s := &enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-0123456789abcdef0", FirstInterfaceIndex: first}
	for i := 0; i+1 < len(excludeTags); i += 2 {
		if s.ExcludeInterfaceTags == nil {
			s.ExcludeInterfaceTags = map[string]string{}
		}
		s.ExcludeInterfaceTags[excludeTags[i]] = excludeTags[i+1]
	}
	return s
}

func withAddresses(id string, ips ...string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		e := cn.Status.ENI.ENIs[id]
		for _, ip := range ips {
			e.Addresses = append(e.Addresses, iputil.AddrFrom(netip.MustParseAddr(ip)))
		}
		cn.Status.ENI.ENIs[id] = e
	}
}

func withPrefix(id string, p string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		e := cn.Status.ENI.ENIs[id]
		e.Prefixes = append(e.Prefixes, iputil.PrefixFrom(netip.MustParsePrefix(p)))
		cn.Status.ENI.ENIs[id] = e
	}
}

func withRelease(ip string, state ipamtypes.IPReleaseStatus) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		if cn.Status.IPAM.ReleaseIPs == nil {
			cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
		}
		cn.Status.IPAM.ReleaseIPs[ip] = state
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func findENI(node routing.Node, id string) *routing.ENI {
	for i := range node.ENIs {
		if node.ENIs[i].ID == id {
			return &node.ENIs[i]
		}
	}
	return nil
}

// TestToNodeManagesWhatTheNodeRoutingSpecSelects: a node with its primary
// ENI (device 0, address 10.0.1.10, pool IP 10.0.1.20), a secondary ENI
// (device 1) and one excluded by tag (device 2), under a NodeRouting spec
// with first interface index 0 and exclude tag no-pods=true. The primary
// and the secondary are managed, with their gateways, VPC CIDRs and pool
// IPs; the primary's own address is never a pod's; the excluded ENI's
// address, which the node does not hold (neither pooled nor used), is
// skipped without complaint. The CiliumNode's own spec.eni (first
// interface index 1, as a user might have set it) is not consulted: the
// operator resolved it into the NodeRouting spec.
func TestToNodeManagesWhatTheNodeRoutingSpecSelects(t *testing.T) {
	one := 1
	cn := ciliumNode(
		withENI("eni-primary", 0, "02:00:00:00:00:00", "10.0.1.0/24", nil),
		withAddresses("eni-primary", "10.0.1.10"),
		withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withENI("eni-x", 2, "02:00:00:00:00:02", "10.0.3.0/24", map[string]string{"no-pods": "true", "team": "a"}),
		withPool("eni-primary", "10.0.1.20"),
		withPool("eni-a", "10.0.2.11", "10.0.2.10"),
		withAddresses("eni-x", "10.0.3.10"),
		func(cn *ciliumv2.CiliumNode) {
			p := cn.Status.ENI.ENIs["eni-primary"]
			p.IP = iputil.AddrFrom(netip.MustParseAddr("10.0.1.10"))
			p.VPC = awstypes.AwsVPC{ID: "vpc-1", PrimaryCIDR: iputil.PrefixFrom(netip.MustParsePrefix("10.0.0.0/16")), CIDRs: []iputil.Prefix{iputil.PrefixFrom(netip.MustParsePrefix("100.64.0.0/16"))}}
			cn.Status.ENI.ENIs["eni-primary"] = p
			cn.Spec.ENI.FirstInterfaceIndex = &one
		},
	)
	node, in, problems := ciliumnode.ToNode(cn, spec(0, "no-pods", "true"))
	if len(problems) != 0 || len(in.Retained) != 0 {
		t.Errorf("problems %v, retained %v", problems, in.Retained)
	}
	if len(node.ENIs) != 2 {
		t.Fatalf("managed ENIs %+v, want the primary and eni-a", node.ENIs)
	}
	p, a := *findENI(node, "eni-primary"), *findENI(node, "eni-a")
	if p.ID != "eni-primary" || p.Number != 0 || p.Gateway != netip.MustParseAddr("10.0.1.1") || !slices.Equal(p.IPs, addrs("10.0.1.20")) {
		t.Errorf("primary = %+v, want device 0 via 10.0.1.1 with 10.0.1.20 alone", p)
	}
	if !slices.Equal(p.VPCCIDRs, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")}) {
		t.Errorf("primary VPC CIDRs %v", p.VPCCIDRs)
	}
	if a.ID != "eni-a" || a.MAC.String() != "02:00:00:00:00:01" || !slices.Equal(a.IPs, addrs("10.0.2.10", "10.0.2.11")) {
		t.Errorf("eni-a = %+v", a)
	}
	if node.PrimaryMAC.String() != "02:00:00:00:00:00" {
		t.Errorf("primary MAC %v", node.PrimaryMAC)
	}
}

// TestToNodeFirstInterfaceIndexExcludesLowerDevices: with first interface
// index 2, device 1 is not enipam's even though it is a secondary ENI,
// and the primary is not either; the primary's MAC is still known, for
// the connmark table.
func TestToNodeFirstInterfaceIndexExcludesLowerDevices(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-0", 0, "02:00:00:00:00:00", "10.0.1.0/24", nil),
		withENI("eni-1", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withENI("eni-2", 2, "02:00:00:00:00:02", "10.0.3.0/24", nil),
		withPool("eni-2", "10.0.3.10"),
	)
	node, _, _ := ciliumnode.ToNode(cn, spec(2))
	if len(node.ENIs) != 1 || node.ENIs[0].ID != "eni-2" {
		t.Errorf("managed ENIs %+v, want eni-2 alone", node.ENIs)
	}
	if node.PrimaryMAC.String() != "02:00:00:00:00:00" {
		t.Errorf("primary MAC %v", node.PrimaryMAC)
	}
}

// TestToNodeRoutesStatusAddressesBeforeThePool: the operator writes an
// ENI's new addresses into status.eni.enis before it pools them (routed
// before pooled), so the agent routes 10.0.2.11, listed on eni-a but not
// yet in the pool, along with the pooled 10.0.2.10.
func TestToNodeRoutesStatusAddressesBeforeThePool(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withAddresses("eni-a", "10.0.2.10", "10.0.2.11"),
		withPool("eni-a", "10.0.2.10"),
	)
	node, _, _ := ciliumnode.ToNode(cn, spec(1))
	if e := findENI(node, "eni-a"); e == nil || !slices.Equal(e.IPs, addrs("10.0.2.10", "10.0.2.11")) {
		t.Errorf("eni-a = %+v, want 10.0.2.10 and 10.0.2.11", e)
	}
}

// TestToNodeReleasedAddressesAreLeftOut: status.ipam.release-ips marks
// 10.0.2.11 released (still listed on the ENI and in the pool, the
// operator has not caught up), 10.0.2.12 marked-for-release and 10.0.2.13
// ready-for-release. Only the released one loses its routing: the other
// two are still the node's until the handshake ends. Delegated prefix
// 10.0.2.16/28 holds the released 10.0.2.20, so it is routed as its 15
// other addresses.
func TestToNodeReleasedAddressesAreLeftOut(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withAddresses("eni-a", "10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"),
		withPool("eni-a", "10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"),
		withPrefix("eni-a", "10.0.2.16/28"),
		withRelease("10.0.2.11", "released"),
		withRelease("10.0.2.12", "marked-for-release"),
		withRelease("10.0.2.13", "ready-for-release"),
		withRelease("10.0.2.20", "released"),
	)
	node, in, _ := ciliumnode.ToNode(cn, spec(1))
	e := findENI(node, "eni-a")
	if e == nil {
		t.Fatal("eni-a not managed")
	}
	if slices.Contains(e.IPs, netip.MustParseAddr("10.0.2.11")) || slices.Contains(e.IPs, netip.MustParseAddr("10.0.2.20")) {
		t.Errorf("released addresses routed: %v", e.IPs)
	}
	for _, ip := range []string{"10.0.2.10", "10.0.2.12", "10.0.2.13", "10.0.2.16", "10.0.2.31"} {
		if !slices.Contains(e.IPs, netip.MustParseAddr(ip)) {
			t.Errorf("%s not routed: %v", ip, e.IPs)
		}
	}
	if len(e.Prefixes) != 0 || len(e.IPs) != 3+15 {
		t.Errorf("prefixes %v and %d addresses, want none and 18", e.Prefixes, len(e.IPs))
	}
	if in.Released != 1 {
		t.Errorf("released pool IPs counted %d, want 1", in.Released)
	}
}

// TestToNodePrefixWithoutReleaseStaysWhole: a delegated prefix holding no
// released address is routed as the prefix.
func TestToNodePrefixWithoutReleaseStaysWhole(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withPrefix("eni-a", "10.0.2.16/28"),
		withPool("eni-a", "10.0.2.16", "10.0.2.17"),
	)
	node, _, _ := ciliumnode.ToNode(cn, spec(1))
	e := findENI(node, "eni-a")
	if e == nil || !slices.Equal(e.Prefixes, []netip.Prefix{netip.MustParsePrefix("10.0.2.16/28")}) {
		t.Errorf("eni-a = %+v, want the prefix", e)
	}
}

// TestToNodePoolWinsOverAnotherENIsStatus: 10.0.2.30 moves from eni-a to
// eni-b; for a moment eni-a's status still lists it while the pool names
// eni-b. It is routed on eni-b alone.
func TestToNodePoolWinsOverAnotherENIsStatus(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withENI("eni-b", 2, "02:00:00:00:00:02", "10.0.2.0/24", nil),
		withAddresses("eni-a", "10.0.2.30"),
		withPool("eni-b", "10.0.2.30"),
	)
	node, _, _ := ciliumnode.ToNode(cn, spec(1))
	if a := findENI(node, "eni-a"); len(a.IPs) != 0 {
		t.Errorf("eni-a routes %v", a.IPs)
	}
	if b := findENI(node, "eni-b"); !slices.Equal(b.IPs, addrs("10.0.2.30")) {
		t.Errorf("eni-b routes %v, want 10.0.2.30", b.IPs)
	}
}

// TestToNodeENIGoneFromStatusRetainsItsPoolIPs: eni-b vanished from
// status.eni.enis for a moment while 10.0.3.10 is still pooled on it (and
// 10.0.3.11 pooled but released). 10.0.3.10 is retained, so its rules
// stay; the released one is not.
func TestToNodeENIGoneFromStatusRetainsItsPoolIPs(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withPool("eni-a", "10.0.2.10"),
		withPool("eni-b", "10.0.3.10", "10.0.3.11"),
		withRelease("10.0.3.11", "released"),
	)
	node, in, problems := ciliumnode.ToNode(cn, spec(1))
	if len(problems) != 0 {
		t.Errorf("problems %v", problems)
	}
	if !slices.Equal(node.Retain, []netip.Prefix{netip.MustParsePrefix("10.0.3.10/32")}) || in.Retained[netip.MustParsePrefix("10.0.3.10/32")] != "eni-b" {
		t.Errorf("retained %v (%v), want 10.0.3.10 of eni-b", node.Retain, in.Retained)
	}
}

// TestToNodeMalformedPartsAreReportedAndSkipped: a bad MAC, a missing
// subnet CIDR and a pool key that is not an IP are each reported with a
// typed reason; the pool IPs of the broken ENIs are retained, and the
// healthy ENI is still returned with its IP.
func TestToNodeMalformedPartsAreReportedAndSkipped(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-ok", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withENI("eni-badmac", 2, "zz", "10.0.3.0/24", nil),
		withENI("eni-nocidr", 3, "02:00:00:00:00:03", "", nil),
		withPool("eni-ok", "10.0.2.10", "not-an-ip"),
		withPool("eni-badmac", "10.0.3.10"),
	)
	node, _, problems := ciliumnode.ToNode(cn, spec(1))
	want := map[string]error{
		"eni-badmac": ciliumnode.ErrBadMAC,
		"eni-nocidr": ciliumnode.ErrBadSubnet,
		"not-an-ip":  ciliumnode.ErrBadPoolIP,
	}
	if len(problems) != len(want) {
		t.Errorf("problems %v, want %d", problems, len(want))
	}
	for _, err := range problems {
		var p *ciliumnode.Problem
		if !errors.As(err, &p) || !errors.Is(err, want[p.Item]) {
			t.Errorf("problem %v: want %v", err, want[p.Item])
		}
	}
	if len(node.ENIs) != 1 || len(node.ENIs[0].IPs) != 1 {
		t.Errorf("node %+v, want eni-ok with 10.0.2.10", node)
	}
	if !slices.Equal(node.Retain, []netip.Prefix{netip.MustParsePrefix("10.0.3.10/32")}) {
		t.Errorf("retained %v, want eni-badmac's 10.0.3.10", node.Retain)
	}
}

// TestGatewayIsFirstHostOfSubnet: the VPC router sits at the subnet's
// network address + 1, whatever host bits the CIDR was written with.
func TestGatewayIsFirstHostOfSubnet(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.0.2.0/24":    "10.0.2.1",
		"10.0.2.77/24":   "10.0.2.1",
		"172.31.32.0/20": "172.31.32.1",
		"100.64.0.16/28": "100.64.0.17",
	} {
		got, err := ciliumnode.Gateway(netip.MustParsePrefix(cidr))
		if err != nil || got != netip.MustParseAddr(want) {
			t.Errorf("Gateway(%s) = %v, %v; want %s", cidr, got, err, want)
		}
	}
	for _, bad := range []string{"fd00::/64", "10.0.0.4/31"} {
		if _, err := ciliumnode.Gateway(netip.MustParsePrefix(bad)); !errors.Is(err, ciliumnode.ErrBadSubnet) {
			t.Errorf("Gateway(%s) err = %v, want ErrBadSubnet", bad, err)
		}
	}
	if _, err := ciliumnode.Gateway(netip.Prefix{}); !errors.Is(err, ciliumnode.ErrBadSubnet) {
		t.Errorf("Gateway(zero) err = %v, want ErrBadSubnet", err)
	}
}
