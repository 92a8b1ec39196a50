package staticsim

import (
	"context"
	"strings"
	"testing"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestNodeEIPReleaseAfterLaggingDescribe: an operator killed as its
// AssociateAddress lands (the record written before it, the answer lost)
// is followed by one whose describes do not show the association yet;
// the node stops asking for a static IP at once. The release must not
// take the lagging describe for "nothing to undo" and drop the record:
// the address would stay on the node's primary address with nothing
// left to find it.
func TestNodeEIPReleaseAfterLaggingDescribe(t *testing.T) {
	w, setTags := laggingEIPWorld(t)
	// The pool settles first, no static IP asked for: the NodeRouting
	// exists, the primary ENI is in the operator's view.
	setTags(nil)
	for range 3 {
		w.reconcileNode("node-1")
		w.afterStep()
	}
	setTags(map[string]string{tagKey: "z"})
	// Killed at its second Elastic IP write from now: the record's
	// apply, then the AssociateAddress, which lands.
	w.op.eipCrashAt, w.op.landed = 2, true
	w.reconcileNode("node-1")
	w.afterStep()
	if w.eipAssociations != 0 || w.eipKills != 1 {
		t.Fatalf("want the process killed at its AssociateAddress: %d associations answered, %d kills; trace:\n%s", w.eipAssociations, w.eipKills, strings.Join(w.trace, "\n"))
	}
	setTags(nil)
	w.reconcileNode("node-1")
	w.afterStep()
	for round := range 10 {
		w.clock.Advance(3_000_000_000)
		w.round(DefaultConfig(), round)
	}
	if len(w.violations) > 0 {
		t.Fatalf("violations %q; trace:\n%s", w.violations[:min(3, len(w.violations))], strings.Join(w.trace, "\n"))
	}
	if out := w.nodeEIPsAtRest(w.snapshot()); len(out) > 0 {
		t.Fatalf("not at rest: %q; trace:\n%s", out, strings.Join(w.trace, "\n"))
	}
	if w.eipDisassociations != 1 {
		t.Fatalf("%d disassociations by the operator, want 1; trace:\n%s", w.eipDisassociations, strings.Join(w.trace, "\n"))
	}
}

// TestNodeEIPReportAfterLaggingDescribe: an operator killed as its
// DisassociateAddress lands (the node had stopped asking for its static
// IP; the record still stands) is followed by one whose describes still
// show the association, and the node asks for the same tags again at
// once. The new process must not report the address in
// assigned-static-ip on that describe's word: Cilium's agent takes the
// report for the node's static IP while EC2 has it nowhere.
func TestNodeEIPReportAfterLaggingDescribe(t *testing.T) {
	w, setTags := laggingEIPWorld(t)
	setTags(nil)
	for range 3 {
		w.reconcileNode("node-1")
		w.afterStep()
	}
	setTags(map[string]string{tagKey: "z"})
	// Associated and reported, the describes caught up.
	for range 5 {
		w.clock.Advance(5_000_000_000)
		w.reconcileNode("node-1")
		w.afterStep()
	}
	cn := &ciliumv2.CiliumNode{}
	w.store.get(client.ObjectKey{Name: "node-1"}, cn)
	if cn.Status.IPAM.AssignedStaticIP == "" || w.eipAssociations != 1 {
		t.Fatalf("want node-1's Elastic IP associated once and reported: %d associations, reported %q; trace:\n%s", w.eipAssociations, cn.Status.IPAM.AssignedStaticIP, strings.Join(w.trace, "\n"))
	}
	setTags(nil)
	// Killed at its first Elastic IP write from now: the
	// DisassociateAddress, which lands.
	w.op.eipCrashAt, w.op.landed = 1, true
	w.reconcileNode("node-1")
	w.afterStep()
	if w.eipKills != 1 || len(w.violations) > 0 {
		t.Fatalf("want the process killed at its DisassociateAddress: %d kills, violations %q; trace:\n%s", w.eipKills, w.violations, strings.Join(w.trace, "\n"))
	}
	setTags(map[string]string{tagKey: "z"})
	for range 3 {
		w.reconcileNode("node-1")
		w.afterStep()
	}
	for round := range 10 {
		w.clock.Advance(3_000_000_000)
		w.round(DefaultConfig(), round)
	}
	if len(w.violations) > 0 {
		t.Fatalf("violations %q; trace:\n%s", w.violations[:min(3, len(w.violations))], strings.Join(w.trace, "\n"))
	}
	if out := w.nodeEIPsAtRest(w.snapshot()); len(out) > 0 {
		t.Fatalf("not at rest: %q; trace:\n%s", out, strings.Join(w.trace, "\n"))
	}
}

// laggingEIPWorld is a world with no timing drawn (seed 4) whose EC2
// lags describes 1–3 s after each change, holding one free Elastic IP
// tagged tagKey=z, and a setTags that writes node-1's static-ip-tags
// as Cilium's nodediscovery does.
func laggingEIPWorld(t *testing.T) (*world, func(map[string]string)) {
	t.Helper()
	w, err := newWorld(4) // seed%4 == 0: no timing yet
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	timing := ec2sim.RealisticTiming()
	timing.MutationConsistency = 0
	timing.Lag.Share = 0
	if err := w.state.SetTiming(timing); err != nil {
		t.Fatal(err)
	}
	if _, err := w.state.AllocateAddress(ec2sim.AllocateAddressRequest{TagSpecifications: []ec2sim.TagSpecification{{
		ResourceType: "elastic-ip", Tags: []ec2sim.Tag{{Key: tagKey, Value: "z"}}}}}); err != nil {
		t.Fatal(err)
	}
	setTags := func(tags map[string]string) {
		cn := &ciliumv2.CiliumNode{}
		if !w.store.get(client.ObjectKey{Name: "node-1"}, cn) {
			t.Fatal("no CiliumNode node-1")
		}
		cn.Spec.IPAM.StaticIPTags = tags
		if err := w.c.Update(context.Background(), cn); err != nil {
			t.Fatal(err)
		}
	}
	return w, setTags
}
