package routing_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
)

// dualStackNode is eni-a (device 1, eth1) with 10.0.2.10, 2001:db8:2::10
// and the /80 2001:db8:2:0:b::/80, on an in-memory kernel, connmark off.
func dualStackNode() (*routingtest.Host, routing.Node) {
	h := &routingtest.Host{}
	h.AddLink(routing.Link{Index: 3, Name: "eth1", MAC: mustMAC("02:00:00:00:00:01"), MTU: 9001, Up: true, RPFilter: 2})
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10", "2001:db8:2::10"), withPrefixes("2001:db8:2:0:b::/80")),
	}}
	return h, node
}

// TestConvergeIPv6RulesFailingLeaveOnlyThatAddressUnreported: the kernel
// refuses the egress rule of 2001:db8:2::10. The converge still installs
// everything else, returns the failure, and the report leaves out that
// address alone: the IPv4 address and the /80 are routed.
func TestConvergeIPv6RulesFailingLeaveOnlyThatAddressUnreported(t *testing.T) {
	h, node := dualStackNode()
	refused := errors.New("refused")
	h.Fail = func(op string, obj any) error {
		if r, ok := obj.(routing.Rule); ok && op == routing.OpAddRule && r.Src == pfx("2001:db8:2::10/128") {
			return refused
		}
		return nil
	}
	res, err := routing.NewConverger(h, layoutConfig()).Converge(context.Background(), node)
	if !errors.Is(err, refused) {
		t.Fatalf("converge error %v, want the refusal", err)
	}
	if len(res.Routed) != 1 {
		t.Fatalf("routed %+v, want eni-a", res.Routed)
	}
	r := res.Routed[0]
	if !slices.Equal(r.IPs, addrs("10.0.2.10")) || !slices.Equal(r.Prefixes, []netip.Prefix{pfx("2001:db8:2:0:b::/80")}) {
		t.Errorf("routed IPs %v prefixes %v, want 10.0.2.10 and the /80 only", r.IPs, r.Prefixes)
	}
	rules, _ := h.Rules()
	if len(rules) != 5 {
		t.Errorf("kernel holds %d rules, want 5 (all but the refused one)", len(rules))
	}
}

// TestConvergeIPv6RulesOfAMissingENIAreRetained: after a converge, eni-a's
// link disappears for a moment (the kernel drops its routes with it). The
// next converge reports it missing and deletes nothing: the IPv6 rules of
// its address and prefix stay, like its IPv4 rules.
func TestConvergeIPv6RulesOfAMissingENIAreRetained(t *testing.T) {
	h, node := dualStackNode()
	c := routing.NewConverger(h, layoutConfig())
	if _, err := c.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	before, _ := h.Rules()
	h.RemoveLink(3)
	res, err := c.Converge(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing) != 1 || res.Retained != 6 || res.Ops[routing.OpDelRule] != 0 {
		t.Errorf("missing %v, retained %d, ops %v; want eni-a missing, its 6 rules retained, no delete", res.Missing, res.Retained, res.Ops)
	}
	after, _ := h.Rules()
	if len(after) != len(before) {
		t.Errorf("rules %v, want %v", after, before)
	}
}

// TestConvergeIPv6RouteFailingLeavesIPv4Reported: the kernel refuses
// eni-a's IPv6 default route (IPv6 disabled on the link, say). eni-a is
// still reported with its IPv4 address; its IPv6 address and /80, whose
// table is incomplete, are not.
func TestConvergeIPv6RouteFailingLeavesIPv4Reported(t *testing.T) {
	h, node := dualStackNode()
	refused := errors.New("refused")
	h.Fail = func(op string, obj any) error {
		if r, ok := obj.(routing.Route); ok && op == routing.OpReplaceRoute && r.Dst == pfx("::/0") {
			return refused
		}
		return nil
	}
	res, err := routing.NewConverger(h, layoutConfig()).Converge(context.Background(), node)
	if !errors.Is(err, refused) {
		t.Fatalf("converge error %v, want the refusal", err)
	}
	if len(res.Routed) != 1 || !slices.Equal(res.Routed[0].IPs, addrs("10.0.2.10")) || len(res.Routed[0].Prefixes) != 0 {
		t.Errorf("routed %+v, want eni-a with 10.0.2.10 alone", res.Routed)
	}
}
