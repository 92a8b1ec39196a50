package schedtest_test

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestAStaticPodWithNoEligibleNodeStaysPendingAndSaysWhy: the real
// kube-scheduler with the chart's configuration. db-0's claim holds
// 10.1.64.9 in a subnet of us-east-1b (as enipam-operator records it);
// the cluster's nodes are in us-east-1a, one of them with room. The pod
// stays Pending and its FailedScheduling event names the address, its
// subnet and zone for every node; nothing is bound and the claim is not
// asked for a node.
func TestAStaticPodWithNoEligibleNodeStaysPendingAndSaysWhy(t *testing.T) {
	w := newWorld(t, "zone")
	zoneA := func(free int32) *enipamv1alpha1.NodeCapacity {
		return &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 10, CanGrow: true, AvailabilityZone: "us-east-1a", FreeENISlots: 1,
			SubnetSlots: []enipamv1alpha1.SubnetSlots{{SubnetID: "subnet-a", Free: free}}}
	}
	w.node("a1", pool{used: 2, free: 8, capacity: zoneA(5)})
	w.node("a2", pool{used: 2, free: 8, capacity: zoneA(0)})
	w.seenByExtender(map[string]int64{"a1": 10, "a2": 10})
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "db-0"},
		Spec: enipamv1alpha1.StaticIPClaimSpec{Address: "10.1.64.9", ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
	w.create(claim)
	claim.Status = enipamv1alpha1.StaticIPClaimStatus{Address: "10.1.64.9", SubnetID: "subnet-b", AvailabilityZone: "us-east-1b",
		Phase: enipamv1alpha1.ClaimPending, ObservedGeneration: claim.Generation}
	if err := env.Client.Status().Update(bg, claim); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the extender's claim watch

	w.pods("db", 1, nil)
	w.eventually("db-0's FailedScheduling", time.Minute, func() bool { return w.failedScheduling("db-0") != "" })
	msg := w.failedScheduling("db-0")
	if want := "2 static IP 10.1.64.9 lives in subnet-b, us-east-1b"; !strings.Contains(msg, want) {
		t.Errorf("FailedScheduling %q lacks %q", msg, want)
	}
	if n := w.boundTo("db-0"); n != "" {
		t.Errorf("db-0 bound to %s", n)
	}
	got := &enipamv1alpha1.StaticIPClaim{}
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: w.ns, Name: "db-0"}, got); err != nil || got.Spec.NodeName != "" {
		t.Errorf("claim asked for %q (%v)", got.Spec.NodeName, err)
	}
	t.Logf("event: %s", msg)
}

// TestAClaimNotPlacedYetIsBoundOnTheNodeItAsksFor: the real
// kube-scheduler with the chart's configuration. db-0's claim has no
// address yet and asks for node target (spec.nodeName, as a bind that
// timed out left it); enipam-operator marked target's one entry not in
// use for it and waits for Cilium's agent to answer. Neither node can
// grow, and the other is full: for any pod target has no free address,
// for db-0 it has the entry marked for it. Filter passes target (the
// extender holds the pod against it) and the bind waits there; once the
// entry is stamped for db-0 and its ENI holds it, db-0 is bound to target.
func TestAClaimNotPlacedYetIsBoundOnTheNodeItAsksFor(t *testing.T) {
	w, ip, claim := firstPlacementWorld(t, "first", 1)
	version := claim.ResourceVersion

	w.pods("db", 1, nil)
	w.heldOnce("db-0")
	if n := w.boundTo("db-0"); n != "" {
		t.Fatalf("db-0 bound to %s before its entry was stamped", n)
	}
	w.stamp("target", ip, "db-0")
	w.eventually("db-0 bound to target", time.Minute, func() bool { return w.boundTo("db-0") == "target" })
	if msg := w.failedScheduling("db-0"); msg != "" {
		t.Errorf("db-0 refused on its way: %s", msg)
	}
	// The bind asked the claim for target again (its cache may lag): a
	// write that changed nothing, so no new version for the claim's
	// watchers.
	got := &enipamv1alpha1.StaticIPClaim{}
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(claim), got); err != nil || got.ResourceVersion != version || got.Spec.NodeName != w.nodeName("target") {
		t.Errorf("claim at version %s asking for %q (%v), want version %s unchanged", got.ResourceVersion, got.Spec.NodeName, err, version)
	}
}

// TestAFirstPlacementWaitingOnItsTargetLeavesTheFreeAddressesToOthers:
// the real kube-scheduler with the chart's configuration. db-0's claim
// has no address yet and asks for node target, where enipam-operator
// marked one of two entries not in use for it; neither node can grow and
// the other is full. db-0 passes on target (the marked entry) and its
// bind waits there for the stamp; meanwhile pod web-0 comes. db-0 takes
// the marked entry, not the free one, so web-0 is bound to target too
// (before, db-0's hold counted against target's free address, and web-0
// was refused 'no free IP' while db-0's bind waited). db-0 is bound once
// its entry is stamped.
func TestAFirstPlacementWaitingOnItsTargetLeavesTheFreeAddressesToOthers(t *testing.T) {
	w, ip, _ := firstPlacementWorld(t, "ownhold", 2)

	w.pods("db", 1, nil)
	w.heldOnce("db-0")
	w.pods("web", 1, nil)
	w.eventually("web-0 bound", time.Minute, func() bool { return w.boundTo("web-0") != "" || w.failedScheduling("web-0") != "" })
	if n, msg := w.boundTo("web-0"), w.failedScheduling("web-0"); n != "target" || msg != "" {
		t.Fatalf("web-0 bound to %q, refused %q; want bound to target", n, msg)
	}
	if n := w.boundTo("db-0"); n != "" {
		t.Fatalf("db-0 bound to %s before its entry was stamped", n)
	}
	w.stamp("target", ip, "db-0")
	w.eventually("db-0 bound to target", time.Minute, func() bool { return w.boundTo("db-0") == "target" })
}

// firstPlacementWorld has two nodes of ten addresses at their
// instance's capacity: full, all used, and target, with free entries not
// in use, one of them marked for release (returned) as enipam-operator
// marks an entry for a claim's first placement; and db-0's claim, with
// no address yet, asking for target (as a bind that timed out leaves
// it), checked by the operator (phase Placing).
func firstPlacementWorld(t *testing.T, name string, free int) (*world, string, *enipamv1alpha1.StaticIPClaim) {
	t.Helper()
	w := newWorld(t, name)
	cannotGrow := func() *enipamv1alpha1.NodeCapacity {
		return &enipamv1alpha1.NodeCapacity{MaxIPs: 10, PoolIPs: 10, AvailabilityZone: "us-east-1a", Reason: "instance at capacity"}
	}
	w.node("target", pool{used: 10 - free, free: free, capacity: cannotGrow()})
	w.node("full", pool{used: 10, capacity: cannotGrow()})
	w.seenByExtender(map[string]int64{"target": 10, "full": 0})
	ip := w.freeIP("target")
	w.cilium("target", func(cn *ciliumv2.CiliumNode) {
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{ip: ipamoption.IPAMMarkForRelease}
	}, func(*ciliumv2.CiliumNode) {})
	score := int64(0)
	if free > 1 {
		score = 10
	}
	w.seenByExtender(map[string]int64{"target": score, "full": 0})

	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "db-0"},
		Spec: enipamv1alpha1.StaticIPClaimSpec{NodeName: w.nodeName("target"), ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
	w.create(claim)
	claim.Status = enipamv1alpha1.StaticIPClaimStatus{Phase: enipamv1alpha1.ClaimPlacing, ObservedGeneration: claim.Generation}
	if err := env.Client.Status().Update(bg, claim); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the extender's claim watch
	return w, ip, claim
}

// heldOnce waits until the extender holds one pod (filter passed it).
func (w *world) heldOnce(pod string) {
	w.t.Helper()
	w.eventually("the extender to hold "+pod, time.Minute, func() bool {
		resp, err := http.Get(w.sched.MetricsURL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "\nenipam_scheduler_holds 1\n")
	})
}

// stamp settles the marked entry ip for pod, as the operator does once
// Cilium's agent answers: out of the handshake, on its ENI, its owner
// the pod.
func (w *world) stamp(short, ip, pod string) {
	w.t.Helper()
	w.cilium(short, func(cn *ciliumv2.CiliumNode) {
		delete(cn.Status.IPAM.ReleaseIPs, ip)
		cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1", Addresses: []ciliumip.Addr{ciliumip.AddrFrom(netip.MustParseAddr(ip))}}}
	}, func(cn *ciliumv2.CiliumNode) {
		e := cn.Spec.IPAM.Pool[ip]
		e.Owner = w.ns + "/" + pod
		cn.Spec.IPAM.Pool[ip] = e
	})
}
