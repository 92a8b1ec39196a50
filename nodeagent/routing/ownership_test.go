package routing_test

import (
	"testing"

	"github.com/enipam/enipam/nodeagent/routing"
)

// TestOwnershipOnlyEnipamProtocolInEnipamTables: what enipam may delete.
// Its protocol alone is not enough (a route in main, a rule into some other
// table), and its tables and priorities alone are not either (Cilium's or
// an admin's rule at 111 into table 11).
func TestOwnershipOnlyEnipamProtocolInEnipamTables(t *testing.T) {
	cfg := routing.DefaultConfig()
	p := routing.DefaultProtocol
	rules := []struct {
		name string
		rule routing.Rule
		want bool
	}{
		{"egress rule", egress("10.0.2.10", 11), true},
		{"ingress rule", ingress("10.0.2.10"), true},
		{"egress rule at another priority", routing.Rule{Priority: 500, Src: pfx("10.0.2.10/32"), Table: 11, Protocol: p}, true},
		{"same shape, foreign protocol", routing.Rule{Priority: 111, Src: pfx("10.0.2.10/32"), Table: 11, Protocol: 4}, false},
		{"kernel protocol (Cilium ENI mode)", routing.Rule{Priority: 111, Src: pfx("10.0.2.10/32"), Table: 11, Protocol: 2}, false},
		{"our protocol, table outside range", routing.Rule{Priority: 111, Src: pfx("10.0.2.10/32"), Table: 200, Protocol: p}, false},
		{"our protocol, table 10 (primary ENI)", routing.Rule{Priority: 111, Src: pfx("10.0.2.10/32"), Table: 10, Protocol: p}, true},
		{"our protocol, table 9", routing.Rule{Priority: 111, Src: pfx("10.0.2.10/32"), Table: 9, Protocol: p}, false},
		{"connmark rule", routing.Rule{Priority: 109, Mark: 0x80, Mask: 0x80, Table: routing.MainTable, Protocol: p}, true},
		{"fwmark rule of another protocol", routing.Rule{Priority: 109, Mark: 0x80, Mask: 0x80, Table: routing.MainTable, Protocol: 2}, false},
		{"our protocol, fwmark and destination into main", routing.Rule{Priority: 109, Dst: pfx("10.0.2.10/32"), Mark: 0x80, Mask: 0x80, Table: routing.MainTable, Protocol: p}, false},
		{"our protocol, from-rule into main", routing.Rule{Priority: 20, Src: pfx("10.0.2.10/32"), Table: routing.MainTable, Protocol: p}, false},
		{"our protocol, catch-all into main", routing.Rule{Priority: 20, Table: routing.MainTable, Protocol: p}, false},
	}
	for _, tc := range rules {
		if got := cfg.OwnsRule(tc.rule); got != tc.want {
			t.Errorf("%s: OwnsRule(%v) = %v, want %v", tc.name, tc.rule, got, tc.want)
		}
	}
	routes := []struct {
		name  string
		route routing.Route
		want  bool
	}{
		{"default route in table 11", defaultRoute("10.0.2.1", 11, 3), true},
		{"link route in table 137", linkRoute("10.0.2.1", 10+routing.MaxENINumber, 3), true},
		{"our protocol in main", defaultRoute("10.0.2.1", routing.MainTable, 3), false},
		{"default route in table 10 (primary ENI)", defaultRoute("10.0.1.1", 10, 2), true},
		{"our protocol in table 9", defaultRoute("10.0.1.1", 9, 2), false},
		{"our protocol in table 138", defaultRoute("10.0.2.1", 11+routing.MaxENINumber, 3), false},
		{"foreign route in table 11", routing.Route{Table: 11, Dst: pfx("192.168.0.0/16"), LinkIndex: 3, Protocol: 4}, false},
	}
	for _, tc := range routes {
		if got := cfg.OwnsRoute(tc.route); got != tc.want {
			t.Errorf("%s: OwnsRoute(%v) = %v, want %v", tc.name, tc.route, got, tc.want)
		}
	}
}
