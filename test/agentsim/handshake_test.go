package agentsim_test

import (
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/test/agentsim"
)

// TestReleaseHandshakeAnswersAndMarkedIPsStayUnused: a pool of 6; router,
// health and pod p-0 hold 3. The operator marks p-0's IP (in use), a free
// IP and an IP not in the pool. The agent answers do-not-release,
// ready-for-release and do-not-release. Two more pods take the two free
// IPs left, a third waits: nobody gets the IP being released. The operator
// removes that IP from the pool and sets released; the agent deletes the
// entry. No violation.
func TestReleaseHandshakeAnswersAndMarkedIPsStayUnused(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	addrs := ips("10.6.0.", 6)
	createNode(t, name, ipamtypes.IPAMSpec{}, pool(addrs...))
	sim := startSim(t, agentsim.Options{})
	a := sim.AddAgent(name)
	waitReady(t, a)

	used := allocateNow(t, a, "default/p-0")
	free := freeIPs(a, addrs, "default/p-0")
	releasing, notInPool := free[0], "10.6.1.1"
	setRelease(t, name, map[string]ipamtypes.IPReleaseStatus{
		used:      agentsim.MarkedForRelease,
		releasing: agentsim.MarkedForRelease,
		notInPool: agentsim.MarkedForRelease,
	})
	want := map[string]ipamtypes.IPReleaseStatus{
		used:      agentsim.DoNotRelease,
		releasing: agentsim.ReadyForRelease,
		notInPool: agentsim.DoNotRelease,
	}
	eventually(t, "the agent answers the three markings", func() bool {
		got := getCN(t, name).Status.IPAM.ReleaseIPs
		return len(got) == 3 && got[used] == want[used] && got[releasing] == want[releasing] && got[notInPool] == want[notInPool]
	})

	for _, owner := range []string{"default/p-1", "default/p-2"} {
		if ip := allocateNow(t, a, owner); ip == releasing {
			t.Fatalf("%s got %s, which is ready-for-release", owner, ip)
		}
	}
	waiting := allocateLater(a, "default/p-3")
	if f := a.Figures(); f.PendingWaits != 1 {
		t.Fatalf("p-3: %d pending waits, want 1: the only unused pool IP is being released", f.PendingWaits)
	}

	p := pool(addrs...)
	delete(p, releasing)
	setPool(t, name, p)
	setRelease(t, name, map[string]ipamtypes.IPReleaseStatus{releasing: agentsim.Released})
	eventually(t, "the agent deletes the released entry", func() bool {
		_, ok := getCN(t, name).Status.IPAM.ReleaseIPs[releasing]
		return !ok
	})
	a.Release("default/p-3")
	if r := receive(t, waiting, "p-3's end"); r.Err != agentsim.ErrPodDeleted {
		t.Errorf("p-3 ended with %v (IP %s), want ErrPodDeleted without an IP", r.Err, r.IP)
	}
	noViolations(t, sim)
}

// TestIPsLeavingThePoolOutsideTheHandshakeAreViolations: a pod holds an
// IP, another IP is free. The operator removes both from the pool without
// any handshake: one removed-while-used and one released-without-ready are
// counted, naming the IPs, the first with the pod as owner.
func TestIPsLeavingThePoolOutsideTheHandshakeAreViolations(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	addrs := ips("10.7.0.", 4)
	createNode(t, name, ipamtypes.IPAMSpec{}, pool(addrs...))
	sim := startSim(t, agentsim.Options{})
	a := sim.AddAgent(name)
	waitReady(t, a)

	used := allocateNow(t, a, "default/victim")
	free := freeIPs(a, addrs, "default/victim")[0]
	p := pool(addrs...)
	delete(p, used)
	delete(p, free)
	setPool(t, name, p)

	eventually(t, "both removals are counted", func() bool { return sim.Ledger().Violations().Total() == 2 })
	v := sim.Ledger().Violations()
	if v.RemovedWhileUsed != 1 || v.ReleasedWithoutReady != 1 || v.DoubleAllocation != 0 {
		t.Fatalf("violations %+v, want 1 removed-while-used and 1 released-without-ready", v)
	}
	for _, d := range sim.Ledger().ViolationDetails() {
		switch d.Kind {
		case agentsim.RemovedWhileUsed:
			if d.IP != used || d.Owner != "default/victim" || d.Node != name {
				t.Errorf("removed-while-used names %s, want %s of default/victim on %s", d, used, name)
			}
		case agentsim.ReleasedWithoutReady:
			if d.IP != free {
				t.Errorf("released-without-ready names %s, want %s", d, free)
			}
		}
	}
}

// TestSameIPInUseOnTwoNodesIsADoubleAllocation: two nodes start with their
// own two IPs (router, health). The operator then puts the same IP in both
// pools; a pod on each node gets it. One double allocation is counted,
// naming the first holder.
func TestSameIPInUseOnTwoNodesIsADoubleAllocation(t *testing.T) {
	t.Parallel()
	n1, n2 := nodeName(t, "a"), nodeName(t, "b")
	createNode(t, n1, ipamtypes.IPAMSpec{}, pool(ips("10.8.1.", 2)...))
	createNode(t, n2, ipamtypes.IPAMSpec{}, pool(ips("10.8.2.", 2)...))
	sim := startSim(t, agentsim.Options{})
	a1, a2 := sim.AddAgent(n1), sim.AddAgent(n2)
	waitReady(t, a1)
	waitReady(t, a2)

	const shared = "10.8.0.5"
	for _, n := range []string{n1, n2} {
		updateSpec(t, n, func(cn *ciliumv2.CiliumNode) {
			cn.Spec.IPAM.Pool[shared] = ipamtypes.AllocationIP{Resource: "eni-0test"}
		})
	}
	eventually(t, "both agents see the shared IP", func() bool {
		return a1.Figures().PoolIPs == 3 && a2.Figures().PoolIPs == 3
	})
	if ip := allocateNow(t, a1, "default/one"); ip != shared {
		t.Fatalf("pod on %s got %s, want %s", n1, ip, shared)
	}
	if ip := allocateNow(t, a2, "default/two"); ip != shared {
		t.Fatalf("pod on %s got %s, want %s", n2, ip, shared)
	}
	v := sim.Ledger().Violations()
	if v.DoubleAllocation != 1 || v.Total() != 1 {
		t.Fatalf("violations %+v, want exactly 1 double allocation", v)
	}
	d := sim.Ledger().ViolationDetails()[0]
	if d.IP != shared || d.Node != n2 || d.Other != n1+" default/one" {
		t.Errorf("double allocation names %s, want %s on %s already held by %s default/one", d, shared, n2, n1)
	}
}
