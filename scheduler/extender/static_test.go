package extender

import (
	"context"
	"fmt"
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
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/room"
)

// zoneA is a node of us-east-1a whose ENIs have two free slots in
// subnet-a; full has none and no ENI slot; other is in us-east-1b.
func staticCluster() *fakeState {
	capA := func(slots, eniSlots int32) *enipamv1alpha1.NodeCapacity {
		return &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 27, AvailabilityZone: "us-east-1a", FreeENISlots: eniSlots,
			SubnetSlots: []enipamv1alpha1.SubnetSlots{{SubnetID: "subnet-a", Free: slots}}}
	}
	s := newFakeState(
		room.Node{Name: "holder", Pool: &room.Pool{Size: 10, Stamped: map[string]string{"web/db-0": "10.0.16.9"}}, Capacity: capA(0, 0)},
		room.Node{Name: "roomy", Pool: &room.Pool{Size: 10}, Capacity: capA(2, 0)},
		room.Node{Name: "eni-slot", Pool: &room.Pool{Size: 10}, Capacity: capA(0, 1)},
		room.Node{Name: "full", Pool: &room.Pool{Size: 27}, Capacity: capA(0, 0)},
		room.Node{Name: "other", Pool: &room.Pool{Size: 10, Free: 5}, Capacity: &enipamv1alpha1.NodeCapacity{AvailabilityZone: "us-east-1b", FreeENISlots: 2}},
	)
	s.claims["web/db-0"] = room.Claim{Address: "10.0.16.9", Subnet: "subnet-a", Zone: "us-east-1a", Holder: "holder", Checked: true}
	return s
}

// TestAStaticPodGoesWhereItsAddressCanLive: the pod of claim db-0
// (10.0.16.9 in subnet-a, us-east-1a) passes on the node holding it, on
// a node with a free slot on an ENI in subnet-a, and on one with a free
// ENI slot; a full node and a node of another zone are refused with the
// address's subnet and zone in words. Prioritize prefers the holder.
func TestAStaticPodGoesWhereItsAddressCanLive(t *testing.T) {
	e, _ := newExtender(t, staticCluster(), DefaultConfig())
	pod := podNamed("db-0", false)
	all := names("holder", "roomy", "eni-slot", "full", "other")
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: all})
	if res.Error != "" || !slicesEqual(*res.NodeNames, []string{"holder", "roomy", "eni-slot"}) {
		t.Fatalf("filter passed %v (error %q), want holder, roomy, eni-slot", res.NodeNames, res.Error)
	}
	if got := res.FailedAndUnresolvableNodes["other"]; got != "static IP 10.0.16.9 lives in subnet-a, us-east-1a" {
		t.Errorf("other: %q", got)
	}
	if got := res.FailedAndUnresolvableNodes["full"]; !strings.Contains(got, "no free address slot on an ENI in that subnet and no free ENI slot") {
		t.Errorf("full: %q", got)
	}
	scores, err := e.Prioritize(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("holder", "roomy", "eni-slot")})
	if err != nil || scores[0].Score <= scores[1].Score || scores[1].Score <= scores[2].Score {
		t.Errorf("scores %v (%v): want holder > roomy > eni-slot", scores, err)
	}
}

// TestAClaimNotReadyForPlacementIsSaidSo: an invalid claim refuses every
// node with its reason; a claim not checked yet, or being released, is
// an error, so kube-scheduler retries the pod.
func TestAClaimNotReadyForPlacementIsSaidSo(t *testing.T) {
	s := staticCluster()
	e, reg := newExtender(t, s, DefaultConfig())
	pod := podNamed("db-0", false)
	s.claims["web/db-0"] = room.Claim{Address: "192.168.1.1", Checked: true, Invalid: "AddressOutsideSubnets: 192.168.1.1 is in no subnet of the VPCs enipam serves"}
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("holder", "roomy")})
	if len(*res.NodeNames) != 0 || !strings.Contains(res.FailedAndUnresolvableNodes["roomy"], "192.168.1.1 is in no subnet") {
		t.Errorf("invalid claim: %+v", res)
	}
	// Counted as the claim's refusal, not as nodes without a free IP.
	if inv, noIP := metricValue(t, reg, "enipam_scheduler_node_refusals_total", "reason", "static_invalid"),
		metricValue(t, reg, "enipam_scheduler_node_refusals_total", "reason", "no_ip"); inv != 2 || noIP != 0 {
		t.Errorf("refusals: static_invalid %v, no_ip %v; want 2, 0", inv, noIP)
	}
	for _, c := range []room.Claim{{Address: "10.0.16.9"}, {Address: "10.0.16.9", Checked: true, Deleting: true}} {
		s.claims["web/db-0"] = c
		if res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("holder")}); res.Error == "" {
			t.Errorf("claim %+v: no error, %+v", c, res)
		}
	}
}

// TestBindCreatesTheClaimAndBindsOnceTheAddressIsSettled: a pod of
// StatefulSet db annotated WithStatefulSet, and for a public IP from the
// pool tagged pool=web, has no claim: bind creates it asking for the node
// (owner reference to the StatefulSet, spec.publicIP.poolTags), creates no
// Binding while the node's pool lacks the settled stamp, and binds once
// it is there. An ordinary pod is bound at once.
func TestBindCreatesTheClaimAndBindsOnceTheAddressIsSettled(t *testing.T) {
	s := staticCluster()
	delete(s.claims, "web/db-0")
	s.intents["uid-db-1"] = waiting.Intent{Static: "WithStatefulSet", StatefulSet: "db", SetUID: "uid-db", PublicIP: "tags:pool=web"}
	e, _, w := newBindingExtender(t, s, DefaultConfig())
	done := make(chan *extenderv1.ExtenderBindingResult, 1)
	go func() {
		done <- e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-1", PodUID: "uid-db-1", Node: "roomy"})
	}()
	c := &enipamv1alpha1.StaticIPClaim{}
	deadline := time.Now().Add(5 * time.Second)
	for w.Get(context.Background(), client.ObjectKey{Namespace: "web", Name: "db-1"}, c) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no claim created")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c.Spec.NodeName != "roomy" || c.Spec.ReclaimPolicy != enipamv1alpha1.ReclaimWithStatefulSet || len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != "uid-db" {
		t.Errorf("claim %+v %+v", c.Spec, c.OwnerReferences)
	}
	if p := c.Spec.PublicIP; p == nil || p.PoolTags["pool"] != "web" || len(p.PoolTags) != 1 || p.Allocate {
		t.Errorf("claim's public IP %+v", p)
	}
	time.Sleep(50 * time.Millisecond)
	if len(w.bindings()) != 0 {
		t.Fatalf("bound before the address was settled: %v", w.bindings())
	}
	w.settle(t, "roomy", "web/db-1", "10.0.16.20", "")
	s.set(room.Node{Name: "roomy", Pool: &room.Pool{Size: 10, Settled: map[string]string{"web/db-1": "10.0.16.20"}}})
	if r := <-done; r.Error != "" {
		t.Fatalf("bind: %s", r.Error)
	}
	if got := w.bindings()["web/db-1"]; got != "roomy" {
		t.Errorf("db-1 bound to %q", got)
	}
	if r := e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "web-7", PodUID: "uid-web-7", Node: "full"}); r.Error != "" || w.bindings()["web/web-7"] != "full" {
		t.Errorf("ordinary pod: %+v, bindings %v", r, w.bindings())
	}
}

// TestBindRefusesABadPublicIPAnnotation: a pod annotated for a public IP
// in words bind cannot read gets an error naming the annotation; no claim
// is created and the pod is not bound.
func TestBindRefusesABadPublicIPAnnotation(t *testing.T) {
	for _, value := range []string{"yes", "tags:", "tags:enipam.io/cluster=x", "tags:a=1,b"} {
		s := staticCluster()
		delete(s.claims, "web/db-0")
		s.intents["uid-db-0"] = waiting.Intent{Static: "true", PublicIP: value}
		e, _, w := newBindingExtender(t, s, DefaultConfig())
		r := e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-0", PodUID: "uid-db-0", Node: "roomy"})
		if !strings.Contains(r.Error, enipamv1alpha1.PublicIPAnnotation) || len(w.bindings()) != 0 {
			t.Errorf("%q: bind %q, bindings %v", value, r.Error, w.bindings())
		}
		if err := w.Get(context.Background(), client.ObjectKey{Namespace: "web", Name: "db-0"}, &enipamv1alpha1.StaticIPClaim{}); err == nil {
			t.Errorf("%q: a claim was created", value)
		}
	}
}

// TestBindGivesUpWithTheClaimsWords: the address never settles on the
// node: bind fails after its timeout with the claim's condition, and
// creates no Binding; the claim asks for the node meanwhile.
func TestBindGivesUpWithTheClaimsWords(t *testing.T) {
	s := staticCluster()
	s.changeClaim("db-0", func(c *room.Claim) {
		c.Status = "WaitingForOldPod: 10.0.16.9 stays on node holder while pod web/db-0 is bound there"
	})
	e, _, w := newBindingExtender(t, s, Config{SettleTimeout: time.Second, BindTimeout: 100 * time.Millisecond})
	w.createClaim(t, "db-0", enipamv1alpha1.StaticIPClaimSpec{Address: "10.0.16.9"})
	r := e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-0", PodUID: "uid-db-0", Node: "roomy"})
	if !strings.Contains(r.Error, "WaitingForOldPod") || len(w.bindings()) != 0 {
		t.Errorf("bind: %q, bindings %v", r.Error, w.bindings())
	}
	got := &enipamv1alpha1.StaticIPClaim{}
	if err := w.Get(context.Background(), client.ObjectKey{Namespace: "web", Name: "db-0"}, got); err != nil || got.Spec.NodeName != "roomy" {
		t.Errorf("claim asks for %q (%v)", got.Spec.NodeName, err)
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			return false
		}
	}
	return true
}

func metaOf(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// TestBindUsesWhatFilterSawWhenTheTrackerLags: the tracker has not seen
// an annotated pod yet when kube-scheduler binds it; filter saw its
// annotation, so bind still creates its claim and waits for its address.
func TestBindUsesWhatFilterSawWhenTheTrackerLags(t *testing.T) {
	s := staticCluster()
	s.set(room.Node{Name: "roomy", Pool: &room.Pool{Size: 10, Free: 3, Settled: map[string]string{"web/db-5": "10.0.16.30"}},
		Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 10, AvailabilityZone: "us-east-1a"}})
	e, _, w := newBindingExtender(t, s, DefaultConfig())
	w.settle(t, "roomy", "web/db-5", "10.0.16.30", "")
	pod := podNamed("db-5", false)
	pod.Annotations = map[string]string{enipamv1alpha1.StaticIPAnnotation: "true"}
	if res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("roomy")}); len(*res.NodeNames) != 1 {
		t.Fatalf("filter: %+v", res)
	}
	if r := e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-5", PodUID: pod.UID, Node: "roomy"}); r.Error != "" {
		t.Fatalf("bind: %s", r.Error)
	}
	c := &enipamv1alpha1.StaticIPClaim{}
	if err := w.Get(context.Background(), client.ObjectKey{Namespace: "web", Name: "db-5"}, c); err != nil || c.Spec.NodeName != "roomy" {
		t.Errorf("claim %+v (%v)", c.Spec, err)
	}
}

// TestAStaticPodStaysWithItsAddressWhileItMovesThere: the last bind
// asked claim db-0 onto node roomy, and the operator reassigned
// 10.0.16.9 onto roomy's ENI (status.nodeName roomy) but has not stamped
// it there yet. kube-scheduler's retry of the pod passes on roomy alone:
// a bind onto another node would ask the claim elsewhere mid-move, and
// the operator would move the address again once it landed. Once the
// stamp is settled on roomy, or when roomy does not pass (cordoned,
// gone), the other nodes pass again.
func TestAStaticPodStaysWithItsAddressWhileItMovesThere(t *testing.T) {
	s := staticCluster()
	s.claims["web/db-0"] = room.Claim{Address: "10.0.16.9", Subnet: "subnet-a", Zone: "us-east-1a", Holder: "roomy", Target: "roomy", Checked: true,
		Status: "Placing: 10.0.16.9 is on eni-2 of node roomy; waiting for enipam-agent to route it"}
	e, _ := newExtender(t, s, DefaultConfig())
	pod := podNamed("db-0", false)
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("roomy", "eni-slot", "full")})
	if res.Error != "" || !slicesEqual(*res.NodeNames, []string{"roomy"}) {
		t.Fatalf("mid-move: filter passed %v (error %q), want roomy alone", res.NodeNames, res.Error)
	}
	if got := res.FailedAndUnresolvableNodes["eni-slot"]; got != "static IP 10.0.16.9 is moving onto node roomy" {
		t.Errorf("eni-slot: %q", got)
	}
	res = e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("eni-slot", "full")})
	if res.Error != "" || !slicesEqual(*res.NodeNames, []string{"eni-slot"}) {
		t.Fatalf("mid-move, roomy not a candidate: filter passed %v (error %q), want eni-slot", res.NodeNames, res.Error)
	}
	s.set(room.Node{Name: "roomy", Pool: &room.Pool{Size: 10, Stamped: map[string]string{"web/db-0": "10.0.16.9"}, Settled: map[string]string{"web/db-0": "10.0.16.9"}},
		Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 27, AvailabilityZone: "us-east-1a", SubnetSlots: []enipamv1alpha1.SubnetSlots{{SubnetID: "subnet-a", Free: 2}}}})
	res = e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("roomy", "eni-slot")})
	if res.Error != "" || !slicesEqual(*res.NodeNames, []string{"roomy", "eni-slot"}) {
		t.Fatalf("settled on roomy: filter passed %v (error %q), want roomy and eni-slot", res.NodeNames, res.Error)
	}
}

// TestPrioritizeFavoursTheNodeAClaimNotPlacedYetAsksFor: claim db-0 has
// no address yet and asks for node target (spec.nodeName, its last bind,
// which timed out): the operator's first placement is under way there,
// the entry it marked for the claim out of the free count (target can
// only grow, score 3 as an ordinary pod's), while free has free entries
// (10 as an ordinary pod's). kube-scheduler's retry of the pod is
// steered back to target, above free and above coming; without a target,
// the claim's scores are an ordinary pod's.
func TestPrioritizeFavoursTheNodeAClaimNotPlacedYetAsksFor(t *testing.T) {
	capacity := &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 10, CanGrow: true, AvailabilityZone: "us-east-1a"}
	s := newFakeState(
		room.Node{Name: "target", Pool: &room.Pool{Size: 10, Free: 0, Leaving: 1}, Capacity: capacity},
		room.Node{Name: "free", Pool: &room.Pool{Size: 10, Free: 5}, Capacity: capacity},
		room.Node{Name: "coming", Pool: &room.Pool{Size: 10}, Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 10, Awaiting: 2, AvailabilityZone: "us-east-1a"}},
	)
	s.claims["web/db-0"] = room.Claim{Target: "target", Checked: true, Status: "Placing: waiting for Cilium's agent to answer the mark of 10.0.16.20"}
	e, _ := newExtender(t, s, DefaultConfig())
	pod := podNamed("db-0", false)
	all := names("target", "free", "coming")
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: all})
	if res.Error != "" || !slicesEqual(*res.NodeNames, []string{"target", "free", "coming"}) {
		t.Fatalf("filter passed %v (error %q), want target, free, coming", res.NodeNames, res.Error)
	}
	scores, err := e.Prioritize(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: all})
	if err != nil || len(scores) != 3 || scores[0].Score <= scores[1].Score || scores[1].Score <= scores[2].Score {
		t.Errorf("scores %v (%v): want target > free > coming", scores, err)
	}

	s.claims["web/db-0"] = room.Claim{Checked: true}
	scores, err = e.Prioritize(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: all})
	want := []int64{3, 10, 6}
	for i := range want {
		if err != nil || len(scores) != 3 || scores[i].Score != want[i] {
			t.Fatalf("no target: scores %v (%v), want target 3, free 10, coming 6", scores, err)
		}
	}
}

// fullPoolMarked is a node's CiliumNode as Digest reads it: ten entries,
// nine used by pods, the tenth marked for release, unowned and unused,
// as enipam-operator marks an ordinary entry for a claim's first
// placement (stamped once Cilium's agent answers).
func fullPoolMarked() *room.Pool {
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	for i := range 10 {
		ip := fmt.Sprintf("10.0.16.%d", 20+i)
		cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: "eni-1"}
		if i > 0 {
			cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: fmt.Sprintf("web/app-%d", i)}
		}
	}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.16.20": ipamoption.IPAMMarkForRelease}
	p := room.Digest(cn, nil)
	return &p
}

// TestFilterPassesTheNodeAClaimNotPlacedYetAsksFor: claim db-0 has no
// address yet and asks for node target (spec.nodeName, its last bind,
// which timed out); the operator marked target's one entry not in use
// for it and waits for Cilium's agent to answer. Target cannot grow, so
// as for any pod it has no free address; for db-0 it has the entry
// marked for it, and filter passes it, as prioritize scores it (10, free
// at most 9). A node as full but not the target is refused, and so is
// the target once the claim asks for no node.
func TestFilterPassesTheNodeAClaimNotPlacedYetAsksFor(t *testing.T) {
	cannotGrow := &enipamv1alpha1.NodeCapacity{MaxIPs: 10, PoolIPs: 10, AvailabilityZone: "us-east-1a", Reason: "instance at capacity"}
	s := newFakeState(
		room.Node{Name: "target", Pool: fullPoolMarked(), Capacity: cannotGrow},
		room.Node{Name: "free", Pool: &room.Pool{Size: 10, Free: 5}, Capacity: cannotGrow},
		room.Node{Name: "full", Pool: fullPoolMarked(), Capacity: cannotGrow},
	)
	s.claims["web/db-0"] = room.Claim{Target: "target", Checked: true, Status: "Placing: 10.0.16.20 marked on node target; waiting for Cilium's agent to confirm no pod holds it before stamping it"}
	e, _ := newExtender(t, s, DefaultConfig())
	pod := podNamed("db-0", false)
	res := e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("target", "free", "full")})
	if res.Error != "" || !slicesEqual(*res.NodeNames, []string{"target", "free"}) {
		t.Fatalf("filter passed %v (error %q, refused %v), want target and free", res.NodeNames, res.Error, res.FailedAndUnresolvableNodes)
	}
	scores, err := e.Prioritize(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("target", "free")})
	if err != nil || len(scores) != 2 || scores[0].Score != 10 || scores[1].Score != 9 {
		t.Errorf("scores %v (%v): want target 10, free 9", scores, err)
	}

	s.claims["web/db-0"] = room.Claim{Checked: true}
	res = e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("target", "free")})
	if res.Error != "" || !slicesEqual(*res.NodeNames, []string{"free"}) || !strings.HasPrefix(res.FailedAndUnresolvableNodes["target"], room.ReasonNoIP) {
		t.Fatalf("no target: filter passed %v (error %q, refused %v), want free alone", res.NodeNames, res.Error, res.FailedAndUnresolvableNodes)
	}
}

// TestFilterDoesNotWaitOnANodeOutsideTheClaimsZone: a static-IP pod
// whose claim has no address yet (first placement, in us-east-1a) and a
// node of us-east-1b whose last free address a pod passed an instant ago
// holds. The node is refused for its zone whatever the hold, so filter
// answers at once instead of waiting the settle timeout for the hold to
// be seen (it judged the node again as for any pod, which fits once the
// hold is gone).
func TestFilterDoesNotWaitOnANodeOutsideTheClaimsZone(t *testing.T) {
	s := newFakeState(room.Node{Name: "other", Pool: &room.Pool{Size: 10, Free: 1}, Promised: 1, Held: 1, Young: 1,
		Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 10, AvailabilityZone: "us-east-1b"}})
	s.claims["web/db-0"] = room.Claim{Subnet: "subnet-a", Zone: "us-east-1a", Checked: true}
	e, reg := newExtender(t, s, Config{SettleTimeout: time.Hour})
	done := make(chan *extenderv1.ExtenderFilterResult, 1)
	go func() {
		done <- e.Filter(context.Background(), &extenderv1.ExtenderArgs{Pod: podNamed("db-0", false), NodeNames: names("other")})
	}()
	select {
	case res := <-done:
		// Refused for the zone, though full for any pod too (once the
		// hold counts): the event names the cause the pod can do
		// nothing about.
		if len(*res.NodeNames) != 0 || !strings.Contains(res.FailedAndUnresolvableNodes["other"], "must be in us-east-1a") {
			t.Errorf("filter: %+v, want other refused for its zone", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("filter waited for the hold on a node outside the claim's zone")
	}
	if n := metricValue(t, reg, "enipam_scheduler_settle_waits_total"); n != 0 {
		t.Errorf("settle waits %v, want 0", n)
	}
	if n := metricValue(t, reg, "enipam_scheduler_node_refusals_total", "reason", "no_zone"); n != 1 {
		t.Errorf("refusals for the zone %v, want 1", n)
	}
}

// TestBindAsksAgainWhenTheCachedClaimLags: the cache says claim db-0
// asks for node roomy, but another bind has asked it for eni-slot since
// (the claim's watch has not delivered that yet). A bind onto roomy asks
// the claim for roomy all the same (the operator then places the address
// there) and binds once it is settled, instead of waiting for a stamp the
// operator is not making there until BindTimeout. A claim being released
// by then fails the bind with that, at once. A bind whose address is
// settled on its node as cached asks the claim too, and reads the node's
// CiliumNode once.
func TestBindAsksAgainWhenTheCachedClaimLags(t *testing.T) {
	s := staticCluster()
	s.changeClaim("db-0", func(c *room.Claim) { c.Target = "roomy" })
	e, _, w := newBindingExtender(t, s, Config{SettleTimeout: time.Second, BindTimeout: 10 * time.Second})
	w.createClaim(t, "db-0", enipamv1alpha1.StaticIPClaimSpec{Address: "10.0.16.9", NodeName: "eni-slot"})
	// The operator: the address settles on the node the claim asks for.
	operator := make(chan struct{})
	go func() {
		defer close(operator)
		if w.asked("db-0", "roomy") {
			w.settle(t, "roomy", "web/db-0", "10.0.16.9", "")
			s.set(room.Node{Name: "roomy", Pool: &room.Pool{Size: 10, Settled: map[string]string{"web/db-0": "10.0.16.9"}}})
		}
	}()
	r := e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-0", PodUID: "uid-db-0", Node: "roomy"})
	<-operator
	if r.Error != "" || w.bindings()["web/db-0"] != "roomy" {
		t.Fatalf("bind: %q, bindings %v; want db-0 bound to roomy", r.Error, w.bindings())
	}
	patches := w.patched()
	if patches != 1 {
		t.Errorf("%d patches, want 1", patches)
	}

	// Settled on roomy as cached: the claim is asked again (which the
	// apiserver answers without a write: the claim names roomy already)
	// and roomy's CiliumNode read once.
	reads := w.readCiliumNodes()
	if r := e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-0", PodUID: "uid-db-0", Node: "roomy"}); r.Error != "" {
		t.Fatalf("bind, settled: %q", r.Error)
	}
	if n, m := w.patched(), w.readCiliumNodes(); n != patches+1 || m != reads+1 {
		t.Errorf("bind onto the node the address is settled on: %d patches, %d reads; want 1, 1", n-patches, m-reads)
	}

	// Being released, the cache not knowing it yet: the answer says so.
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "db-1", Finalizers: []string{enipamv1alpha1.StaticIPClaimFinalizer}}, Spec: enipamv1alpha1.StaticIPClaimSpec{NodeName: "roomy"}}
	if err := w.Create(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	s.claims["web/db-1"] = room.Claim{Target: "roomy", Checked: true}
	r = e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-1", PodUID: "uid-db-1", Node: "roomy"})
	if !strings.Contains(r.Error, "being released") || w.bindings()["web/db-1"] != "" {
		t.Errorf("bind of a claim being released: %q, bindings %v", r.Error, w.bindings())
	}
}

// TestBindConfirmsASettledCacheWithTheAPIServer: the cache says claim
// db-0 asks for node roomy and its address is settled there, but both
// lag: another bind has asked the claim for eni-slot since, and the
// operator has marked the stamp on roomy for release (the address is
// leaving roomy). A bind onto roomy asks the claim for roomy again, reads
// roomy's CiliumNode, finds the stamp in the handshake, and does not bind
// the pod there; once the operator has withdrawn the handshake (the claim
// asks for roomy again), it binds it.
func TestBindConfirmsASettledCacheWithTheAPIServer(t *testing.T) {
	s := staticCluster()
	s.changeClaim("db-0", func(c *room.Claim) { c.Holder, c.Target = "roomy", "roomy" })
	s.set(room.Node{Name: "roomy", Pool: &room.Pool{Size: 10, Settled: map[string]string{"web/db-0": "10.0.16.9"}}})
	e, _, w := newBindingExtender(t, s, Config{SettleTimeout: time.Second, BindTimeout: 10 * time.Second})
	w.createClaim(t, "db-0", enipamv1alpha1.StaticIPClaimSpec{Address: "10.0.16.9", NodeName: "eni-slot"})
	w.settle(t, "roomy", "web/db-0", "10.0.16.9", ipamoption.IPAMMarkForRelease)
	reads := w.readCiliumNodes()
	done := make(chan *extenderv1.ExtenderBindingResult, 1)
	go func() {
		done <- e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-0", PodUID: "uid-db-0", Node: "roomy"})
	}()
	for i := 0; w.readCiliumNodes() == reads; i++ {
		select {
		case r := <-done:
			t.Fatalf("bind on the cache alone: %q, bindings %v; want no Binding while roomy's stamp is in the handshake", r.Error, w.bindings())
		case <-time.After(10 * time.Millisecond):
		}
		if i == 500 {
			t.Fatal("roomy's CiliumNode never read")
		}
	}
	if !w.asked("db-0", "roomy") || len(w.bindings()) != 0 {
		t.Fatalf("after the read: bindings %v; want the claim asking for roomy and no Binding", w.bindings())
	}
	// The operator: the claim asks for roomy again, the handshake goes.
	w.settle(t, "roomy", "web/db-0", "10.0.16.9", "")
	r := <-done
	if r.Error != "" || w.bindings()["web/db-0"] != "roomy" {
		t.Errorf("bind: %q, bindings %v; want db-0 bound to roomy", r.Error, w.bindings())
	}
	if n := w.patched(); n != 1 {
		t.Errorf("%d patches, want 1", n)
	}
}

// TestBindStopsWaitingForAClaimFoundInvalid: bind waits on roomy for
// claim db-0's address; enipam-operator then finds the claim invalid
// (its Ready condition says why). The bind fails with the claim's words
// as soon as the claim's watch says so, not at its timeout; no Binding.
func TestBindStopsWaitingForAClaimFoundInvalid(t *testing.T) {
	s := staticCluster()
	e, _, w := newBindingExtender(t, s, Config{SettleTimeout: time.Second, BindTimeout: 10 * time.Second})
	w.createClaim(t, "db-0", enipamv1alpha1.StaticIPClaimSpec{Address: "10.0.16.9"})
	done := make(chan *extenderv1.ExtenderBindingResult, 1)
	go func() {
		done <- e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-0", PodUID: "uid-db-0", Node: "roomy"})
	}()
	w.asked("db-0", "roomy")
	invalid := "AddressInUse: 10.0.16.9 is held outside enipam"
	s.changeClaim("db-0", func(c *room.Claim) { c.Target, c.Invalid, c.Status = "roomy", invalid, invalid })
	r := <-done
	if r.Error != "static IP claim web/db-0: "+invalid || len(w.bindings()) != 0 {
		t.Errorf("bind: %q, bindings %v; want the claim's words", r.Error, w.bindings())
	}
}

// changeClaim changes the cached claim web/name and wakes the waiters,
// as the claim's watch does.
func (s *fakeState) changeClaim(name string, change func(*room.Claim)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.claims["web/"+name]
	change(&c)
	s.claims["web/"+name] = c
	close(s.changed)
	s.changed = make(chan struct{})
}

// createClaim creates claim web/name in the apiserver bind writes to.
func (w *writer) createClaim(t *testing.T, name string, spec enipamv1alpha1.StaticIPClaimSpec) {
	t.Helper()
	if err := w.Create(context.Background(), &enipamv1alpha1.StaticIPClaim{ObjectMeta: metaOf("web", name), Spec: spec}); err != nil {
		t.Fatal(err)
	}
}

// asked waits, up to five seconds, until claim web/name asks for node.
func (w *writer) asked(name, node string) bool {
	c := &enipamv1alpha1.StaticIPClaim{}
	for range 500 {
		if err := w.Get(context.Background(), client.ObjectKey{Namespace: "web", Name: name}, c); err == nil && c.Spec.NodeName == node {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// settle writes node's CiliumNode in the apiserver bind reads: ip in its
// pool stamped for owner, on an ENI that holds it, in the release
// handshake state given ("" for none).
func (w *writer) settle(t *testing.T, node, owner, ip string, handshake ipamtypes.IPReleaseStatus) {
	t.Helper()
	ctx := context.Background()
	cn := &ciliumv2.CiliumNode{}
	exists := w.Get(ctx, client.ObjectKey{Name: node}, cn) == nil
	cn.Name = node
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{ip: {Resource: "eni-1", Owner: owner}}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1", Addresses: []ciliumip.Addr{ciliumip.AddrFrom(netip.MustParseAddr(ip))}}}
	cn.Status.IPAM.ReleaseIPs = nil
	if handshake != "" {
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{ip: handshake}
	}
	var err error
	if exists {
		err = w.Update(ctx, cn)
	} else {
		err = w.Create(ctx, cn)
	}
	if err != nil {
		t.Error(err)
	}
}

// TestBindConfirmsAStampSettledOnTheNodeRoutingsENIs: claim db-0's
// address 10.0.16.9 is stamped on roomy's pool, naming eni-1, and the
// cache shows it settled. roomy's CiliumNode has no status.eni.enis: its
// NodeRouting's spec.enis lists the address on eni-1, so the apiserver
// confirms it and db-0 is bound to roomy. On node eni-slot the status
// copy (older) lists the address on eni-1 and spec.enis does not:
// spec.enis wins, and the bind gives up at its timeout without a Binding.
func TestBindConfirmsAStampSettledOnTheNodeRoutingsENIs(t *testing.T) {
	for _, tc := range []struct {
		node      string
		copied    bool
		specAddrs []string
		bound     bool
	}{
		{node: "roomy", specAddrs: []string{"10.0.16.9"}, bound: true},
		{node: "eni-slot", copied: true, specAddrs: []string{"10.0.16.30"}},
	} {
		s := staticCluster()
		s.changeClaim("db-0", func(c *room.Claim) { c.Holder, c.Target = tc.node, tc.node })
		s.set(room.Node{Name: tc.node, Pool: &room.Pool{Size: 10, Settled: map[string]string{"web/db-0": "10.0.16.9"}}})
		e, _, w := newBindingExtender(t, s, Config{SettleTimeout: time.Second, BindTimeout: 1500 * time.Millisecond})
		w.createClaim(t, "db-0", enipamv1alpha1.StaticIPClaimSpec{Address: "10.0.16.9", NodeName: tc.node})
		w.settle(t, tc.node, "web/db-0", "10.0.16.9", "")
		cn := &ciliumv2.CiliumNode{}
		if err := w.Get(context.Background(), client.ObjectKey{Name: tc.node}, cn); err != nil {
			t.Fatal(err)
		}
		if !tc.copied {
			cn.Status.ENI.ENIs = nil
			if err := w.Update(context.Background(), cn); err != nil {
				t.Fatal(err)
			}
		}
		nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: tc.node},
			Spec: enipamv1alpha1.NodeRoutingSpec{ENIs: []enipamv1alpha1.NodeENI{{ID: "eni-1", MAC: "0a:00:00:00:00:01", Addresses: tc.specAddrs}}}}
		if err := w.Create(context.Background(), nr); err != nil {
			t.Fatal(err)
		}
		r := e.Bind(context.Background(), &extenderv1.ExtenderBindingArgs{PodNamespace: "web", PodName: "db-0", PodUID: "uid-db-0", Node: tc.node})
		if bound := w.bindings()["web/db-0"] == tc.node; bound != tc.bound || (r.Error == "") != tc.bound {
			t.Errorf("%s: bind %q, bindings %v; want bound %v", tc.node, r.Error, w.bindings(), tc.bound)
		}
	}
}
