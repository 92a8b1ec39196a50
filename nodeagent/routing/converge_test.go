package routing_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
)

// fakeNode is an in-memory kernel with eth0 and the links of twoENINode,
// fresh from boot: MTU 1500, down, strict rp_filter.
func fakeNode(t *testing.T) (*routingtest.Host, routing.Node) {
	t.Helper()
	node, links := twoENINode()
	h := &routingtest.Host{}
	for _, l := range links {
		l.MTU, l.Up, l.RPFilter = 1500, l.Name == "eth0", 1
		h.AddLink(l)
	}
	return h, node
}

// TestConvergeFromScratchThenNothingToDo: a fresh node converges in one
// pass (4 reads, then 3 writes per link, 4 routes, 6 rules); a second pass
// costs the 4 reads and no write.
func TestConvergeFromScratchThenNothingToDo(t *testing.T) {
	h, node := fakeNode(t)
	c := routing.NewConverger(h, routing.DefaultConfig())

	res, err := c.Converge(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Ops.Writes(), 2*3+4+6; got != want {
		t.Errorf("first converge: %d writes (%v), want %d", got, res.Ops, want)
	}
	if res.ENIs != 2 || res.Rules != 6 || res.Routes != 4 {
		t.Errorf("result: %d ENIs %d rules %d routes, want 2, 6, 4", res.ENIs, res.Rules, res.Routes)
	}
	rules, _ := h.Rules()
	routes, _ := h.Routes()
	if len(rules) != 6 || len(routes) != 4 {
		t.Errorf("kernel holds %d rules and %d routes, want 6 and 4", len(rules), len(routes))
	}
	for _, i := range []int{3, 4} {
		l, _ := h.Link(i)
		if l.MTU != 9001 || !l.Up || l.RPFilter != 2 {
			t.Errorf("link %s: MTU %d up %v rp_filter %d", l.Name, l.MTU, l.Up, l.RPFilter)
		}
	}
	if eth0, _ := h.Link(2); eth0.MTU != 1500 || eth0.RPFilter != 1 {
		t.Errorf("eth0 changed: %+v", eth0)
	}

	res, err = c.Converge(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops.Total() != 4 || res.Ops.Writes() != 0 {
		t.Errorf("second converge: %v, want 4 reads and no write", res.Ops)
	}
}

// TestConvergeWriteFailureIsReportedAndOthersStillApplied: the kernel
// refuses one rule; the error names it (typed *OpError), and every other
// change is still made, so one bad IP does not cost the node its routing.
func TestConvergeWriteFailureIsReportedAndOthersStillApplied(t *testing.T) {
	h, node := fakeNode(t)
	refused := errors.New("operation not permitted")
	bad := egress("10.0.3.10", 12)
	h.Fail = func(op string, obj any) error {
		if r, ok := obj.(routing.Rule); ok && r == bad {
			return refused
		}
		return nil
	}
	c := routing.NewConverger(h, routing.DefaultConfig())

	_, err := c.Converge(context.Background(), node)
	var opErr *routing.OpError
	if !errors.As(err, &opErr) || opErr.Op != routing.OpAddRule || !errors.Is(err, refused) {
		t.Fatalf("err = %v, want an add_rule *OpError wrapping the kernel's error", err)
	}
	rules, _ := h.Rules()
	if len(rules) != 5 {
		t.Errorf("kernel holds %d rules, want the 5 that were not refused", len(rules))
	}
}

// TestConvergeRacesAreNotErrors: a rule that appears between the read and
// the add (ErrExist) and a route the kernel already dropped with its link
// (ErrNotFound) count as done.
func TestConvergeRacesAreNotErrors(t *testing.T) {
	h, node := fakeNode(t)
	c := routing.NewConverger(h, routing.DefaultConfig())
	if _, err := c.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	h.Fail = func(op string, obj any) error {
		switch op {
		case routing.OpAddRule:
			return routing.ErrExist
		case routing.OpDelRoute, routing.OpDelRule:
			return routing.ErrNotFound
		}
		return nil
	}
	node.ENIs[0].IPs = append(node.ENIs[0].IPs, netip.MustParseAddr("10.0.2.12"))
	node.ENIs = node.ENIs[:1]
	res, err := c.Converge(context.Background(), node)
	if err != nil {
		t.Errorf("converge with races: %v", err)
	}
	if res.Ops[routing.OpAddRule] != 2 || res.Ops[routing.OpDelRoute] != 2 {
		t.Errorf("ops %v, want 2 rule adds and 2 route deletes attempted", res.Ops)
	}
}

// TestConvergeLinkGoneThenENIGone: the kernel drops eni-b's link (and with
// it its routes) before the operator removes the ENI from the CiliumNode.
// Meanwhile eni-b is reported missing and its rules are removed; once it
// leaves the node nothing of it remains.
func TestConvergeLinkGoneThenENIGone(t *testing.T) {
	h, node := fakeNode(t)
	c := routing.NewConverger(h, routing.DefaultConfig())
	if _, err := c.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	h.RemoveLink(4)
	res, err := c.Converge(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing) != 1 || res.Missing[0].ID != "eni-b" {
		t.Errorf("missing = %v, want eni-b", res.Missing)
	}
	node.ENIs = node.ENIs[:1]
	if _, err := c.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	rules, _ := h.Rules()
	routes, _ := h.Routes()
	for _, r := range rules {
		if r.Table == 12 || r.Dst == pfx("10.0.3.10/32") {
			t.Errorf("rule of eni-b left: %v", r)
		}
	}
	for _, r := range routes {
		if r.Table == 12 {
			t.Errorf("route of eni-b left: %v", r)
		}
	}
	if len(rules) != 4 || len(routes) != 2 {
		t.Errorf("kernel holds %d rules and %d routes, want 4 and 2", len(rules), len(routes))
	}
}
