package routing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/enipam/enipam/nodeagent/routing"
)

// foreignState plants what other software keeps on a node beside enipam:
// a rule and a route of another protocol into one of enipam's tables, a
// route carrying enipam's protocol number outside its table range, a
// main-table route and a rule into a table of its own.
func foreignState() ([]routing.Rule, []routing.Route) {
	rules := []routing.Rule{
		{Priority: 0, Table: 255, Protocol: 2},
		{Priority: 100, Src: pfx("10.0.2.10/32"), Table: 11, Protocol: 4},
		{Priority: 200, Dst: pfx("192.168.0.0/16"), Table: 300, Protocol: 4},
		{Priority: 32766, Table: routing.MainTable, Protocol: 2},
	}
	routes := []routing.Route{
		{Table: routing.MainTable, Dst: pfx("10.0.1.0/24"), LinkIndex: 1, Scope: routing.ScopeLink, Protocol: 2},
		{Table: 11, Dst: pfx("172.16.0.0/12"), LinkIndex: 2, Scope: routing.ScopeLink, Protocol: 4},
		{Table: 300, Dst: pfx("0.0.0.0/0"), Gateway: addrs("10.0.1.1")[0], LinkIndex: 1, Protocol: routing.DefaultProtocol},
	}
	return rules, routes
}

// TestCleanupLeavesTheNodeAsBeforeEnipam: a node with foreign rules and
// routes (some in enipam's tables, one with enipam's protocol outside its
// range) is converged with two ENIs, connmark on and strict rp_filter
// everywhere, then cleaned up. Afterwards the rules, the routes and the
// connmark table are exactly those from before enipam, and each link's
// rp_filter is back at 1; MTU and link state stay as enipam left them. A
// second cleanup finds nothing and costs its three reads.
func TestCleanupLeavesTheNodeAsBeforeEnipam(t *testing.T) {
	h, node := fakeNode(t)
	foreignRules, foreignRoutes := foreignState()
	h.SetRules(foreignRules...)
	h.SetRoutes(foreignRoutes...)
	c := routing.NewConverger(h, routing.DefaultConfig())
	if _, err := c.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if rules, _ := h.Rules(); len(rules) != len(foreignRules)+7 {
		t.Fatalf("after converge %d rules, want %d", len(rules), len(foreignRules)+7)
	}

	res, err := c.Cleanup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.DelRules) != 7 || len(res.Plan.DelRoutes) != 4 || res.Plan.Connmark == nil || res.Plan.Connmark.Want != nil {
		t.Errorf("cleanup plan %+v, want 7 rules, 4 routes and the connmark table deleted", res.Plan)
	}
	if len(res.Plan.AddRules) != 0 || len(res.Plan.ReplaceRoutes) != 0 || len(res.Plan.Links) != 0 {
		t.Errorf("cleanup plan adds or changes something: %+v", res.Plan)
	}
	rules, _ := h.Rules()
	routes, _ := h.Routes()
	if diff := cmp.Diff(foreignRules, rules, netipEqual); diff != "" {
		t.Errorf("rules after cleanup differ from before enipam (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(foreignRoutes, routes, netipEqual); diff != "" {
		t.Errorf("routes after cleanup differ from before enipam (-before +after):\n%s", diff)
	}
	if cm, _ := h.Connmark(); cm != nil {
		t.Errorf("connmark table %v after cleanup, want none", cm)
	}
	wantRP := []routing.RPFilterRestore{{Link: "eth0", From: 2, To: 1}, {Link: "eth1", From: 2, To: 1}, {Link: "eth2", From: 2, To: 1}}
	if diff := cmp.Diff(wantRP, res.RPFilter); diff != "" {
		t.Errorf("rp_filter restored (-want +got):\n%s", diff)
	}
	links, _ := h.Links()
	for _, l := range links {
		full, _ := h.Link(l.Index)
		if full.RPFilter != 1 {
			t.Errorf("%s rp_filter %d after cleanup, want 1 as before", l.Name, full.RPFilter)
		}
		if l.Name != "eth0" && (full.MTU != routing.DefaultMTU || !full.Up) {
			t.Errorf("%s MTU %d up %v after cleanup, want left as enipam set it", l.Name, full.MTU, full.Up)
		}
	}
	if got := res.String(); got != "7 rules, 4 routes, the connmark table and 3 rp_filter values restored" {
		t.Errorf("summary %q", got)
	}

	again, err := c.Cleanup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() || again.Ops.Total() != 3 {
		t.Errorf("second cleanup: %+v, %v; want nothing found and 3 reads", again.Plan, again.Ops)
	}
}

// TestCleanupKeepsAnRPFilterChangedSinceByHand: a link whose rp_filter an
// administrator set after enipam loosened it keeps the administrator's
// value; the others are restored.
func TestCleanupKeepsAnRPFilterChangedSinceByHand(t *testing.T) {
	h, node := fakeNode(t)
	c := routing.NewConverger(h, routing.DefaultConfig())
	if _, err := c.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	links, _ := h.Links()
	var eth1 routing.Link
	for _, l := range links {
		if l.Name == "eth1" {
			eth1 = l
		}
	}
	h.ChangeRPFilter(eth1.Index, 0) // by hand, after enipam
	res, err := c.Cleanup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.RPFilter {
		if r.Link == "eth1" {
			t.Errorf("eth1 restored (%+v) although it was changed since", r)
		}
	}
	if got, _ := h.Link(eth1.Index); got.RPFilter != 0 {
		t.Errorf("eth1 rp_filter %d after cleanup, want the 0 set by hand", got.RPFilter)
	}
	if len(res.RPFilter) != 2 {
		t.Errorf("restored %+v, want eth0 and eth2", res.RPFilter)
	}
}

// TestCleanupGoesOnPastAFailedDelete: one rule the kernel refuses to
// delete does not stop the cleanup; every other owned rule and route goes,
// the error names the rule, and the next cleanup removes it.
func TestCleanupGoesOnPastAFailedDelete(t *testing.T) {
	h, node := fakeNode(t)
	c := routing.NewConverger(h, routing.DefaultConfig())
	if _, err := c.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	stuck := egress("10.0.2.10", 11)
	refused := errors.New("refused")
	h.Fail = func(op string, obj any) error {
		if op == routing.OpDelRule && obj == stuck {
			return refused
		}
		return nil
	}
	_, err := c.Cleanup(context.Background())
	var opErr *routing.OpError
	if !errors.As(err, &opErr) || opErr.Op != routing.OpDelRule || !errors.Is(err, refused) {
		t.Fatalf("cleanup error %v, want the refused rule delete", err)
	}
	rules, _ := h.Rules()
	routes, _ := h.Routes()
	if diff := cmp.Diff([]routing.Rule{stuck}, rules, netipEqual); diff != "" {
		t.Errorf("rules left (-want +got):\n%s", diff)
	}
	if len(routes) != 0 {
		t.Errorf("routes left: %v", routes)
	}
	h.Fail = nil
	if _, err := c.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rules, _ := h.Rules(); len(rules) != 0 {
		t.Errorf("rules after the second cleanup: %v", rules)
	}
}
