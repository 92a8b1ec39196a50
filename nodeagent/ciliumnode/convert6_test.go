package ciliumnode_test

import (
	"net/netip"
	"slices"
	"testing"

	iputil "github.com/cilium/cilium/pkg/ip"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/nodeagent/ciliumnode"
)

func withIPv6Prefix(id string, p string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		e := cn.Status.ENI.ENIs[id]
		e.IPv6Prefixes = append(e.IPv6Prefixes, iputil.PrefixFrom(netip.MustParsePrefix(p)))
		cn.Status.ENI.ENIs[id] = e
	}
}

// TestToNodeDualStackENIRoutesItsIPv6: eni-a (device 1, subnet
// 10.0.2.0/24) holds 10.0.2.10 and 2001:db8:2::10 in its status
// addresses and the /80 2001:db8:2:0:b::/80 in ipv6-prefixes; the pool
// has a window of two addresses of the prefix, one of them released, and
// 2001:db8:2::10. The ENI routes both addresses and the whole /80 (the
// released address stays inside it: EC2 keeps the prefix on the ENI);
// the window's addresses are not listed one by one.
func TestToNodeDualStackENIRoutesItsIPv6(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withAddresses("eni-a", "10.0.2.10", "2001:db8:2::10"),
		withIPv6Prefix("eni-a", "2001:db8:2:0:b::/80"),
		withPool("eni-a", "10.0.2.10", "2001:db8:2::10", "2001:db8:2:0:b::1", "2001:db8:2:0:b::2"),
		withRelease("2001:db8:2:0:b::2", "released"),
	)
	node, in, problems := ciliumnode.ToNode(cn, spec(1))
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	e := findENI(node, "eni-a")
	if e == nil {
		t.Fatal("eni-a not managed")
	}
	if !slices.Equal(e.Prefixes, []netip.Prefix{netip.MustParsePrefix("2001:db8:2:0:b::/80")}) {
		t.Errorf("prefixes %v, want the /80 whole", e.Prefixes)
	}
	for _, ip := range []string{"10.0.2.10", "2001:db8:2::10"} {
		if !slices.Contains(e.IPs, netip.MustParseAddr(ip)) {
			t.Errorf("%s not routed: %v", ip, e.IPs)
		}
	}
	if slices.Contains(e.IPs, netip.MustParseAddr("2001:db8:2:0:b::2")) {
		t.Errorf("released address listed: %v", e.IPs)
	}
	if in.Released != 1 {
		t.Errorf("released pool IPs counted %d, want 1", in.Released)
	}
}

// TestToNodeIPv6PoolAddressOfUnknownENIIsRetainedAsSingleAddress: an IPv6
// pool address whose ENI is not in status.eni.enis is retained as a /128.
func TestToNodeIPv6PoolAddressOfUnknownENIIsRetainedAsSingleAddress(t *testing.T) {
	cn := ciliumNode(withPool("eni-gone", "2001:db8:2::10"))
	node, _, _ := ciliumnode.ToNode(cn, spec(1))
	if !slices.Equal(node.Retain, []netip.Prefix{netip.MustParsePrefix("2001:db8:2::10/128")}) {
		t.Errorf("retained %v, want 2001:db8:2::10/128", node.Retain)
	}
}
