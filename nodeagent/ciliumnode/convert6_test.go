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

// TestToNodePrimaryENIsIPv6WindowUnderFirstInterfaceIndex1: the primary
// ENI (device 0) holds the node's IPv6 window, the /80
// 2001:db8:1:0:a::/80, while the spec starts at device 1. Before any of
// its addresses is pooled the /80 is already routed on the primary ENI
// (so the agent reports it and the operator may pool from it); with
// three window addresses pooled, one released, it is still the /80
// whole, the addresses not listed one by one, no problem, and the ENI
// is not draining. A held IPv4 address on the primary ENI still drains
// as before, beside the /80.
func TestToNodePrimaryENIsIPv6WindowUnderFirstInterfaceIndex1(t *testing.T) {
	window := netip.MustParsePrefix("2001:db8:1:0:a::/80")
	for _, tc := range []struct {
		name     string
		opts     []func(*ciliumv2.CiliumNode)
		draining bool
		ips      []netip.Addr
	}{
		{name: "nothing pooled yet"},
		{name: "three window addresses pooled, one released", opts: []func(*ciliumv2.CiliumNode){
			withPool("eni-p", "2001:db8:1:0:a::1", "2001:db8:1:0:a::2", "2001:db8:1:0:a::3"),
			withRelease("2001:db8:1:0:a::3", "released"),
		}},
		{name: "an IPv4 address held on the primary ENI", opts: []func(*ciliumv2.CiliumNode){
			withPool("eni-p", "10.0.1.20", "2001:db8:1:0:a::1"),
		}, draining: true, ips: []netip.Addr{netip.MustParseAddr("10.0.1.20")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]func(*ciliumv2.CiliumNode){
				withENI("eni-p", 0, "02:00:00:00:00:00", "10.0.1.0/24", nil),
				withIPv6Prefix("eni-p", window.String()),
				withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
			}, tc.opts...)
			node, in, problems := ciliumnode.ToNode(ciliumNode(opts...), spec(1))
			if len(problems) != 0 {
				t.Fatalf("problems %v", problems)
			}
			e := findENI(node, "eni-p")
			if e == nil {
				t.Fatal("the primary ENI's /80 is not routed")
			}
			if !slices.Equal(e.Prefixes, []netip.Prefix{window}) || !slices.Equal(e.IPs, tc.ips) || e.Draining != tc.draining {
				t.Errorf("primary ENI: prefixes %v, IPs %v, draining %v; want [%s], %v, %v", e.Prefixes, e.IPs, e.Draining, window, tc.ips, tc.draining)
			}
			if _, listed := in.Draining["eni-p"]; listed != tc.draining {
				t.Errorf("primary ENI in the draining log: %v, want %v", listed, tc.draining)
			}
			if len(node.Retain) != 0 {
				t.Errorf("retained %v, want nothing", node.Retain)
			}
		})
	}
}
