package tracker

import (
	"log/slog"
	"net/netip"
	"strconv"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/room"
)

// These tests drive the informers' handlers with the objects the
// transforms produce, on a fake clock, and read what View reports: the
// promises a user's pods make on a node's addresses.

type fixture struct {
	t   *testing.T
	tr  *Tracker
	now time.Time
	cns map[string]any // each CiliumNode as last seen
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), cns: map[string]any{}}
	f.tr = New(nil, DefaultConfig(), slog.New(slog.DiscardHandler))
	f.tr.now = func() time.Time { return f.now }
	return f
}

// pod is a pod as the pod transform leaves it.
func pod(name, node string) *waiting.Pod {
	p, _ := waiting.Slim(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
	})
	return p.(*waiting.Pod)
}

// incoming is the pod being placed.
var incoming = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "new", UID: "uid-new"}}

// node writes node's CiliumNode: free addresses, and the owners Cilium's
// agent lists as used.
func (f *fixture) node(name string, free int, usedBy ...string) {
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	for i := range free {
		cn.Spec.IPAM.Pool[ipOf(i)] = ipamtypes.AllocationIP{Resource: "eni-1"}
	}
	for i, owner := range usedBy {
		ip := ipOf(100 + i)
		cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: "eni-1"}
		cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: owner}
	}
	f.seen(cn)
}

// seen hands cn, through the transform, to the tracker as its informer
// does: an update of the CiliumNode as last seen.
func (f *fixture) seen(cn *ciliumv2.CiliumNode) {
	obj, _ := stripCiliumNode(cn)
	f.tr.ciliumNodeSeen(f.cns[cn.Name], obj)
	f.cns[cn.Name] = obj
}

func ipOf(i int) string { return "10.0.0." + strconv.Itoa(i) }

// promised returns what View says of each node for the incoming pod.
func (f *fixture) promised(names ...string) []int {
	nodes, _ := f.tr.View(incoming, names, f.now.Add(-time.Second))
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n.Promised
	}
	return out
}

func (f *fixture) want(what string, got []int, want ...int) {
	f.t.Helper()
	for i := range want {
		if got[i] != want[i] {
			f.t.Fatalf("%s: promised %v, want %v", what, got, want)
		}
	}
}

// TestABoundPodKeepsItsPromiseUntilCiliumListsIt: a pod bound to a node
// counts there until it starts; after it got its address (it left the
// watch without being deleted) it still counts, because Cilium's agent
// has not listed it in status.ipam.used yet; once it does, the address is
// counted as used instead, and the promise ends.
func TestABoundPodKeepsItsPromiseUntilCiliumListsIt(t *testing.T) {
	f := newFixture(t)
	f.node("a", 3)
	p := pod("web-1", "a")
	f.tr.podSeen(p)
	f.want("bound, not started", f.promised("a"), 1)
	f.tr.podGone(p)
	f.want("started, not yet in used", f.promised("a"), 1)
	f.node("a", 2, "web/web-1")
	f.want("listed by the agent", f.promised("a"), 0)
}

// TestAStartedPodIsForgottenAfterTheGrace: when the agent never lists a
// started pod (it died before, or its update was lost), the promise ends
// after StartedGrace.
func TestAStartedPodIsForgottenAfterTheGrace(t *testing.T) {
	f := newFixture(t)
	f.node("a", 3)
	p := pod("web-1", "a")
	f.tr.podSeen(p)
	f.tr.podGone(p)
	f.now = f.now.Add(DefaultConfig().StartedGrace + time.Second)
	f.want("after the grace", f.promised("a"), 0)
	f.tr.sweep()
	if f.tr.started.Len() != 0 {
		t.Errorf("started pods kept after the sweep: %v", f.tr.started)
	}
}

// TestADeletedPodPromisesNothing: a pod being deleted before it started
// will take no address, and one deleted leaves no promise behind.
func TestADeletedPodPromisesNothing(t *testing.T) {
	f := newFixture(t)
	f.node("a", 3)
	p := pod("web-1", "a")
	f.tr.podSeen(p)
	deleting := p.DeepCopyObject().(*waiting.Pod)
	deleting.DeletionTimestamp = &metav1.Time{Time: f.now}
	f.tr.podSeen(deleting)
	f.want("being deleted", f.promised("a"), 0)
	f.tr.podGone(cache.DeletedFinalStateUnknown{Key: "web/web-1", Obj: deleting})
	f.want("deleted", f.promised("a"), 0)
}

// TestAPodAlreadyInUsedIsNotCountedTwice: the agent gave the pod its
// address and wrote status.ipam.used before the kubelet reported the
// pod's IP: the address is used, the pod promises nothing more.
func TestAPodAlreadyInUsedIsNotCountedTwice(t *testing.T) {
	f := newFixture(t)
	f.node("a", 3)
	f.tr.podSeen(pod("web-1", ""))
	f.tr.podSeen(pod("web-1", "a"))
	f.node("a", 2, "web/web-1")
	f.want("in used", f.promised("a"), 0)
}

// TestAReusedPodNameIsNotTakenForTheEarlierPod: pod web-0 ran on node a
// with an address the agent lists as used by "web/web-0" (Cilium's owner
// has no UID). It is force-deleted and its StatefulSet recreates it at
// once, bound to a again, while the kubelet has not torn the earlier
// sandbox down: the new pod has no address yet and takes a free one. It
// counts on a, bound, then started, until the agent lists an address
// for web/web-0 that it did not list before the new pod was seen.
func TestAReusedPodNameIsNotTakenForTheEarlierPod(t *testing.T) {
	f := newFixture(t)
	f.node("a", 2, "web/web-0")
	again := func(node string) *waiting.Pod {
		p := pod("web-0", node)
		p.UID = "uid-web-0-again"
		return p
	}
	f.tr.podSeen(again(""))
	f.tr.podSeen(again("a"))
	f.want("recreated, bound where the earlier one is listed", f.promised("a"), 1)
	f.node("a", 2, "web/web-0")
	f.want("the agent's list unchanged", f.promised("a"), 1)
	f.tr.podGone(again("a"))
	f.want("started, not listed yet", f.promised("a"), 1)
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{ipOf(1): {Resource: "eni-1"}, ipOf(2): {Resource: "eni-1"}, ipOf(100): {Resource: "eni-1"}}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{ipOf(1): {Owner: "web/web-0"}}
	f.seen(cn)
	f.want("listed with its own address", f.promised("a"), 0)
}

// TestAStaticPodPromisesNoFreeAddress: static-IP pod db-0 is bound to
// node a, whose pool holds its address stamped for it (the agent hands
// it that entry, which is not counted free) besides two free ones: it
// takes no free address, bound or started, so it promises none there.
// Pod web-1, bound too, promises one.
func TestAStaticPodPromisesNoFreeAddress(t *testing.T) {
	f := newFixture(t)
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{ipOf(1): {Resource: "eni-1"}, ipOf(2): {Resource: "eni-1"}, ipOf(9): {Resource: "eni-1", Owner: "web/db-0"}}
	f.seen(cn)
	db := pod("db-0", "a")
	f.tr.podSeen(db)
	f.want("db-0 bound", f.promised("a"), 0)
	f.tr.podGone(db)
	f.want("db-0 started, not yet in used", f.promised("a"), 0)
	f.tr.podSeen(pod("web-1", "a"))
	f.want("web-1 bound", f.promised("a"), 1)
}

// TestHoldsCountWhereverThePodMayGoUntilItsPlacementIsSeen: filter
// passed a pod on nodes a and b; until its Binding is seen it counts on
// both (the scheduler may have chosen either). Seen bound to b, it counts
// on b only. The pod being placed never counts against itself.
func TestHoldsCountWhereverThePodMayGoUntilItsPlacementIsSeen(t *testing.T) {
	f := newFixture(t)
	f.node("a", 1)
	f.node("b", 1)
	first := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web-1", UID: "uid-web-1"}}
	f.tr.Hold(first, []string{"a", "b"})
	f.want("held", f.promised("a", "b"), 1, 1)
	nodes, _ := f.tr.View(incoming, []string{"a"}, f.now.Add(-time.Second))
	if nodes[0].Held != 1 || nodes[0].Young != 1 {
		t.Errorf("a just-placed hold: %+v, want held and young", nodes[0])
	}
	self, _ := f.tr.View(first, []string{"a"}, f.now)
	if self[0].Promised != 0 {
		t.Errorf("a pod counts against itself: %+v", self[0])
	}
	f.tr.podSeen(pod("web-1", "b"))
	f.want("seen bound to b", f.promised("a", "b"), 0, 1)
	if _, h := f.tr.Counts(); h != 0 {
		t.Errorf("%d holds left once the pod was seen bound", h)
	}
}

// TestAHoldExpires: a pod the scheduler passed but never bound (a later
// plugin refused it) stops counting after HoldTTL, and is swept.
func TestAHoldExpires(t *testing.T) {
	f := newFixture(t)
	f.node("a", 1)
	f.tr.Hold(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web-1", UID: "uid-web-1"}}, []string{"a"})
	f.now = f.now.Add(DefaultConfig().HoldTTL + time.Second)
	f.want("expired", f.promised("a"), 0)
	f.tr.sweep()
	if _, h := f.tr.Counts(); h != 0 {
		t.Errorf("%d holds after the sweep", h)
	}
}

// TestANominatedPodCountsOnItsNode: a pod nominated for a node (by
// preemption, or while a slow bind is under way) counts there, and is
// not held elsewhere once nominated.
func TestANominatedPodCountsOnItsNode(t *testing.T) {
	f := newFixture(t)
	f.node("a", 1)
	p := pod("web-1", "")
	p.Nominated = "a"
	f.tr.podSeen(p)
	f.want("nominated", f.promised("a"), 1)
	bound := pod("web-1", "a")
	f.tr.podSeen(bound)
	f.want("then bound", f.promised("a"), 1)
}

// TestCapacityAndPoolsFollowTheirObjects: a NodeRouting's capacity and a
// CiliumNode's pool are what View reports, and nothing once deleted; each
// change wakes View's waiters.
func TestCapacityAndPoolsFollowTheirObjects(t *testing.T) {
	f := newFixture(t)
	_, changed := f.tr.View(incoming, []string{"a"}, f.now)
	f.node("a", 2)
	select {
	case <-changed:
	default:
		t.Fatal("a pool change did not wake the waiters")
	}
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: enipamv1alpha1.NodeRoutingSpec{Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, CanGrow: true}}}
	obj, _ := stripNodeRouting(nr)
	f.tr.routingSeen(obj)
	nodes, _ := f.tr.View(incoming, []string{"a", "b"}, f.now)
	if nodes[0].Pool == nil || nodes[0].Pool.Free != 2 || nodes[0].Capacity == nil || nodes[0].Capacity.MaxIPs != 27 || nodes[1].Pool != nil {
		t.Fatalf("view: %+v", nodes)
	}
	f.tr.routingGone(obj)
	f.tr.ciliumNodeGone(cache.DeletedFinalStateUnknown{Obj: &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}})
	nodes, _ = f.tr.View(incoming, []string{"a"}, f.now)
	if nodes[0].Pool != nil || nodes[0].Capacity != nil {
		t.Errorf("after deletion: %+v", nodes[0])
	}
}

// TestAStampSettlesOnlyThroughTheTransformWithItsENI: the CiliumNode
// transform keeps, for stamped entries, their ENI and the addresses
// status.eni.enis lists for them, and every delegated prefix: db-0's
// stamp, held by its ENI, is settled; db-1's, whose address its ENI does
// not list, is not; db-2's address, inside a prefix of the node, pins its
// claim to that node.
func TestAStampSettlesOnlyThroughTheTransformWithItsENI(t *testing.T) {
	f := newFixture(t)
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.0.10": {Resource: "eni-1", Owner: "db/db-0"},
		"10.0.0.11": {Resource: "eni-1", Owner: "db/db-1"},
		"10.0.0.12": {Resource: "eni-1"},
		"10.0.2.18": {Resource: "eni-1", Owner: "db/db-2"},
	}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1",
		Addresses: []ciliumip.Addr{ciliumip.AddrFrom(netip.MustParseAddr("10.0.0.10")), ciliumip.AddrFrom(netip.MustParseAddr("10.0.0.12"))},
		Prefixes:  []ciliumip.Prefix{ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.2.16/28"))}}}
	f.seen(cn)
	if ip, _ := f.tr.Settled("n1", "db/db-0"); ip != "10.0.0.10" {
		t.Errorf("db-0 settled on %q, want 10.0.0.10", ip)
	}
	if ip, _ := f.tr.Settled("n1", "db/db-1"); ip != "" {
		t.Errorf("db-1 settled on %q, whose ENI does not hold it", ip)
	}
	f.tr.claimSeen(&enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "db-2"},
		Status: enipamv1alpha1.StaticIPClaimStatus{Address: "10.0.2.18", NodeName: "n1"}})
	if c, _ := f.tr.Claim("db", "db-2"); !c.Pinned {
		t.Errorf("db-2's claim %+v not pinned to n1", c)
	}
}

// TestAFirstPlacementHeldOnItsTargetTakesNoFreeAddressThere: claim db-0
// has no address yet and asks for node target, whose pool holds two free
// entries and one the operator marked for release (for db-0's first
// placement, as far as the pool can say). Filter passed db-0 on target,
// on that marked entry, and on other: while its bind waits, the hold
// counts on other (it would take a free address there) and not on target
// (it takes the marked entry, which Free does not count), so target keeps
// two free addresses for other pods. The same once the operator stamped
// the entry for db-0 on the agent's answer (ready-for-release, owner
// db-0), and for db-0 nominated for target. With no mark on target, or
// with the claim asking for another node, the hold counts on target too.
func TestAFirstPlacementHeldOnItsTargetTakesNoFreeAddressThere(t *testing.T) {
	f := newFixture(t)
	target := func(owner string, state ipamtypes.IPReleaseStatus) {
		cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "target"}}
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{ipOf(1): {Resource: "eni-1"}, ipOf(2): {Resource: "eni-1"}, ipOf(3): {Resource: "eni-1", Owner: owner}}
		if state != "" {
			cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{ipOf(3): state}
		}
		f.seen(cn)
	}
	claim := func(node string) {
		f.tr.claimSeen(&enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "db-0", Generation: 1},
			Spec:   enipamv1alpha1.StaticIPClaimSpec{NodeName: node},
			Status: enipamv1alpha1.StaticIPClaimStatus{Phase: enipamv1alpha1.ClaimPlacing, ObservedGeneration: 1}})
	}
	target("", ipamoption.IPAMMarkForRelease)
	f.node("other", 2)
	claim("target")
	db := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "db-0", UID: "uid-db-0"}}
	f.tr.Hold(db, []string{"target", "other"})
	f.want("held, marked on target", f.promised("target", "other"), 0, 1)
	if nodes, _ := f.tr.View(incoming, []string{"target"}, f.now.Add(-time.Second)); nodes[0].Held != 0 || nodes[0].Young != 0 || nodes[0].Pool.Free != 2 {
		t.Errorf("target: %+v, want no hold and two free", nodes[0])
	}
	target("web/db-0", ipamoption.IPAMReadyForRelease)
	f.want("held, stamped for db-0 on the answer", f.promised("target", "other"), 0, 1)

	target("", "")
	f.want("held, nothing marked", f.promised("target", "other"), 1, 1)
	target("", ipamoption.IPAMMarkForRelease)
	claim("other")
	f.want("held, the claim asks for other", f.promised("target", "other"), 1, 1)

	claim("target")
	p := pod("db-0", "")
	p.Nominated = "target"
	f.tr.podSeen(p)
	f.want("nominated for target", f.promised("target", "other"), 0, 0)
}

// TestANominatedPodFilteredAgainCountsOnceOnItsNode: pod web-1 is
// nominated for node a (preemption chose a and evicts its victims), and
// kube-scheduler runs it through filter again, which passes it on a and
// b. It counts once on a, where it is nominated (not also as held
// there), and once on b, where it is held.
func TestANominatedPodFilteredAgainCountsOnceOnItsNode(t *testing.T) {
	f := newFixture(t)
	f.node("a", 2)
	f.node("b", 2)
	p := pod("web-1", "")
	p.Nominated = "a"
	f.tr.podSeen(p)
	f.tr.Hold(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web-1", UID: "uid-web-1"}}, []string{"a", "b"})
	f.want("nominated for a, held on a and b", f.promised("a", "b"), 1, 1)
	if nodes, _ := f.tr.View(incoming, []string{"a"}, f.now.Add(-time.Second)); nodes[0].Held != 0 {
		t.Errorf("a: %+v, want the nominated pod not counted as held there", nodes[0])
	}
}

// TestAnotherClaimsMarkLeavesNoRoomUnaccounted: claims db-0 and db-1
// have no address yet and both ask for node target, whose pool holds two
// free entries and one marked for release: the operator's mark for one of
// the two, the pool cannot say which. db-1 is bound there, db-0 held
// there: one of them takes the marked entry, the other a free one, so
// target has one free address left for other pods, not two. Once the
// operator marks a second entry (for the other claim), both take marked
// entries.
func TestAnotherClaimsMarkLeavesNoRoomUnaccounted(t *testing.T) {
	f := newFixture(t)
	target := func(free, marked int) {
		cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "target"}}
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
		for i := range free {
			cn.Spec.IPAM.Pool[ipOf(i)] = ipamtypes.AllocationIP{Resource: "eni-1"}
		}
		for i := range marked {
			cn.Spec.IPAM.Pool[ipOf(50+i)] = ipamtypes.AllocationIP{Resource: "eni-1"}
			cn.Status.IPAM.ReleaseIPs[ipOf(50+i)] = ipamoption.IPAMMarkForRelease
		}
		f.seen(cn)
	}
	for _, name := range []string{"db-0", "db-1"} {
		f.tr.claimSeen(&enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, Generation: 1},
			Spec:   enipamv1alpha1.StaticIPClaimSpec{NodeName: "target"},
			Status: enipamv1alpha1.StaticIPClaimStatus{Phase: enipamv1alpha1.ClaimPlacing, ObservedGeneration: 1}})
	}
	target(2, 1)
	f.tr.podSeen(pod("db-1", "target"))
	f.tr.Hold(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "db-0", UID: "uid-db-0"}}, []string{"target"})
	f.want("two first placements, one mark", f.promised("target"), 1)
	if nodes, _ := f.tr.View(incoming, []string{"target"}, f.now.Add(-time.Second)); room.Assess(&nodes[0], "web/new").Now != 1 {
		t.Errorf("target: %+v, want one free address left", nodes[0])
	}
	target(1, 2)
	f.want("two first placements, two marks", f.promised("target"), 0)
	target(0, 1)
	f.want("two first placements, one mark, nothing free", f.promised("target"), 1)
}
