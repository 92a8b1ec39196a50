package operator_test

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestENIBeingAttachedIsNotCollected: an m5.large under first interface
// index 1, so its pool needs a new ENI. EC2 hides a new ENI from describes
// for 3 s and answers NotFound to the calls that change it for 6 s, longer
// than the operator retries an attach in place: the first attach fails
// and is retried by a later reconcile. The collector runs every 300 ms
// with its default minimum age (1 m), so it sees the unattached ENI on
// many passes meanwhile. It must never try to delete it (the ENI is young
// by its tag, and its attach is being retried); the node gets that one
// ENI: one Create, no IdempotentParameterMismatch, nothing left
// unattached, the pool filled.
func TestENIBeingAttachedIsNotCollected(t *testing.T) {
	r := newRig(t, vpcScenario)
	timing := r.sim.State().Timing()
	timing.EventualConsistency = ec2sim.Duration(3 * time.Second)
	timing.MutationConsistency = ec2sim.Duration(6 * time.Second)
	if err := r.sim.State().SetTiming(timing); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Create(r.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	opts := r.options()
	opts.GCInterval = 300 * time.Millisecond
	r.startOperator(opts)
	r.addNode("node-race", "i-0a000000000000001", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{})

	// Until the pool is filled, or the stall shows: a create refused for
	// its reused token.
	mismatch := func() int64 {
		return r.sim.Counters().ErrorCount("CreateNetworkInterface", "IdempotentParameterMismatch")
	}
	filled := false
	_ = wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		cn := r.node("node-race")
		filled = freeIPs(cn) >= 8 && cn.Status.IPAM.OperatorStatus.Error == ""
		return filled || mismatch() > 0, nil
	})

	c := r.sim.Counters()
	if n := c.Calls["DeleteNetworkInterface"]; n != 0 {
		t.Errorf("DeleteNetworkInterface called %d times (%v), want 0: the collector took the ENI being attached for a leak", n, c.Errors["DeleteNetworkInterface"])
	}
	if n := mismatch(); n != 0 {
		t.Errorf("CreateNetworkInterface answered IdempotentParameterMismatch %d times, want 0: a replacement create reused a client token", n)
	}
	if n := c.Succeeded("CreateNetworkInterface"); n != 1 {
		t.Errorf("%d ENIs created, want 1", n)
	}
	if c.ErrorCount("AttachNetworkInterface", "InvalidNetworkInterfaceID.NotFound") == 0 {
		t.Error("no attach was refused as NotFound: the test exercised no retried attach")
	}
	attached, orphans := r.enisOf("i-0a000000000000001")
	if len(attached) != 2 || len(orphans) != 0 {
		t.Errorf("%d ENIs attached, %d unattached; want the primary and the new one, no orphan", len(attached), len(orphans))
	}
	if !filled {
		cn := r.node("node-race")
		t.Errorf("node left short: %d free addresses, want 8; operator-status %q", freeIPs(cn), cn.Status.IPAM.OperatorStatus.Error)
	}
}
