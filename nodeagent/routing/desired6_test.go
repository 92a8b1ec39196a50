package routing_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/enipam/enipam/nodeagent/routing"
)

// egress6 and ingress6 build the IPv6 rules of a source (an address as
// /128 or a prefix) with the default config.
func egress6(src string, table int) routing.Rule {
	return routing.Rule{IPv6: true, Priority: 111, Src: pfx(src), Table: table, Protocol: routing.DefaultProtocol}
}

func ingress6(dst string) routing.Rule {
	return routing.Rule{IPv6: true, Priority: 20, Dst: pfx(dst), Table: routing.MainTable, Protocol: routing.DefaultProtocol}
}

// routes6 are an ENI table's IPv6 routes through the VPC's IPv6 router.
func routes6(table, ifindex int) []routing.Route {
	gw := routing.IPv6Gateway()
	return []routing.Route{
		{Table: table, Dst: netip.PrefixFrom(gw, 128), LinkIndex: ifindex, Protocol: routing.DefaultProtocol, Metric: 1024},
		{Table: table, Dst: pfx("::/0"), Gateway: gw, LinkIndex: ifindex, Protocol: routing.DefaultProtocol, Metric: 1024},
	}
}

// TestDesiredDualStackENIsRouteIPv6OnSecondaryENIsOnly: the primary ENI
// (device 0) holds 10.0.1.20 and the /80 prefix 2001:db8:1:0:a::/80;
// eni-a (device 1) holds 10.0.2.10, 2001:db8:2::10 and the prefix
// 2001:db8:2:0:b::/80 (with an address of it listed too); eni-b (device 2)
// is IPv4 only. Egress mode vpc, connmark off. eni-a's table gets the
// IPv6 router's two routes after its IPv4 ones, its IPv6 address and
// prefix an unconditional egress rule and an ingress rule each; the
// primary ENI's prefix gets nothing, eni-b no IPv6 route. All of them are
// candidates for the report, the primary prefix included.
func TestDesiredDualStackENIsRouteIPv6OnSecondaryENIsOnly(t *testing.T) {
	vpc := withVPC("10.0.0.0/16")
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-primary", 0, "02:00:00:00:00:00", "10.0.1.1", withIPs("10.0.1.20"), withPrefixes("2001:db8:1:0:a::/80"), vpc),
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10", "2001:db8:2::10", "2001:db8:2:0:b::7"), withPrefixes("2001:db8:2:0:b::/80"), vpc),
		eni("eni-b", 2, "02:00:00:00:00:02", "10.0.3.1", withIPs("10.0.3.10"), vpc),
	}}
	links := []routing.Link{link(2, "eth0", "02:00:00:00:00:00"), link(3, "eth1", "02:00:00:00:00:01"), link(4, "eth2", "02:00:00:00:00:02")}
	cfg := layoutConfig()
	cfg.Egress = routing.EgressVPC

	d := routing.ComputeDesired(node, links, cfg)

	want := []routing.Route{linkRoute("10.0.1.1", 10, 2), defaultRoute("10.0.1.1", 10, 2), linkRoute("10.0.2.1", 11, 3), defaultRoute("10.0.2.1", 11, 3)}
	want = append(want, routes6(11, 3)...)
	want = append(want, linkRoute("10.0.3.1", 12, 4), defaultRoute("10.0.3.1", 12, 4))
	if diff := cmp.Diff(want, d.Routes, netipEqual); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantRules := []routing.Rule{
		egressTo("10.0.1.20/32", "10.0.0.0/16", 10), ingress("10.0.1.20"),
		egressTo("10.0.2.10/32", "10.0.0.0/16", 11), ingress("10.0.2.10"),
		egress6("2001:db8:2::10/128", 11), ingress6("2001:db8:2::10/128"),
		egress6("2001:db8:2:0:b::/80", 11), ingress6("2001:db8:2:0:b::/80"),
		egressTo("10.0.3.10/32", "10.0.0.0/16", 12), ingress("10.0.3.10"),
	}
	if diff := cmp.Diff(wantRules, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if got := d.ENIs[0].Prefixes; len(got) != 1 || got[0] != pfx("2001:db8:1:0:a::/80") {
		t.Errorf("primary ENI's report candidates %v, want its IPv6 prefix", got)
	}
	if got := d.ENIs[1].IPs; len(got) != 2 {
		t.Errorf("eni-a's addresses %v, want 10.0.2.10 and 2001:db8:2::10 (the prefix covers the third)", got)
	}
}

// TestDesiredIPv6AddressesAreRetainedWhenTheirLinkIsMissing: an ENI with
// an IPv6 address and prefix whose link is not there keeps both as /128
// and /80 in Retain, like its IPv4 address.
func TestDesiredIPv6AddressesAreRetainedWhenTheirLinkIsMissing(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-late", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10", "2001:db8:2::10"), withPrefixes("2001:db8:2:0:b::/80")),
	}}
	d := routing.ComputeDesired(node, nil, layoutConfig())
	want := []netip.Prefix{pfx("10.0.2.10/32"), pfx("2001:db8:2::10/128"), pfx("2001:db8:2:0:b::/80")}
	if diff := cmp.Diff(want, d.Retain, netipEqual); diff != "" {
		t.Errorf("retained (-want +got):\n%s", diff)
	}
}

// TestDiffIPv6FwmarkRuleTwinIsToldFromTheIPv4One: a node holds
// enipam's IPv4 fwmark rule and an IPv6 rule identical but for its
// family (both enipam's protocol). The plan keeps the IPv4 rule and
// deletes the IPv6 one, which nothing wants: the family tells them apart.
func TestDiffIPv6FwmarkRuleTwinIsToldFromTheIPv4One(t *testing.T) {
	v6 := fwmark()
	v6.IPv6 = true
	cfg := routing.DefaultConfig()
	d := routing.ComputeDesired(routing.Node{PrimaryMAC: mustMAC("02:00:00:00:00:00")}, []routing.Link{link(2, "eth0", "02:00:00:00:00:00")}, cfg)
	p := routing.Diff(d, []routing.Rule{fwmark(), v6}, nil, &routing.Connmark{Primary: "eth0", Mark: 0x80}, cfg)
	if len(p.AddRules) != 0 || len(p.DelRules) != 1 || !p.DelRules[0].IPv6 {
		t.Errorf("plan adds %v, deletes %v; want the IPv6 twin deleted alone", p.AddRules, p.DelRules)
	}
}
