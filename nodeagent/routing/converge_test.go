package routing_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
)

// fakeNode is an in-memory kernel with eth0 and the links of twoENINode,
// fresh from boot: MTU 1500, down, strict rp_filter. eth0 is the primary
// ENI's link.
func fakeNode(t *testing.T) (*routingtest.Host, routing.Node) {
	t.Helper()
	node, links := twoENINode()
	node.PrimaryMAC = links[0].MAC
	h := &routingtest.Host{}
	for _, l := range links {
		l.MTU, l.Up, l.RPFilter = 1500, l.Name == "eth0", 1
		h.AddLink(l)
	}
	return h, node
}

// TestConvergeFromScratchThenNothingToDo: a fresh node converges in one
// pass (5 reads, then 3 writes per link, 4 routes, 6 address rules, the
// fwmark rule, the connmark table, and eth0's strict rp_filter made
// loose, which the connmark return path needs); a second pass costs the 5
// reads (links, rules, routes, connmark table, rp_filter) and no write.
// Every ENI and address is reported routed; eth0's MTU is untouched.
func TestConvergeFromScratchThenNothingToDo(t *testing.T) {
	h, node := fakeNode(t)
	c := routing.NewConverger(h, routing.DefaultConfig())

	res, err := c.Converge(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Ops.Writes(), 2*3+4+6+1+1+1; got != want {
		t.Errorf("first converge: %d writes (%v), want %d", got, res.Ops, want)
	}
	if res.ENIs != 2 || res.Rules != 7 || res.Routes != 4 {
		t.Errorf("result: %d ENIs %d rules %d routes, want 2, 7, 4", res.ENIs, res.Rules, res.Routes)
	}
	rules, _ := h.Rules()
	routes, _ := h.Routes()
	if len(rules) != 7 || len(routes) != 4 {
		t.Errorf("kernel holds %d rules and %d routes, want 7 and 4", len(rules), len(routes))
	}
	if c, _ := h.Connmark(); c == nil || *c != (routing.Connmark{Primary: "eth0", Mark: 0x80}) {
		t.Errorf("connmark table %v, want on eth0", c)
	}
	wantRouted := []routing.RoutedENI{
		{ID: "eni-a", MAC: mustMAC("02:00:00:00:00:01"), Number: 1, Table: 11, IPs: addrs("10.0.2.10", "10.0.2.11")},
		{ID: "eni-b", MAC: mustMAC("02:00:00:00:00:02"), Number: 2, Table: 12, IPs: addrs("10.0.3.10")},
	}
	if diff := cmp.Diff(wantRouted, res.Routed, netipEqual); diff != "" {
		t.Errorf("routed (-want +got):\n%s", diff)
	}
	for _, i := range []int{3, 4} {
		l, _ := h.Link(i)
		if l.MTU != 9001 || !l.Up || l.RPFilter != 2 {
			t.Errorf("link %s: MTU %d up %v rp_filter %d", l.Name, l.MTU, l.Up, l.RPFilter)
		}
	}
	if eth0, _ := h.Link(2); eth0.MTU != 1500 || eth0.RPFilter != 2 {
		t.Errorf("eth0: %+v, want MTU 1500 as it was and rp_filter loosened to 2", eth0)
	}

	res, err = c.Converge(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops.Total() != 5 || res.Ops.Writes() != 0 {
		t.Errorf("second converge: %v, want 5 reads and no write", res.Ops)
	}
}

// TestConvergeWriteFailureIsReportedAndOthersStillApplied: the kernel
// refuses one rule; the error names it (typed *OpError), and every other
// change is still made, so one bad IP does not cost the node its routing.
// The report lists both ENIs and every address but the refused one.
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

	res, err := c.Converge(context.Background(), node)
	var opErr *routing.OpError
	if !errors.As(err, &opErr) || opErr.Op != routing.OpAddRule || !errors.Is(err, refused) {
		t.Fatalf("err = %v, want an add_rule *OpError wrapping the kernel's error", err)
	}
	rules, _ := h.Rules()
	if len(rules) != 6 {
		t.Errorf("kernel holds %d rules, want the 6 that were not refused", len(rules))
	}
	if len(res.Routed) != 2 || len(res.Routed[0].IPs) != 2 || len(res.Routed[1].IPs) != 0 {
		t.Errorf("routed %+v, want eni-a with both addresses and eni-b without 10.0.3.10", res.Routed)
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
// it its routes) while its address is still in use. Meanwhile eni-b is
// reported missing and left out of the report, but its rules stay (fail
// safe: the link may come back); once the ENI and its address leave the
// node nothing of it remains.
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
	if len(res.Routed) != 1 || res.Routed[0].ID != "eni-a" {
		t.Errorf("routed %+v, want eni-a alone", res.Routed)
	}
	if rules, _ := h.Rules(); !slices.Contains(rules, egress("10.0.3.10", 12)) || res.Retained != 2 {
		t.Errorf("rules %v (%d retained), want 10.0.3.10's two kept", rules, res.Retained)
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
	if len(rules) != 5 || len(routes) != 2 {
		t.Errorf("kernel holds %d rules and %d routes, want 5 (eni-a's and fwmark) and 2", len(rules), len(routes))
	}
}

// TestConvergeFailedDeleteKeepsTheAddressUnreported: 10.0.2.11 moves from
// eni-a to eni-b (released there, assigned here) while the kernel refuses
// to delete its old rule into table 11. The new rule is added, but the
// address is reported on neither ENI: a stale rule ahead of it would still
// send its traffic out of eni-a.
func TestConvergeFailedDeleteKeepsTheAddressUnreported(t *testing.T) {
	h, node := fakeNode(t)
	c := routing.NewConverger(h, routing.DefaultConfig())
	if _, err := c.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	h.Fail = func(op string, obj any) error {
		if r, ok := obj.(routing.Rule); ok && op == routing.OpDelRule && r.Src == pfx("10.0.2.11/32") {
			return errors.New("device or resource busy")
		}
		return nil
	}
	node.ENIs[0].IPs = addrs("10.0.2.10")
	node.ENIs[1].IPs = addrs("10.0.3.10", "10.0.2.11")
	res, err := c.Converge(context.Background(), node)
	if err == nil {
		t.Fatal("converge succeeded although a delete failed")
	}
	for _, e := range res.Routed {
		if slices.Contains(e.IPs, netip.MustParseAddr("10.0.2.11")) {
			t.Errorf("10.0.2.11 reported on %s although its old rule is still there", e.ID)
		}
	}
	rules, _ := h.Rules()
	if !slices.Contains(rules, egress("10.0.2.11", 12)) {
		t.Errorf("new rule of 10.0.2.11 into table 12 missing: %v", rules)
	}
}

// TestConvergeFailedRouteUnreportsTheENI: the kernel refuses table 12's
// default route; eni-b is left out of the report, eni-a is in it.
func TestConvergeFailedRouteUnreportsTheENI(t *testing.T) {
	h, node := fakeNode(t)
	h.Fail = func(op string, obj any) error {
		if r, ok := obj.(routing.Route); ok && r.Table == 12 && r.Gateway.IsValid() {
			return errors.New("network unreachable")
		}
		return nil
	}
	res, err := routing.NewConverger(h, routing.DefaultConfig()).Converge(context.Background(), node)
	if err == nil {
		t.Fatal("converge succeeded although a route failed")
	}
	if len(res.Routed) != 1 || res.Routed[0].ID != "eni-a" {
		t.Errorf("routed %+v, want eni-a alone", res.Routed)
	}
}

// unreadableConnmark is a kernel without nf_tables: reading the connmark
// table fails.
type unreadableConnmark struct{ *routingtest.Host }

func (unreadableConnmark) Connmark() (*routing.Connmark, error) {
	return nil, errors.New("protocol not supported")
}

// TestConvergeWithoutNFTablesNeedsConnmarkOff: on a kernel whose
// nf_tables cannot be read, a converge with connmark on fails before any
// change; with connmark off it routes the node as usual.
func TestConvergeWithoutNFTablesNeedsConnmarkOff(t *testing.T) {
	h, node := fakeNode(t)
	host := unreadableConnmark{h}
	if _, err := routing.NewConverger(host, routing.DefaultConfig()).Converge(context.Background(), node); err == nil {
		t.Error("connmark on: converge succeeded without reading the table")
	}
	res, err := routing.NewConverger(host, layoutConfig()).Converge(context.Background(), node)
	if err != nil || res.Plan.Connmark != nil || len(res.Routed) != 2 {
		t.Errorf("connmark off: %v, plan %+v, routed %v", err, res.Plan.Connmark, res.Routed)
	}
}

// TestConvergeLoosensThePrimaryRPFilterOnlyWhenStrict: with connmark on,
// eth0's rp_filter is written only when the kernel would check strictly
// (its own value or "all" is 1), and never with connmark off.
func TestConvergeLoosensThePrimaryRPFilterOnlyWhenStrict(t *testing.T) {
	for _, tc := range []struct {
		name        string
		eth0, all   int
		connmark    bool
		wantWritten bool
	}{
		{"eth0 strict", 1, 0, true, true},
		{"all strict", 0, 1, true, true},
		{"both strict", 1, 1, true, true},
		{"already loose", 2, 1, true, false},
		{"off", 0, 0, true, false},
		{"strict, connmark off", 1, 1, false, false},
	} {
		h, node := fakeNode(t)
		h.SetRPFilterAll(tc.all)
		cfg := routing.DefaultConfig()
		cfg.Connmark = tc.connmark
		if _, err := routing.NewConverger(h, cfg).Converge(context.Background(), node); err != nil {
			t.Fatal(err)
		}
		h.RemoveLink(2)
		h.AddLink(routing.Link{Index: 2, Name: "eth0", MAC: node.PrimaryMAC, MTU: 1500, Up: true, RPFilter: tc.eth0})
		res, err := routing.NewConverger(h, cfg).Converge(context.Background(), node)
		if err != nil {
			t.Fatal(err)
		}
		eth0, _ := h.Link(2)
		if written := res.Ops[routing.OpSetRPFilter] == 1; written != tc.wantWritten || (written && eth0.RPFilter != 2) {
			t.Errorf("%s: rp_filter writes %d, eth0 now %d; want written %v", tc.name, res.Ops[routing.OpSetRPFilter], eth0.RPFilter, tc.wantWritten)
		}
	}
}
