package routing_test

import (
	"net"
	"net/netip"

	"github.com/google/go-cmp/cmp"

	"github.com/enipam/enipam/nodeagent/routing"
)

// eni builds a managed ENI; options add IPs or change fields.
func eni(id string, number int, mac, gateway string, opts ...func(*routing.ENI)) routing.ENI {
	e := routing.ENI{ID: id, Number: number, MAC: mustMAC(mac), Gateway: netip.MustParseAddr(gateway)}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func withIPs(ips ...string) func(*routing.ENI) {
	return func(e *routing.ENI) {
		for _, ip := range ips {
			e.IPs = append(e.IPs, netip.MustParseAddr(ip))
		}
	}
}

func withPrefixes(ps ...string) func(*routing.ENI) {
	return func(e *routing.ENI) {
		for _, p := range ps {
			e.Prefixes = append(e.Prefixes, netip.MustParsePrefix(p))
		}
	}
}

func withVPC(cidrs ...string) func(*routing.ENI) {
	return func(e *routing.ENI) {
		for _, c := range cidrs {
			e.VPCCIDRs = append(e.VPCCIDRs, netip.MustParsePrefix(c))
		}
	}
}

// layoutConfig is the default configuration without the connmark rule,
// for tests about the ENIs' own tables and rules.
func layoutConfig() routing.Config {
	cfg := routing.DefaultConfig()
	cfg.Connmark = false
	return cfg
}

func link(index int, name, mac string) routing.Link {
	return routing.Link{Index: index, Name: name, MAC: mustMAC(mac), MTU: 1500, RPFilter: 1}
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// egress and ingress build the rules enipam installs with the default config.
func egress(ip string, table int) routing.Rule {
	return routing.Rule{Priority: 111, Src: pfx(ip + "/32"), Table: table, Protocol: routing.DefaultProtocol}
}

// egressTo is an EgressVPC rule.
func egressTo(src, dst string, table int) routing.Rule {
	return routing.Rule{Priority: 111, Src: pfx(src), Dst: pfx(dst), Table: table, Protocol: routing.DefaultProtocol}
}

// fwmark is the connmark rule with the default config.
func fwmark() routing.Rule {
	return routing.Rule{Priority: 109, Mark: 0x80, Mask: 0x80, Table: routing.MainTable, Protocol: routing.DefaultProtocol}
}

func ingress(ip string) routing.Rule {
	return routing.Rule{Priority: 20, Dst: pfx(ip + "/32"), Table: routing.MainTable, Protocol: routing.DefaultProtocol}
}

func linkRoute(gw string, table, ifindex int) routing.Route {
	return routing.Route{Table: table, Dst: pfx(gw + "/32"), LinkIndex: ifindex, Scope: routing.ScopeLink, Protocol: routing.DefaultProtocol}
}

func defaultRoute(gw string, table, ifindex int) routing.Route {
	return routing.Route{Table: table, Dst: pfx("0.0.0.0/0"), Gateway: netip.MustParseAddr(gw), LinkIndex: ifindex, Protocol: routing.DefaultProtocol}
}

// netipEqual lets cmp compare the netip values inside rules and routes.
var netipEqual = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}
