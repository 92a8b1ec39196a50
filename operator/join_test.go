package operator_test

import (
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

// TestJoiningNodeOfTwoENIsWrittenOnce: m5.large (9 secondaries per ENI)
// under a policy with first interface index 1, default pre-allocate 8
// plus Cilium's 2 endpoint addresses (the agent takes them once the pool
// appears): the node's whole need takes two new ENIs. Both are created
// in its first reconcile, its NodeRouting lists them for the agent, and
// its pool takes all 10 addresses in one write once both are routed: 1
// spec write and no status write during the join, 2 Creates, never a
// pool that lists one ENI alone; and no status write after it either,
// over two resync intervals: status.eni.enis gets no copy of the ENIs,
// which nothing reads.
func TestJoiningNodeOfTwoENIsWrittenOnce(t *testing.T) {
	r := newRig(t, vpcScenario)
	if err := r.c.Create(r.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	_, reg, _ := r.startOperator(r.options())
	r.addNode("node-m5", "i-0a000000000000001", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{})

	// Every pool the node shows holds addresses of both ENIs or none.
	seen := map[int]bool{}
	watch := func(cn *ciliumv2.CiliumNode) {
		enis := map[string]bool{}
		for _, e := range cn.Spec.IPAM.Pool {
			enis[e.Resource] = true
		}
		seen[len(enis)] = true
	}
	r.waitNode("node-m5", 30*time.Second, "a pool", func(cn *ciliumv2.CiliumNode) bool {
		watch(cn)
		return len(cn.Spec.IPAM.Pool) > 0
	})
	// Cilium's agent takes its router and health addresses.
	r.use("node-m5", 2)
	cn := r.waitNode("node-m5", 30*time.Second, "8 free of 10", func(cn *ciliumv2.CiliumNode) bool {
		watch(cn)
		return len(cn.Spec.IPAM.Pool) >= 10 && freeIPs(cn) >= 8
	})
	// Let any stray follow-up reconcile happen before counting.
	time.Sleep(time.Second)
	if seen[1] {
		t.Errorf("a pool listed one ENI's addresses alone; want both ENIs' in one write")
	}
	pooled := map[string]bool{}
	for _, e := range cn.Spec.IPAM.Pool {
		pooled[e.Resource] = true
	}
	if n := len(r.routing("node-m5").Spec.ENIs); len(cn.Spec.IPAM.Pool) != 10 || len(pooled) != 2 || n != 3 {
		t.Errorf("pool %d addresses on %d ENIs, NodeRouting lists %d ENIs; want 10 on 2 new ENIs, listed with the primary",
			len(cn.Spec.IPAM.Pool), len(pooled), n)
	}
	for action, want := range map[string]int64{"CreateNetworkInterface": 2, "AttachNetworkInterface": 2} {
		if got := r.calls(action); got != want {
			t.Errorf("%s calls = %d, want %d", action, got, want)
		}
	}
	status := labelledCounter(t, reg, "enipam_ciliumnode_writes_total", "part", "status")
	spec := labelledCounter(t, reg, "enipam_ciliumnode_writes_total", "part", "spec")
	if status != 0 || spec != 1 {
		t.Errorf("CiliumNode writes during the join: %v status, %v spec; want 0 and 1", status, spec)
	}
	// The node's looks of two resync intervals (5 s each) write nothing.
	time.Sleep(11 * time.Second)
	status = labelledCounter(t, reg, "enipam_ciliumnode_writes_total", "part", "status")
	spec = labelledCounter(t, reg, "enipam_ciliumnode_writes_total", "part", "spec")
	if status != 0 || spec != 1 {
		t.Errorf("CiliumNode writes after the join: %v status, %v spec; want 0 and 1", status, spec)
	}
	if n := len(r.node("node-m5").Status.ENI.ENIs); n != 0 {
		t.Errorf("status.eni.enis lists %d ENIs, want none", n)
	}
	if msg := r.node("node-m5").Status.IPAM.OperatorStatus.Error; msg != "" {
		t.Errorf("operator-status: %q", msg)
	}
}
