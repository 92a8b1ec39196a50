package poolcontroller

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// staticCase is one row of TestStaticSteps: node n1 (instance i-1, m5.large:
// 10 slots per ENI) with eni-1 attached in subnet-a holding .10–.13, a pool,
// its handshake and used IPs, the claim db-0 (owner ns/db-0), and where
// its pod is bound.
type staticCase struct {
	name      string
	pool      map[string]string // ip -> owner ("" ordinary)
	release   map[string]ipamtypes.IPReleaseStatus
	used      map[string]string // ip -> owner
	claim     claims.Claim
	podOn     string                        // node the pod ns/db-0 is bound to
	othersOn  string                        // node every other pod is bound to
	elsewhere bool                          // another pool lists the claim's address
	located   map[string]inventory.Location // where EC2 has other addresses
	fullENI   bool                          // eni-1 has no free slot
	prefix    string                        // a /28 delegated to eni-1
	gone      map[string]bool               // owners whose claim is gone
	// liveTarget: the claim's spec.nodeName as the apiserver has it
	// now (nil: as read, tc.claim.Target).
	liveTarget *string

	wantPool    map[string]string
	wantRelease map[string]ipamtypes.IPReleaseStatus
	wantPlace   []placement
	wantCreate  bool
	wantReason  string
	wantDemand  int
	// wantSecondary: the ENI a secondary address is asked for on.
	wantSecondary string
}

func TestStaticSteps(t *testing.T) {
	const a, b, x = "10.0.1.10", "10.0.1.11", "10.0.1.50"
	const owner = "ns/db-0"
	addr := netip.MustParseAddr
	here := claims.Claim{Owner: owner, Addr: addr(a), Subnet: "subnet-a", Target: "n1", Ready: true}
	away := claims.Claim{Owner: owner, Addr: addr(a), Subnet: "subnet-a", Target: "n2", Ready: true}
	rs := func(kv ...string) map[string]ipamtypes.IPReleaseStatus {
		m := map[string]ipamtypes.IPReleaseStatus{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = ipamtypes.IPReleaseStatus(kv[i+1])
		}
		return m
	}
	cases := []staticCase{
		{name: "bound here: nothing to do", pool: map[string]string{a: owner, b: ""}, claim: here,
			wantPool: map[string]string{a: owner, b: ""}, wantRelease: rs()},
		{name: "stamped, agent confirmed nobody holds it: the mark is withdrawn", pool: map[string]string{a: owner},
			release: rs(a, ipamoption.IPAMReadyForRelease), claim: here,
			wantPool: map[string]string{a: owner}, wantRelease: rs()},
		{name: "stamped, but a pod the agent had not listed holds it: the stamp goes", pool: map[string]string{a: owner},
			release: rs(a, ipamoption.IPAMDoNotRelease), claim: here,
			wantPool: map[string]string{a: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonAddressTaken},
		{name: "moving away while its old pod is bound here: nothing moves", pool: map[string]string{a: owner},
			used: map[string]string{a: owner}, claim: away, podOn: "n1",
			wantPool: map[string]string{a: owner}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonWaitingForOldPod},
		{name: "moving away from a first placement that another pod got first (the agent saw the stamp late): the stamp goes, taken",
			pool: map[string]string{a: owner}, used: map[string]string{a: "ns/web"}, othersOn: "n1", claim: away,
			wantPool: map[string]string{a: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonAddressTaken},
		{name: "requested entry stamped and marked for another claim in this pass or before: left alone, taken",
			pool: map[string]string{a: "ns/db-1"}, release: rs(a, ipamoption.IPAMMarkForRelease), claim: here,
			wantPool: map[string]string{a: "ns/db-1"}, wantRelease: rs(a, ipamoption.IPAMMarkForRelease), wantReason: enipamv1alpha1.ReasonAddressTaken},
		{name: "moving away, old pod gone: marked, the stamp kept", pool: map[string]string{a: owner}, claim: away,
			wantPool: map[string]string{a: owner}, wantRelease: rs(a, ipamoption.IPAMMarkForRelease), wantReason: enipamv1alpha1.ReasonWaitingForOldPod},
		{name: "moving away, agent still holds it: asked again later", pool: map[string]string{a: owner},
			release: rs(a, ipamoption.IPAMDoNotRelease), claim: away,
			wantPool: map[string]string{a: owner}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonWaitingForOldPod},
		{name: "moving away, acknowledged: released and out of the pool, never unassigned", pool: map[string]string{a: owner, b: ""},
			release: rs(a, ipamoption.IPAMReadyForRelease), claim: away,
			wantPool: map[string]string{b: ""}, wantRelease: rs(a, ipamoption.IPAMReleased), wantReason: enipamv1alpha1.ReasonPlacing},
		// The unanswered mark stays (unstamp): withdrawn with the status
		// write, it would leave, should the spec write after it be lost,
		// a stamp with no handshake, taken for one the agent confirmed.
		{name: "the claim released: an ordinary address again, its unanswered mark left to the agent", pool: map[string]string{a: owner},
			release: rs(a, ipamoption.IPAMMarkForRelease), claim: claims.Claim{Owner: owner, Addr: addr(a), Release: true, Ready: true},
			wantPool: map[string]string{a: ""}, wantRelease: rs(a, ipamoption.IPAMMarkForRelease)},
		{name: "the claim released after the agent answered: an ordinary address again, the answer withdrawn", pool: map[string]string{a: owner},
			release: rs(a, ipamoption.IPAMReadyForRelease), claim: claims.Claim{Owner: owner, Addr: addr(a), Release: true, Ready: true},
			wantPool: map[string]string{a: ""}, wantRelease: rs()},
		// Seed 16861 of the static-IP simulation: a first placement
		// stamped and marked an entry another pod had just been given;
		// the claim then lost the address to an older claim recording
		// it; the operator was killed between the status write (the mark
		// withdrawn) and the spec write (the stamp removed); the next one
		// took the stamp for confirmed and the claim became Bound to an
		// address another pod holds.
		{name: "a stamp whose claim lost the address, the agent not answered yet: unstamped, the mark stays", pool: map[string]string{a: owner},
			release: rs(a, ipamoption.IPAMMarkForRelease), claim: claims.Claim{Owner: owner, Addr: addr(a), Subnet: "subnet-a", Target: "n1", Lost: true},
			wantPool: map[string]string{a: ""}, wantRelease: rs(a, ipamoption.IPAMMarkForRelease)},
		{name: "a claim not checked yet: nothing moves", pool: map[string]string{a: owner},
			claim:    claims.Claim{Owner: owner, Addr: addr(a), Target: "n2"},
			wantPool: map[string]string{a: owner}, wantRelease: rs()},
		// Seed 81238: a pod the agent had not listed yet held the entry;
		// a stamp would have stayed in the agent's view after its removal.
		{name: "first placement: a free entry marked, not stamped before the agent answers", pool: map[string]string{a: "", b: ""},
			used: map[string]string{a: "ns/web"}, claim: claims.Claim{Owner: owner, Target: "n1", Ready: true},
			wantPool: map[string]string{a: "", b: ""}, wantRelease: rs(b, ipamoption.IPAMMarkForRelease), wantReason: enipamv1alpha1.ReasonPlacing},
		{name: "first placement, no free entry: the pool must grow", pool: map[string]string{a: ""},
			used: map[string]string{a: "ns/web"}, claim: claims.Claim{Owner: owner, Target: "n1", Ready: true},
			wantPool: map[string]string{a: ""}, wantRelease: rs(), wantDemand: 1, wantReason: enipamv1alpha1.ReasonPlacing},
		{name: "requested ordinary entry of this pool held by its own pod: stamped at once", pool: map[string]string{a: ""},
			used: map[string]string{a: owner}, claim: here,
			wantPool: map[string]string{a: owner}, wantRelease: rs()},
		{name: "requested ordinary entry held by another pod: taken", pool: map[string]string{a: ""},
			used: map[string]string{a: "ns/web"}, claim: here,
			wantPool: map[string]string{a: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonAddressTaken},
		{name: "coming here while another pool still lists it: waits", pool: map[string]string{b: ""},
			claim: claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true}, elsewhere: true,
			wantPool: map[string]string{b: ""}, wantRelease: rs()},
		{name: "coming here from another node's ENI: reassigned", pool: map[string]string{b: ""},
			claim:    claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true},
			located:  map[string]inventory.Location{x: {Found: true, ENI: cloud.ENI{ID: "eni-9", InstanceID: "i-9", Tags: map[string]string{cloud.TagCluster: "test"}}}},
			wantPool: map[string]string{b: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonPlacing,
			wantPlace: []placement{{ip: addr(x), owner: owner, eniID: "eni-1", reassign: true}}},
		{name: "a free address of the subnet: assigned without reassignment", pool: map[string]string{b: ""},
			claim:    claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true},
			wantPool: map[string]string{b: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonPlacing,
			wantPlace: []placement{{ip: addr(x), owner: owner, eniID: "eni-1"}}},
		{name: "held by an ENI enipam does not manage: taken, nothing moves", pool: map[string]string{b: ""},
			claim:    claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true},
			located:  map[string]inventory.Location{x: {Found: true, ENI: cloud.ENI{ID: "eni-foreign"}}},
			wantPool: map[string]string{b: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonAddressTaken},
		{name: "requested ordinary entry acknowledged: stamped, never released, the answer kept until the stamp is written", pool: map[string]string{a: ""},
			release: rs(a, ipamoption.IPAMReadyForRelease), claim: here,
			wantPool: map[string]string{a: owner}, wantRelease: rs(a, ipamoption.IPAMReadyForRelease), wantReason: enipamv1alpha1.ReasonPlacing},
		{name: "requested ordinary entry marked (as excess, or for it): waits for the agent's answer, nothing stamped", pool: map[string]string{a: ""},
			release: rs(a, ipamoption.IPAMMarkForRelease), claim: here,
			wantPool: map[string]string{a: ""}, wantRelease: rs(a, ipamoption.IPAMMarkForRelease), wantReason: enipamv1alpha1.ReasonPlacing},
		{name: "requested ordinary entry free: marked, not stamped before the agent answers", pool: map[string]string{a: ""},
			claim:    here,
			wantPool: map[string]string{a: ""}, wantRelease: rs(a, ipamoption.IPAMMarkForRelease), wantReason: enipamv1alpha1.ReasonPlacing},
		{name: "stamped here, EC2 has it nowhere: placed again, the stamp kept", pool: map[string]string{x: owner, b: ""},
			claim:    claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true},
			wantPool: map[string]string{x: owner, b: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonPlacing,
			wantPlace: []placement{{ip: addr(x), owner: owner, eniID: "eni-1"}}},
		{name: "stamped here, EC2 has it on another node's ENI: reassigned back", pool: map[string]string{x: owner, b: ""},
			claim:    claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true},
			located:  map[string]inventory.Location{x: {Found: true, ENI: cloud.ENI{ID: "eni-9", InstanceID: "i-9", Tags: map[string]string{cloud.TagCluster: "test"}}}},
			wantPool: map[string]string{x: owner, b: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonPlacing,
			wantPlace: []placement{{ip: addr(x), owner: owner, eniID: "eni-1", reassign: true}}},
		{name: "stamped here, another pool lists it too: taken, nothing moves", pool: map[string]string{x: owner, b: ""},
			claim: claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true}, elsewhere: true,
			wantPool: map[string]string{x: owner, b: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonAddressTaken},
		{name: "requested ordinary entry asked onto another node: marked, stamped once acknowledged, then it moves", pool: map[string]string{a: "", b: ""},
			claim:    away,
			wantPool: map[string]string{a: "", b: ""}, wantRelease: rs(a, ipamoption.IPAMMarkForRelease), wantReason: enipamv1alpha1.ReasonPlacing},
		{name: "requested ordinary entry asked onto another node, held by another pod: taken", pool: map[string]string{a: ""},
			used: map[string]string{a: "ns/web"}, claim: away,
			wantPool: map[string]string{a: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonAddressTaken},
		{name: "first placement on a prefix node: a /28 member is never stamped; a secondary address is asked for",
			pool: map[string]string{"10.0.1.32": "", "10.0.1.33": ""}, prefix: "10.0.1.32/28",
			claim:    claims.Claim{Owner: owner, Target: "n1", Ready: true},
			wantPool: map[string]string{"10.0.1.32": "", "10.0.1.33": ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonPlacing,
			wantSecondary: "eni-1"},
		{name: "first placement on a prefix node: a free secondary entry is marked to be stamped",
			pool: map[string]string{"10.0.1.32": "", b: ""}, prefix: "10.0.1.32/28",
			claim:    claims.Claim{Owner: owner, Target: "n1", Ready: true},
			wantPool: map[string]string{"10.0.1.32": "", b: ""}, wantRelease: rs(b, ipamoption.IPAMMarkForRelease), wantReason: enipamv1alpha1.ReasonPlacing},
		{name: "a stamp whose claim is gone (deleted without its finalizer): an ordinary address again",
			pool: map[string]string{a: owner, b: "ns/gone-0"}, release: rs(b, ipamoption.IPAMReadyForRelease), claim: here,
			gone:     map[string]bool{"ns/gone-0": true},
			wantPool: map[string]string{a: owner, b: ""}, wantRelease: rs()},
		// kube-scheduler's bind retry asked the claim onto node n2 since
		// the claims were read: n2's reconcile may be placing it too.
		{name: "coming here from another node's ENI, the claim asked onto another node since: not reassigned", pool: map[string]string{b: ""},
			claim:      claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true},
			located:    map[string]inventory.Location{x: {Found: true, ENI: cloud.ENI{ID: "eni-9", InstanceID: "i-9", Tags: map[string]string{cloud.TagCluster: "test"}}}},
			liveTarget: ptr("n2"),
			wantPool:   map[string]string{b: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonPlacing},
		{name: "no slot on an ENI of the subnet: a new ENI there", pool: map[string]string{b: ""}, fullENI: true,
			claim:    claims.Claim{Owner: owner, Addr: addr(x), Subnet: "subnet-a", Target: "n1", Ready: true},
			wantPool: map[string]string{b: ""}, wantRelease: rs(), wantReason: enipamv1alpha1.ReasonPlacing, wantCreate: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cn := &ciliumv2.CiliumNode{}
			cn.Name = "n1"
			cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
			for ip, o := range tc.pool {
				cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: "eni-1", Owner: o}
			}
			cn.Status.IPAM.ReleaseIPs = maps.Clone(tc.release)
			if cn.Status.IPAM.ReleaseIPs == nil {
				cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
			}
			cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
			for ip, o := range tc.used {
				cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: o}
			}
			eni := cloud.ENI{ID: "eni-1", SubnetID: "subnet-a", InstanceID: "i-1", DeviceIndex: 1, AttachmentStatus: cloud.AttachmentAttached,
				IPs: []netip.Addr{addr("10.0.1.10"), addr("10.0.1.11"), addr("10.0.1.12"), addr("10.0.1.13")}}
			if tc.prefix != "" {
				eni.Prefixes = append(eni.Prefixes, netip.MustParsePrefix(tc.prefix))
			}
			if tc.fullENI {
				for i := range 5 {
					eni.IPs = append(eni.IPs, netip.AddrFrom4([4]byte{10, 0, 1, byte(20 + i)}))
				}
			}
			snap := &snapshot.Node{Instance: cloud.Instance{ID: "i-1", AZ: "us-east-1a"}, Type: cloud.InstanceType{MaxENIs: 3, IPv4PerENI: 10},
				ENIs: []cloud.ENI{{ID: "eni-0", DeviceIndex: 0, SubnetID: "subnet-n", AttachmentStatus: cloud.AttachmentAttached, SecurityGroups: []string{"sg-1"}}, eni}}
			c := tc.claim
			// The facts the pass reads beforehand (readStaticFacts): the
			// pods of the stamps, the other pools, where EC2 has the
			// addresses, their subnet.
			in := &staticInputs{
				node:            "n1",
				claims:          map[string]*claims.Claim{owner: &c},
				gone:            tc.gone,
				cluster:         "test",
				podNodes:        map[string]string{owner: tc.podOn},
				pooledElsewhere: map[string]bool{},
				located:         map[netip.Addr]inventory.Location{},
				subnets:         map[netip.Addr]cloud.Subnet{},
				liveTargets:     map[string]string{owner: tc.claim.Target},
			}
			if tc.liveTarget != nil {
				in.liveTargets[owner] = *tc.liveTarget
			}
			for key, e := range cn.Spec.IPAM.Pool {
				if e.Owner != "" && e.Owner != owner {
					in.podNodes[e.Owner] = tc.othersOn
				}
				in.pooledElsewhere[key] = tc.elsewhere
			}
			if c.Addr.IsValid() {
				in.pooledElsewhere[c.Addr.String()] = tc.elsewhere
				in.located[c.Addr] = tc.located[c.Addr.String()]
				in.subnets[c.Addr] = cloud.Subnet{ID: "subnet-a", AZ: "us-east-1a"}
			}
			v := &poolView{cn: cn}
			out := v.reconcileStatic(in, snap, &pool.Config{FirstInterfaceIndex: 1})

			gotPool := map[string]string{}
			for ip, e := range cn.Spec.IPAM.Pool {
				gotPool[ip] = e.Owner
			}
			if !maps.Equal(gotPool, tc.wantPool) {
				t.Errorf("pool %v, want %v", gotPool, tc.wantPool)
			}
			if !maps.Equal(cn.Status.IPAM.ReleaseIPs, tc.wantRelease) {
				t.Errorf("release-ips %v, want %v", cn.Status.IPAM.ReleaseIPs, tc.wantRelease)
			}
			if !slices.Equal(out.place, tc.wantPlace) {
				t.Errorf("placements %+v, want %+v", out.place, tc.wantPlace)
			}
			if (out.create != nil) != tc.wantCreate || (out.create != nil && out.create.SubnetID != "subnet-a") {
				t.Errorf("create %+v, want one: %v", out.create, tc.wantCreate)
			}
			if out.secondary != tc.wantSecondary {
				t.Errorf("secondary on %q, want %q", out.secondary, tc.wantSecondary)
			}
			if out.demand != tc.wantDemand {
				t.Errorf("demand %d, want %d", out.demand, tc.wantDemand)
			}
			if got := out.notes[owner].Reason; got != tc.wantReason {
				t.Errorf("note %+v, want reason %q", out.notes[owner], tc.wantReason)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
