package poolcontroller

import (
	"context"
	"maps"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestENICopyClearedOnceTheAgentRoutesSpecENIs: an m5.large node whose
// ENIs an earlier release copied into status.eni.enis (its operator
// wrote no spec.enis) and whose agent was upgraded (it says
// routesSpecENIs). The new operator lists the ENIs in spec.enis and
// keeps the copy while the agent has not reported the generation that
// lists them; once it has, one status write clears the copy, counted
// by enipam_ciliumnode_eni_copies_total, and nothing more is written.
// The ENIs the agent routes (the union of both lists) never lose one.
func TestENICopyClearedOnceTheAgentRoutesSpecENIs(t *testing.T) {
	j := newJoinRig(t)
	// The earlier release: an agent that routes status.eni.enis alone
	// gets the copy at once.
	j.attach(1)
	j.attach(2)
	j.reconcile()
	j.attached("eni-1")
	j.attached("eni-2")
	j.report(false, false)
	j.reconcile()
	j.report(false, false)
	j.reconcile()
	all := []string{"eni-0", "eni-1", "eni-2"}
	if got := slices.Sorted(maps.Keys(j.node().Status.ENI.ENIs)); !slices.Equal(got, all) {
		t.Fatalf("status.eni.enis %v before the upgrade, want %v", got, all)
	}
	// An earlier operator's NodeRouting: no spec.enis; the upgraded
	// agent reports routing spec.enis at its generation.
	nr := j.routing()
	nr.Spec.ENIs = nil
	nr.Generation++
	if err := j.c.Update(context.Background(), nr); err != nil {
		t.Fatal(err)
	}
	j.report(true, true)
	j.restart()
	j.status, j.spec = 0, 0

	// routed is what the agent routes: every ENI either list names.
	routed := func(step string) {
		t.Helper()
		ids := map[string]bool{}
		for id := range j.node().Status.ENI.ENIs {
			ids[id] = true
		}
		for _, e := range j.routing().Spec.ENIs {
			ids[e.ID] = true
		}
		if got := slices.Sorted(maps.Keys(ids)); !slices.Equal(got, all) {
			t.Fatalf("%s: the agent routes %v, want %v", step, got, all)
		}
	}
	copyOf := func() []string { return slices.Sorted(maps.Keys(j.node().Status.ENI.ENIs)) }
	routed("before the new operator")
	j.reconcile()
	routed("spec.enis written")
	if got := specIDs(j.routing()); !slices.Equal(got, all) || !slices.Equal(copyOf(), all) || j.status != 0 {
		t.Fatalf("spec.enis %v, status.eni.enis %v, %d status writes; want %v in both, no status write", got, copyOf(), j.status, all)
	}
	j.reconcile()
	routed("the agent's report not in yet")
	if !slices.Equal(copyOf(), all) || j.status != 0 {
		t.Fatalf("status.eni.enis %v, %d status writes before the agent reported spec.enis' generation; want %v kept, none", copyOf(), j.status, all)
	}

	j.report(true, true)
	j.reconcile()
	routed("the copy cleared")
	if got := copyOf(); len(got) != 0 || j.status != 1 {
		t.Fatalf("status.eni.enis %v after %d status writes, want it cleared by one", got, j.status)
	}
	var copies dto.Metric
	if err := j.r.metrics.eniCopies.Write(&copies); err != nil || copies.GetCounter().GetValue() != 1 {
		t.Errorf("enipam_ciliumnode_eni_copies_total %v, want 1: the clear", copies.GetCounter().GetValue())
	}
	j.reconcile()
	if j.status != 1 {
		t.Errorf("%d status writes in all, want the clear alone", j.status)
	}
}
