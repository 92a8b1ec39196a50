package poolcontroller

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// poolCase is one row of TestPoolFollowsEC2: a node on instance i-1 with
// ENI eni-1 (device 1, attached) holding the addresses in ec2, a pool, the
// handshake and used IPs, what the agent reported routed, and where other
// instances hold addresses.
type poolCase struct {
	name      string
	ec2       []string          // addresses on eni-1
	attaching bool              // eni-1's attachment still attaching
	pool      map[string]string // ip -> resource
	release   map[string]ipamtypes.IPReleaseStatus
	used      []string
	routed    []string          // reported routed on eni-1; nil = no report
	elsewhere map[string]string // ip -> instance holding it
	// listed: addresses another node's pool still lists.
	listed  []string
	missing time.Duration // how long pool addresses have been missing already

	wantPool     []string
	wantMarked   []string
	wantAwaiting int
}

func TestPoolFollowsEC2(t *testing.T) {
	const a, b, c, d = "10.0.1.10", "10.0.1.11", "10.0.1.12", "10.0.1.13"
	grace := 30 * time.Second
	cases := []poolCase{
		{name: "in step", ec2: []string{a, b}, pool: map[string]string{a: "eni-1", b: "eni-1"}, routed: []string{a, b},
			wantPool: []string{a, b}},
		{name: "a released address never stays (lost spec write)", ec2: []string{a}, pool: map[string]string{a: "eni-1", b: "eni-1"},
			release: map[string]ipamtypes.IPReleaseStatus{b: ipamoption.IPAMReleased}, routed: []string{a},
			wantPool: []string{a}},
		{name: "routed before pooled: nothing enters without the agent's report", ec2: []string{a, b}, pool: map[string]string{},
			wantPool: nil, wantAwaiting: 2},
		{name: "routed before pooled: only what the agent routed enters", ec2: []string{a, b, c}, pool: map[string]string{},
			routed: []string{a, c}, wantPool: []string{a, c}, wantAwaiting: 1},
		{name: "attached before pooled", ec2: []string{a}, attaching: true, pool: map[string]string{}, routed: []string{a},
			wantPool: nil, wantAwaiting: 1},
		{name: "missing from EC2 within the grace stays", ec2: []string{a}, pool: map[string]string{a: "eni-1", b: "eni-1"},
			routed: []string{a, b}, missing: grace / 2, wantPool: []string{a, b}},
		{name: "missing from EC2 past the grace is marked, not dropped", ec2: []string{a}, pool: map[string]string{a: "eni-1", b: "eni-1"},
			routed: []string{a, b}, missing: grace, wantPool: []string{a, b}, wantMarked: []string{b}},
		{name: "on another instance: marked at once", ec2: []string{a}, pool: map[string]string{a: "eni-1", b: "eni-1"},
			routed: []string{a}, elsewhere: map[string]string{b: "i-2"}, wantPool: []string{a, b}, wantMarked: []string{b}},
		{name: "in use and missing: kept (cannot be taken from a pod)", ec2: []string{a}, pool: map[string]string{a: "eni-1", b: "eni-1"},
			used: []string{b}, routed: []string{a}, missing: grace, wantPool: []string{a, b}},
		{name: "in the handshake: not added back before the agent dropped the entry", ec2: []string{a, d}, pool: map[string]string{a: "eni-1"},
			release: map[string]ipamtypes.IPReleaseStatus{d: ipamoption.IPAMReleased}, routed: []string{a, d}, wantPool: []string{a}},
		{name: "listed in another pool (its release cut short by a restart after the Unassign): not added until it leaves that pool",
			ec2: []string{a, b}, pool: map[string]string{a: "eni-1"}, routed: []string{a, b}, listed: []string{b},
			wantPool: []string{a}, wantAwaiting: 1},
		{name: "primary address never pooled", ec2: []string{a}, pool: map[string]string{}, routed: []string{a, "10.0.1.5"},
			wantPool: []string{a}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(10000, 0)
			eni := cloud.ENI{ID: "eni-1", DeviceIndex: 1, InstanceID: "i-1", AttachmentStatus: cloud.AttachmentAttached,
				PrimaryIP: netip.MustParseAddr("10.0.1.5")}
			if tc.attaching {
				eni.AttachmentStatus = cloud.AttachmentAttaching
			}
			for _, ip := range tc.ec2 {
				eni.IPs = append(eni.IPs, netip.MustParseAddr(ip))
			}
			cn := &ciliumv2.CiliumNode{}
			cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
			missing := map[string]time.Time{}
			for ip, res := range tc.pool {
				cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: res}
				if tc.missing > 0 {
					missing[ip] = now.Add(-tc.missing)
				}
			}
			cn.Status.IPAM.ReleaseIPs = tc.release
			cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
			for _, ip := range tc.used {
				cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: "default/p"}
			}
			var routed routedFunc
			if tc.routed != nil {
				set := map[netip.Addr]bool{}
				for _, ip := range tc.routed {
					set[netip.MustParseAddr(ip)] = true
				}
				routed = func(id string, ip netip.Addr) bool { return id == "eni-1" && set[ip] }
			}
			holders := map[netip.Addr]string{}
			for ip, in := range tc.elsewhere {
				holders[netip.MustParseAddr(ip)] = in
			}
			listed := map[string]bool{}
			for _, ip := range slices.Concat(tc.ec2, tc.routed) {
				listed[ip] = slices.Contains(tc.listed, ip)
			}
			snap := &snapshot.Node{Instance: cloud.Instance{ID: "i-1"}, ENIs: []cloud.ENI{eni}}
			v := &poolView{cn: cn}
			v.reconcile(&poolInputs{snap: snap, cfg: &pool.Config{FirstInterfaceIndex: 1}, routed: routed, holders: holders,
				missing: missing, now: now, grace: grace, pooledElsewhere: listed})

			if got := keys(cn.Spec.IPAM.Pool); !sameSet(got, tc.wantPool) {
				t.Errorf("pool %v, want %v", got, tc.wantPool)
			}
			var marked []string
			for ip, st := range cn.Status.IPAM.ReleaseIPs {
				if st == ipamoption.IPAMMarkForRelease {
					marked = append(marked, ip)
				}
			}
			if !sameSet(marked, tc.wantMarked) {
				t.Errorf("marked %v, want %v", marked, tc.wantMarked)
			}
			if v.awaiting != tc.wantAwaiting {
				t.Errorf("awaiting %d, want %d", v.awaiting, tc.wantAwaiting)
			}
		})
	}
}

// TestAbortNeverRevivesAcknowledged: with demand back, an IP only marked
// for release (and still on its ENI) returns to service; one the agent
// acknowledged may already be unassigned and is never taken back, nor is
// a marked one EC2 no longer shows.
func TestAbortNeverRevivesAcknowledged(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.1.10": {Resource: "eni-1"}, "10.0.1.11": {Resource: "eni-1"}, "10.0.1.12": {Resource: "eni-1"},
	}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{
		"10.0.1.10": ipamoption.IPAMMarkForRelease,
		"10.0.1.11": ipamoption.IPAMReadyForRelease,
		"10.0.1.12": ipamoption.IPAMMarkForRelease, // gone from EC2
	}
	snap := &snapshot.Node{ENIs: []cloud.ENI{{ID: "eni-1", IPs: []netip.Addr{netip.MustParseAddr("10.0.1.10"), netip.MustParseAddr("10.0.1.11")}}}}
	v := &poolView{cn: cn}
	if n := v.abortRelease(snap); n != 1 {
		t.Fatalf("aborted %d, want 1", n)
	}
	if _, ok := cn.Status.IPAM.ReleaseIPs["10.0.1.10"]; ok {
		t.Error("10.0.1.10 (marked, on its ENI) still in the handshake")
	}
	if cn.Status.IPAM.ReleaseIPs["10.0.1.11"] != ipamoption.IPAMReadyForRelease {
		t.Error("10.0.1.11 (acknowledged) was taken back")
	}
	if cn.Status.IPAM.ReleaseIPs["10.0.1.12"] != ipamoption.IPAMMarkForRelease {
		t.Error("10.0.1.12 (gone from EC2) was taken back")
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	set := map[string]bool{}
	for _, x := range a {
		set[x] = true
	}
	for _, x := range b {
		if !set[x] {
			return false
		}
	}
	return true
}
