package agentsim_test

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/agentsim"
)

// TestAgentStartsOnlyOnceItsInitialIPsAreInThePool: pre-allocate 4, the
// operator first puts 3 IPs in the pool. The agent does not start: no
// router or health IP, nothing written, a pod asking for an IP waits. With
// the 4th IP it starts: router and health get IPs, the pod gets one (its
// wait counted), and status.ipam.used shows all three. The figures order
// the moments: added, pool of 3, pool of 4, ready.
func TestAgentStartsOnlyOnceItsInitialIPsAreInThePool(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	addrs := ips("10.1.0.", 4)
	createNode(t, name, ipamtypes.IPAMSpec{PreAllocate: 4}, pool(addrs[:3]...))
	sim := startSim(t, agentsim.Options{})
	a := sim.AddAgent(name)

	eventually(t, "the agent sees 3 pool IPs", func() bool { return a.Figures().PoolIPs == 3 })
	pod := allocateLater(a, "default/early")
	if f := a.Figures(); f.Ready || f.PendingWaits != 1 || f.UsedIPs != 0 || f.Writes != 0 {
		t.Fatalf("with 3 of 4 initial IPs: ready=%v pending=%d used=%d writes=%d, want not ready, 1 pending, nothing used or written", f.Ready, f.PendingWaits, f.UsedIPs, f.Writes)
	}

	setPool(t, name, pool(addrs...))
	waitReady(t, a)
	r := receive(t, pod, "the early pod's IP")
	if r.Err != nil || r.Waited <= 0 {
		t.Fatalf("early pod: %+v, want an IP after a wait", r)
	}
	router, _ := a.IP(agentsim.RouterOwner)
	health, _ := a.IP(agentsim.HealthOwner)
	want := map[string]string{router.String(): "router", health.String(): "health", r.IP.String(): "default/early"}
	if len(want) != 3 {
		t.Fatalf("router %s, health %s and pod %s must differ", router, health, r.IP)
	}
	eventually(t, "status.ipam.used shows router, health and the pod", usedIs(t, name, want))
	if w := sim.Ledger().Waits(); w.Count != 1 || w.Satisfied != 1 {
		t.Errorf("waits %+v, want 1 satisfied", w)
	}
	at3, ok3 := a.PoolReachedAt(3)
	at4, ok4 := a.PoolReachedAt(4)
	_, ok5 := a.PoolReachedAt(5)
	f := a.Figures()
	if !ok3 || !ok4 || ok5 || at4.Before(at3) || f.ReadyAt.Before(at4) || f.AddedAt.After(at3) {
		t.Errorf("pool reached 3 at %v (%v), 4 at %v (%v), 5: %v; added %v, ready %v: want added <= 3 <= 4 <= ready, never 5",
			at3, ok3, at4, ok4, ok5, f.AddedAt, f.ReadyAt)
	}
	noViolations(t, sim)
}

// TestPodsGetDistinctFreePoolIPs: a pool of 6 on one ENI. Router and
// health take 2; 4 pods get the other 4, each a different pool IP, none
// waits, and status.ipam.used records every owner with the ENI as resource.
func TestPodsGetDistinctFreePoolIPs(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	addrs := ips("10.2.0.", 6)
	createNode(t, name, ipamtypes.IPAMSpec{}, pool(addrs...))
	sim := startSim(t, agentsim.Options{})
	a := sim.AddAgent(name)
	waitReady(t, a)

	router, _ := a.IP(agentsim.RouterOwner)
	health, _ := a.IP(agentsim.HealthOwner)
	want := map[string]string{router.String(): "router", health.String(): "health"}
	for _, owner := range []string{"default/a", "default/b", "default/c", "default/d"} {
		ip := allocateNow(t, a, owner)
		if _, dup := want[ip]; dup {
			t.Fatalf("%s got %s, already held by %s", owner, ip, want[ip])
		}
		want[ip] = owner
	}
	for ip := range want {
		if _, ok := pool(addrs...)[ip]; !ok {
			t.Errorf("%s handed out %s, not in the pool", want[ip], ip)
		}
	}
	eventually(t, "status.ipam.used records all 6 owners", usedIs(t, name, want))
	for ip, e := range getCN(t, name).Status.IPAM.Used {
		if e.Resource != "eni-0test" {
			t.Errorf("used %s has resource %q, want the pool entry's eni-0test", ip, e.Resource)
		}
	}
	if f := sim.Figures(); f.Allocations != 4 || f.Waits.Count != 0 || f.Waits.Pending != 0 {
		t.Errorf("figures: %d allocations, waits %+v; want 4 allocations and no wait", f.Allocations, f.Waits)
	}
	noViolations(t, sim)
}

// TestPodGetsItsOwnerMatchedStaticIP: the pool holds 6 free IPs and one
// reserved for default/db-0 (owner set on the pool entry, as for a static
// IP). Four other pods take the 4 free IPs left after router and health; a
// fifth other pod waits rather than take the reserved IP, and default/db-0
// gets exactly its reserved IP at once.
func TestPodGetsItsOwnerMatchedStaticIP(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	p := pool(ips("10.3.0.", 6)...)
	const static = "10.3.0.99"
	p[static] = ipamtypes.AllocationIP{Owner: "default/db-0", Resource: "eni-0test"}
	createNode(t, name, ipamtypes.IPAMSpec{}, p)
	sim := startSim(t, agentsim.Options{})
	a := sim.AddAgent(name)
	waitReady(t, a)

	for _, owner := range []string{"default/web-0", "default/web-1", "default/web-2", "default/web-3"} {
		if ip := allocateNow(t, a, owner); ip == static {
			t.Fatalf("%s got the IP reserved for default/db-0", owner)
		}
	}
	late := allocateLater(a, "default/web-4")
	if f := a.Figures(); f.PendingWaits != 1 {
		t.Fatalf("web-4: %d pending waits, want 1 (the reserved IP is not for it)", f.PendingWaits)
	}
	if ip := allocateNow(t, a, "default/db-0"); ip != static {
		t.Errorf("default/db-0 got %s, want its reserved %s", ip, static)
	}
	a.Release("default/web-4")
	if r := receive(t, late, "web-4's end"); r.Err != agentsim.ErrPodDeleted {
		t.Errorf("web-4 ended with %v, want ErrPodDeleted", r.Err)
	}
	noViolations(t, sim)
}

// TestAStampedEntryGoesToItsOwnerWhateverItsState: Cilium's
// nodeStore.allocateNext (pkg/ipam/crd.go) hands the entry whose owner
// matches to that owner before looking at the handshake or at who holds
// it. A stamped entry marked for release still goes to its owner; an entry
// stamped while another pod holds it goes to its owner too, and the ledger
// counts the double allocation that an operator doing so would cause.
func TestAStampedEntryGoesToItsOwnerWhateverItsState(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "stamped")
	p := pool(ips("10.3.1.", 4)...)
	const leaving = "10.3.1.99"
	p[leaving] = ipamtypes.AllocationIP{Owner: "default/db-0", Resource: "eni-0test"}
	createNode(t, name, ipamtypes.IPAMSpec{}, p)
	setRelease(t, name, map[string]ipamtypes.IPReleaseStatus{leaving: agentsim.MarkedForRelease})
	sim := startSim(t, agentsim.Options{})
	a := sim.AddAgent(name)
	waitReady(t, a)
	eventually(t, "the agent answers the mark", func() bool {
		return getCN(t, name).Status.IPAM.ReleaseIPs[leaving] == agentsim.ReadyForRelease
	})
	if ip := allocateNow(t, a, "default/db-0"); ip != leaving {
		t.Errorf("default/db-0 got %s, want its stamped %s even in the handshake", ip, leaving)
	}
	noViolations(t, sim)

	taken := allocateNow(t, a, "default/web-0")
	updateSpec(t, name, func(cn *ciliumv2.CiliumNode) {
		cn.Spec.IPAM.Pool[taken] = ipamtypes.AllocationIP{Owner: "default/db-1", Resource: "eni-0test"}
	})
	eventually(t, "the agent sees the stamp", func() bool {
		select {
		case got := <-allocateLater(a, "default/db-1"):
			if got.Err == nil && got.IP.String() == taken {
				return true
			}
		default:
		}
		a.Release("default/db-1") // a free IP, or a wait: not the stamp yet
		return false
	})
	if v := sim.Ledger().Violations(); v.DoubleAllocation != 1 || v.Total() != 1 {
		t.Errorf("violations %+v, want exactly the double allocation of %s", v, taken)
	}
}

// TestPodWaitsOnAnEmptyPoolUntilItGrows: the pool holds only the router
// and health IPs. A pod waits; the wait shows as pending. The operator adds
// one IP: the pod gets it, and one satisfied wait is recorded with its
// duration.
func TestPodWaitsOnAnEmptyPoolUntilItGrows(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	addrs := ips("10.4.0.", 3)
	createNode(t, name, ipamtypes.IPAMSpec{}, pool(addrs[:2]...))
	sim := startSim(t, agentsim.Options{})
	a := sim.AddAgent(name)
	waitReady(t, a)

	ch := allocateLater(a, "default/late")
	if f := sim.Figures(); f.Waits.Pending != 1 || f.Waits.Count != 0 {
		t.Fatalf("waits %+v, want 1 pending, none finished", f.Waits)
	}
	setPool(t, name, pool(addrs...))
	r := receive(t, ch, "the IP for the waiting pod")
	if r.Err != nil || r.IP.String() != addrs[2] || r.Waited <= 0 {
		t.Fatalf("waiting pod: %+v, want %s after a wait", r, addrs[2])
	}
	w := sim.Figures().Waits
	if w.Count != 1 || w.Satisfied != 1 || w.Pending != 0 || w.Max != r.Waited {
		t.Errorf("waits %+v, want 1 satisfied lasting %v", w, r.Waited)
	}
	if f := a.Figures(); f.Waits != 1 || f.WaitMax != r.Waited {
		t.Errorf("node figures: %d waits, max %v; want 1, %v", f.Waits, f.WaitMax, r.Waited)
	}
	noViolations(t, sim)
}

// TestPodWaitEndsOnTimeoutOrDeletion: with an allocate timeout of 50 ms and
// a pool holding only router and health, one pod's wait times out
// (ErrTimeout) and another pod, deleted while waiting, ends with
// ErrPodDeleted; both waits are recorded with their outcome.
func TestPodWaitEndsOnTimeoutOrDeletion(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	createNode(t, name, ipamtypes.IPAMSpec{}, pool(ips("10.5.0.", 2)...))
	sim := startSim(t, agentsim.Options{AllocateTimeout: 50 * time.Millisecond})
	a := sim.AddAgent(name)
	waitReady(t, a)

	timedOut := allocateLater(a, "default/slow")
	if r := receive(t, timedOut, "the timeout"); r.Err != agentsim.ErrTimeout {
		t.Errorf("slow pod ended with %v, want ErrTimeout", r.Err)
	}
	deleted := allocateLater(a, "default/gone")
	if !a.Release("default/gone") {
		t.Fatal("release of a waiting pod reported nothing to release")
	}
	if r := receive(t, deleted, "the deletion"); r.Err != agentsim.ErrPodDeleted {
		t.Errorf("deleted pod ended with %v, want ErrPodDeleted", r.Err)
	}
	if w := sim.Ledger().Waits(); w.Count != 2 || w.TimedOut != 1 || w.Abandoned != 1 {
		t.Errorf("waits %+v, want 1 timed out and 1 abandoned", w)
	}
}

// TestAgentWaitsForItsStaticIP: an agent started with ipam-static-ip-tags
// (its CiliumNode's spec.ipam.static-ip-tags) does not start on a full
// pool until an operator reports status.ipam.assigned-static-ip, as
// Cilium's crd allocator waits (pkg/ipam/crd.go, newNodeStore).
func TestAgentWaitsForItsStaticIP(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	createNode(t, name, ipamtypes.IPAMSpec{StaticIPTags: map[string]string{"cilium/static": "egress"}}, pool(ips("10.5.0.", 6)...))
	sim := startSim(t, agentsim.Options{})
	a := sim.AddAgent(name)
	time.Sleep(300 * time.Millisecond) // several update intervals
	if a.Ready() {
		t.Fatal("the agent started without its static IP")
	}
	cn := getCN(t, name)
	orig := cn.DeepCopy()
	cn.Status.IPAM.AssignedStaticIP = "198.51.100.7"
	if err := env.Client.Status().Patch(context.Background(), cn, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	waitReady(t, a)
	noViolations(t, sim)
}
