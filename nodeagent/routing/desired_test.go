package routing_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/enipam/enipam/nodeagent/routing"
)

// TestDesiredTwoENIsGetTablesAndRulesAsSpecified: two secondary ENIs
// (device 1 on 10.0.2.0/24, device 2 on 10.0.3.0/24) with two and one pool
// IPs, default config. Each gets table 10+n with its gateway's link route
// and default route, each IP an egress rule into that table and an ingress
// rule into main, and each link MTU 9001 and loose rp_filter.
func TestDesiredTwoENIsGetTablesAndRulesAsSpecified(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-b", 2, "02:00:00:00:00:02", "10.0.3.1", withIPs("10.0.3.10")),
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.11", "10.0.2.10")),
	}}
	links := []routing.Link{link(1, "lo", "00:00:00:00:00:00"), link(2, "eth0", "02:00:00:00:00:00"), link(3, "eth1", "02:00:00:00:00:01"), link(4, "eth2", "02:00:00:00:00:02")}

	d := routing.ComputeDesired(node, links, routing.DefaultConfig())

	wantRoutes := []routing.Route{
		linkRoute("10.0.2.1", 11, 3), defaultRoute("10.0.2.1", 11, 3),
		linkRoute("10.0.3.1", 12, 4), defaultRoute("10.0.3.1", 12, 4),
	}
	if diff := cmp.Diff(wantRoutes, d.Routes, netipEqual); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantRules := []routing.Rule{
		egress("10.0.2.10", 11), ingress("10.0.2.10"),
		egress("10.0.2.11", 11), ingress("10.0.2.11"),
		egress("10.0.3.10", 12), ingress("10.0.3.10"),
	}
	if diff := cmp.Diff(wantRules, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if len(d.Links) != 2 || d.Links[0].Link.Name != "eth1" || d.Links[1].Link.Name != "eth2" {
		t.Fatalf("links = %+v, want eth1 and eth2", d.Links)
	}
	for _, w := range d.Links {
		if w.MTU != 9001 || w.RPFilter != routing.RPFilterLoose {
			t.Errorf("link %s wants MTU %d rp_filter %d, want 9001 and 2", w.Link.Name, w.MTU, w.RPFilter)
		}
	}
	if len(d.Missing) != 0 || len(d.Problems) != 0 {
		t.Errorf("missing %v, problems %v; want none", d.Missing, d.Problems)
	}
}

// TestDesiredLinkNotYetVisibleIsMissingAndUnrouted: an ENI whose MAC no
// link carries (attached in EC2, not yet seen by the kernel) is reported
// missing and gets neither routes nor rules, while the ENI next to it is
// routed normally.
func TestDesiredLinkNotYetVisibleIsMissingAndUnrouted(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10")),
		eni("eni-late", 2, "02:00:00:00:00:02", "10.0.3.1", withIPs("10.0.3.10")),
	}}
	d := routing.ComputeDesired(node, []routing.Link{link(3, "eth1", "02:00:00:00:00:01")}, routing.DefaultConfig())

	if len(d.Missing) != 1 || d.Missing[0].ID != "eni-late" {
		t.Fatalf("missing = %v, want eni-late", d.Missing)
	}
	for _, r := range d.Rules {
		if r.Table == 12 || r.Src == pfx("10.0.3.10/32") || r.Dst == pfx("10.0.3.10/32") {
			t.Errorf("rule %v for the ENI without link", r)
		}
	}
	if len(d.Routes) != 2 || len(d.Rules) != 2 {
		t.Errorf("got %d routes and %d rules, want 2 and 2 for eni-a alone", len(d.Routes), len(d.Rules))
	}
}

// TestDesiredIngressPriorityZeroInstallsNoIngressRules: ingress rules are
// optional; priority 0 turns them off.
func TestDesiredIngressPriorityZeroInstallsNoIngressRules(t *testing.T) {
	cfg := routing.DefaultConfig()
	cfg.IngressPriority = 0
	node := routing.Node{ENIs: []routing.ENI{eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10", "10.0.2.11"))}}
	d := routing.ComputeDesired(node, []routing.Link{link(3, "eth1", "02:00:00:00:00:01")}, cfg)
	if diff := cmp.Diff([]routing.Rule{egress("10.0.2.10", 11), egress("10.0.2.11", 11)}, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

// TestDesiredUnroutableENIsAreProblemsNotGuesses: an ENI that reuses
// another's device number (multi-card instances), one out of the table
// range, and one without an IPv4 gateway are each reported with a typed
// reason and left alone; the first ENI of the shared number keeps it.
func TestDesiredUnroutableENIsAreProblemsNotGuesses(t *testing.T) {
	noGW := eni("eni-nogw", 4, "02:00:00:00:00:04", "fd00::1")
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1"),
		eni("eni-b", 1, "02:00:00:00:00:02", "10.0.3.1"),
		eni("eni-big", routing.MaxENINumber+1, "02:00:00:00:00:03", "10.0.4.1"),
		noGW,
	}}
	links := []routing.Link{link(3, "eth1", "02:00:00:00:00:01"), link(4, "eth2", "02:00:00:00:00:02"), link(5, "eth3", "02:00:00:00:00:03"), link(6, "eth4", "02:00:00:00:00:04")}
	d := routing.ComputeDesired(node, links, routing.DefaultConfig())

	want := map[string]error{"eni-b": routing.ErrENINumberConflict, "eni-big": routing.ErrENINumber, "eni-nogw": routing.ErrNoGateway}
	if len(d.Problems) != len(want) {
		t.Fatalf("problems = %v, want %d", d.Problems, len(want))
	}
	for _, p := range d.Problems {
		var e *routing.ENIError
		if !errors.As(p, &e) || !errors.Is(p, want[e.ENI]) {
			t.Errorf("problem %v: want %v for its ENI", p, want[e.ENI])
		}
	}
	if len(d.Links) != 1 || d.Links[0].ENI != "eni-a" {
		t.Errorf("routed links = %+v, want eni-a alone", d.Links)
	}
}

// TestDesiredSharedMACPicksLowestIndex: when two links carry the ENI's MAC
// (a bond over its slave, a VLAN on it), the choice is stable: the lowest
// ifindex.
func TestDesiredSharedMACPicksLowestIndex(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1")}}
	links := []routing.Link{link(9, "eth1.100", "02:00:00:00:00:01"), link(3, "eth1", "02:00:00:00:00:01")}
	d := routing.ComputeDesired(node, links, routing.DefaultConfig())
	if len(d.Links) != 1 || d.Links[0].Link.Index != 3 {
		t.Fatalf("links = %+v, want ifindex 3", d.Links)
	}
	if !slices.ContainsFunc(d.Routes, func(r routing.Route) bool { return r.LinkIndex == 3 }) {
		t.Errorf("routes %v do not use ifindex 3", d.Routes)
	}
}

// TestConfigValidateRejectsShadowingPriorities: priorities that would
// shadow the local table, or an ingress rule evaluated after egress, are
// refused.
func TestConfigValidateRejectsShadowingPriorities(t *testing.T) {
	for name, mut := range map[string]func(*routing.Config){
		"egress 0":              func(c *routing.Config) { c.EgressPriority = 0 },
		"egress main":           func(c *routing.Config) { c.EgressPriority = 32766 },
		"ingress after egress":  func(c *routing.Config) { c.IngressPriority = 200 },
		"mtu tiny":              func(c *routing.Config) { c.MTU = 10 },
		"protocol out of range": func(c *routing.Config) { c.Protocol = 256 },
	} {
		cfg := routing.DefaultConfig()
		mut(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
	}
	if err := routing.DefaultConfig().Validate(); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
}
