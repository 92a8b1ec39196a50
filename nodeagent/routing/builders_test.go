package routing_test

import (
	"github.com/google/go-cmp/cmp"
	"net"
	"net/netip"

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
