package poolcontroller

import (
	"maps"
	"net/netip"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
	"github.com/enipam/enipam/scheduler/room"
)

// firstNode is node n1 for the first placement tests: instance i-1 with
// eni-1 attached in subnet-a holding .10–.13, the pool listing .10 and
// .11 (ordinary, no pod listed in status.ipam.used), and the claim of
// ns/db-2, which has no address yet and is to be on n1.
type firstNode struct {
	cn    *ciliumv2.CiliumNode
	snap  *snapshot.Node
	claim claims.Claim
	// marks are the first placements' marks the operator process
	// remembers from its last pass.
	marks map[string]string
}

const firstOwner = "ns/db-2"

func newFirstNode() *firstNode {
	addr := netip.MustParseAddr
	cn := &ciliumv2.CiliumNode{}
	cn.Name = "n1"
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.1.10": {Resource: "eni-1"},
		"10.0.1.11": {Resource: "eni-1"},
	}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	var onENI1 []ciliumip.Addr
	for _, ip := range []string{"10.0.1.10", "10.0.1.11", "10.0.1.12", "10.0.1.13"} {
		onENI1 = append(onENI1, ciliumip.AddrFrom(addr(ip)))
	}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1", Addresses: onENI1}}
	eni := cloud.ENI{ID: "eni-1", SubnetID: "subnet-a", InstanceID: "i-1", DeviceIndex: 1, AttachmentStatus: cloud.AttachmentAttached,
		IPs: []netip.Addr{addr("10.0.1.10"), addr("10.0.1.11"), addr("10.0.1.12"), addr("10.0.1.13")}}
	snap := &snapshot.Node{Instance: cloud.Instance{ID: "i-1", AZ: "us-east-1a"}, Type: cloud.InstanceType{MaxENIs: 3, IPv4PerENI: 10},
		ENIs: []cloud.ENI{{ID: "eni-0", DeviceIndex: 0, SubnetID: "subnet-n", AttachmentStatus: cloud.AttachmentAttached, SecurityGroups: []string{"sg-1"}}, eni}}
	return &firstNode{cn: cn, snap: snap, claim: claims.Claim{Owner: firstOwner, Target: "n1", Ready: true}}
}

// pass runs one reconcile's static pass on the node, remembering the
// marks as the controller's memory does, and returns the pool view (for
// abortRelease) and the outcome.
func (n *firstNode) pass() (*poolView, staticOutcome) {
	c := n.claim
	in := &staticInputs{
		node:            "n1",
		claims:          map[string]*claims.Claim{firstOwner: &c},
		cluster:         "test",
		podNodes:        map[string]string{firstOwner: ""},
		pooledElsewhere: map[string]bool{},
		located:         map[netip.Addr]inventory.Location{},
		subnets:         map[netip.Addr]cloud.Subnet{},
		listed:          map[string]bool{},
		firstMarks:      maps.Clone(n.marks),
	}
	for key := range n.cn.Spec.IPAM.Pool {
		in.listed[key] = true
	}
	v := &poolView{cn: n.cn}
	out := v.reconcileStatic(in, n.snap, &pool.Config{FirstInterfaceIndex: 1})
	n.marks = out.firstMarks
	return v, out
}

// stampedFor returns the pool entries stamped for owner.
func (n *firstNode) stampedFor(owner string) []string {
	var keys []string
	for key, e := range n.cn.Spec.IPAM.Pool {
		if e.Owner == owner {
			keys = append(keys, key)
		}
	}
	return keys
}

// TestFirstPlacementStampsOnlyAcknowledgedEntries (seed 81238 of the
// static-IP simulation): a first placement on a node whose free-looking
// pool entry a pod already holds, which Cilium's agent has not reported
// in status.ipam.used yet (it writes at most every 15 s). The entry is
// marked, never stamped, so when the agent refuses it (do-not-release)
// its view carries no stamp of the claim's: a stamp it saw would stay in
// its view after the operator removed it, and the claim's pod, bound on
// the next address stamped for it, would be handed this one, held by the
// other pod. The next entry, acknowledged, is stamped with the answer
// kept, and the answer is withdrawn only in the pass after, so the agent
// never sees it unstamped out of the handshake; the extender binds the
// pod only then.
func TestFirstPlacementStampsOnlyAcknowledgedEntries(t *testing.T) {
	n := newFirstNode()
	st := &n.cn.Status.IPAM

	// Pass 1: .10 looks free (pod ns/web-1 holds it, not listed yet).
	n.pass()
	if got := n.stampedFor(firstOwner); len(got) != 0 {
		t.Fatalf("pass 1: %v stamped for %s before the agent answered", got, firstOwner)
	}
	if st.ReleaseIPs["10.0.1.10"] != ipamoption.IPAMMarkForRelease {
		t.Fatalf("pass 1: release-ips %v, want 10.0.1.10 marked", st.ReleaseIPs)
	}

	// The agent refuses it, and lists the pod holding it in the same write.
	st.ReleaseIPs["10.0.1.10"] = ipamoption.IPAMDoNotRelease
	st.Used["10.0.1.10"] = ipamtypes.AllocationIP{Owner: "ns/web-1", Resource: "eni-1"}

	// Pass 2: another entry is marked; nothing is stamped.
	v, out := n.pass()
	if got := n.stampedFor(firstOwner); len(got) != 0 {
		t.Fatalf("pass 2: %v stamped for %s before the agent answered", got, firstOwner)
	}
	if st.ReleaseIPs["10.0.1.11"] != ipamoption.IPAMMarkForRelease {
		t.Fatalf("pass 2: release-ips %v, want 10.0.1.11 marked", st.ReleaseIPs)
	}
	if out.handshakes != 1 || out.demand != 0 {
		t.Errorf("pass 2: %d handshakes, demand %d; want 1 and 0", out.handshakes, out.demand)
	}
	// Demand coming back takes back marks made as excess, not this one.
	if v.abortRelease(n.snap) != 0 || st.ReleaseIPs["10.0.1.11"] != ipamoption.IPAMMarkForRelease {
		t.Fatalf("pass 2: the claim's mark was taken back: release-ips %v", st.ReleaseIPs)
	}
	delete(st.ReleaseIPs, "10.0.1.10") // decideRelease forgets the refusal

	// Pass 3, before the agent answers: it waits, marking nothing more.
	n.pass()
	if got := n.stampedFor(firstOwner); len(got) != 0 || len(st.ReleaseIPs) != 1 {
		t.Fatalf("pass 3: stamped %v, release-ips %v; want nothing stamped, one mark", got, st.ReleaseIPs)
	}

	// The agent acknowledges .11: no pod holds it.
	st.ReleaseIPs["10.0.1.11"] = ipamoption.IPAMReadyForRelease

	// Pass 4: stamped, the answer kept; the extender does not bind yet.
	n.pass()
	if got := n.stampedFor(firstOwner); len(got) != 1 || got[0] != "10.0.1.11" {
		t.Fatalf("pass 4: stamped %v for %s, want [10.0.1.11]", got, firstOwner)
	}
	if st.ReleaseIPs["10.0.1.11"] != ipamoption.IPAMReadyForRelease {
		t.Fatalf("pass 4: release-ips %v, want the answer kept until the stamp is written", st.ReleaseIPs)
	}
	if got := room.Digest(n.cn, nil).Settled[firstOwner]; got != "" {
		t.Fatalf("pass 4: the extender sees %q settled for %s while the answer stands", got, firstOwner)
	}

	// Pass 5: the claim records the address; the answer is withdrawn.
	n.claim.Addr = netip.MustParseAddr("10.0.1.11")
	n.claim.Subnet = "subnet-a"
	n.pass()
	if _, ok := st.ReleaseIPs["10.0.1.11"]; ok || n.cn.Spec.IPAM.Pool["10.0.1.10"].Owner != "" {
		t.Fatalf("pass 5: release-ips %v, pool %v; want the answer withdrawn, .10 never stamped", st.ReleaseIPs, n.cn.Spec.IPAM.Pool)
	}
	if got := room.Digest(n.cn, nil).Settled[firstOwner]; got != "10.0.1.11" {
		t.Errorf("pass 5: the extender sees %q settled for %s, want 10.0.1.11", got, firstOwner)
	}
}

// TestFirstPlacementMarkForgottenWithTheProcess: an operator restarted
// after marking an entry for a first placement does not know what it was
// marked for. The acknowledged entry is not stamped (an earlier process
// may have sent its Unassign: it is released as any other), and another
// free entry is marked for the claim.
func TestFirstPlacementMarkForgottenWithTheProcess(t *testing.T) {
	n := newFirstNode()
	st := &n.cn.Status.IPAM
	n.pass()
	st.ReleaseIPs["10.0.1.10"] = ipamoption.IPAMReadyForRelease
	n.marks = nil // restarted
	n.pass()
	if got := n.stampedFor(firstOwner); len(got) != 0 {
		t.Fatalf("stamped %v for %s on an acknowledgement the process does not know the origin of", got, firstOwner)
	}
	if st.ReleaseIPs["10.0.1.11"] != ipamoption.IPAMMarkForRelease {
		t.Fatalf("release-ips %v, want 10.0.1.11 marked for the claim", st.ReleaseIPs)
	}
}

// TestFirstPlacementTakesAnotherClaimsMarkOnlyInItsSubnet: an entry
// acknowledged for a first placement whose claim no longer waits serves
// another claim of the node, but only one that may live in its subnet.
func TestFirstPlacementTakesAnotherClaimsMarkOnlyInItsSubnet(t *testing.T) {
	for _, tc := range []struct {
		subnet, want string
	}{{"subnet-a", "10.0.1.11"}, {"subnet-b", ""}} {
		n := newFirstNode()
		n.claim.Subnet = tc.subnet
		n.cn.Status.IPAM.ReleaseIPs["10.0.1.11"] = ipamoption.IPAMReadyForRelease
		n.marks = map[string]string{"10.0.1.11": "ns/db-0"} // placed elsewhere since
		n.pass()
		got := ""
		if keys := n.stampedFor(firstOwner); len(keys) == 1 {
			got = keys[0]
		}
		if got != tc.want {
			t.Errorf("claim in %s: stamped %q, want %q", tc.subnet, got, tc.want)
		}
	}
}

// TestFirstPlacementSkipsAnAddressAnotherClaimNames (seed 214392 of the
// static-IP simulation): claim ns/db-0 asked for 10.0.1.10, which was
// assigned onto eni-1 for it, and was deleted before the address was
// stamped (it keeps its finalizer: being released). The pass that brings
// .10 into the pool, as an ordinary entry, also serves the first
// placement of ns/db-2. It must not take .10: db-0 records it and keeps
// it before db-2, so db-2's stamp would be removed once both claims are
// read, after db-2 was told it is Bound, and .10, released with db-0,
// handed to an ordinary pod. Two cases: the entries come into the pool
// in this pass (stamped at once), or the pool listed them (marked).
func TestFirstPlacementSkipsAnAddressAnotherClaimNames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listed bool
	}{{"brought into the pool by this pass", false}, {"listed in the pool as read", true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFirstNode()
			released := claims.Claim{Owner: "ns/db-0", Target: "n1", Addr: netip.MustParseAddr("10.0.1.10"), Release: true, Ready: true}
			c := n.claim
			in := &staticInputs{
				node:            "n1",
				claims:          map[string]*claims.Claim{firstOwner: &c, released.Owner: &released},
				cluster:         "test",
				podNodes:        map[string]string{firstOwner: "", released.Owner: ""},
				pooledElsewhere: map[string]bool{},
				located:         map[netip.Addr]inventory.Location{},
				subnets:         map[netip.Addr]cloud.Subnet{},
				listed:          map[string]bool{},
			}
			if tc.listed {
				for key := range n.cn.Spec.IPAM.Pool {
					in.listed[key] = true
				}
			}
			v := &poolView{cn: n.cn}
			v.reconcileStatic(in, n.snap, &pool.Config{FirstInterfaceIndex: 1})
			if e := n.cn.Spec.IPAM.Pool["10.0.1.10"]; e.Owner != "" {
				t.Fatalf("10.0.1.10, named by the released claim %s, stamped for %s", released.Owner, e.Owner)
			}
			if _, marked := n.cn.Status.IPAM.ReleaseIPs["10.0.1.10"]; marked {
				t.Fatalf("10.0.1.10, named by the released claim %s, marked for %s's first placement", released.Owner, firstOwner)
			}
			stamped, state := n.stampedFor(firstOwner), n.cn.Status.IPAM.ReleaseIPs["10.0.1.11"]
			switch {
			case !tc.listed && (len(stamped) != 1 || stamped[0] != "10.0.1.11"):
				t.Errorf("stamped %v for %s, want [10.0.1.11]", stamped, firstOwner)
			case tc.listed && (len(stamped) != 0 || state != ipamoption.IPAMMarkForRelease):
				t.Errorf("stamped %v, 10.0.1.11 in state %q; want nothing stamped, 10.0.1.11 marked", stamped, state)
			}
		})
	}
}
