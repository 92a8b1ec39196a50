package poolcontroller

import (
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

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

// TestDecide: one look at node n1's state decides its pool and its static
// addresses together, from the facts read beforehand alone. eni-1
// (attached, device 1) holds 10.0.1.10-13, all routed by the node's
// agent; the pool lists .10 and .12, stamped for ns/db-0, whose claim
// asks for node n2 and whose pod is bound nowhere; ns/web-0's claim
// records .11 on n1. Where eni-1 is the cluster's and lacks
// delete-on-termination, its repair is decided too.
func TestDecide(t *testing.T) {
	const (
		db  = "ns/db-0"
		web = "ns/web-0"
	)
	cases := []struct {
		name string
		// elsewhere: the other pools' word on .13 (absent: not read).
		elsewhere   map[string]bool
		podOfDB     string
		wantPool    map[string]string // address -> owner
		wantRelease map[string]ipamtypes.IPReleaseStatus
		wantAdded   int
		wantQueries []string
		wantDBNote  string
		wantWaiting int
		// ours: eni-1 carries the cluster's tag, attached without
		// delete-on-termination; backoff: its repair was tried and
		// backs off until after now.
		ours, backoff bool
		wantRepairs   []string
	}{
		{name: "the claimed address enters stamped, the ordinary one plain, the leaving one is marked",
			elsewhere: map[string]bool{"10.0.1.13": false}, podOfDB: "",
			wantPool:    map[string]string{"10.0.1.10": "", "10.0.1.11": web, "10.0.1.12": db, "10.0.1.13": ""},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.12": ipamoption.IPAMMarkForRelease},
			wantAdded:   2, wantQueries: []string{"10.0.1.12"}, wantDBNote: enipamv1alpha1.ReasonWaitingForOldPod},
		{name: "an address another pool lists waits",
			elsewhere: map[string]bool{"10.0.1.13": true}, podOfDB: "",
			wantPool:    map[string]string{"10.0.1.10": "", "10.0.1.11": web, "10.0.1.12": db},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.12": ipamoption.IPAMMarkForRelease},
			wantAdded:   1, wantQueries: []string{"10.0.1.12"}, wantDBNote: enipamv1alpha1.ReasonWaitingForOldPod, wantWaiting: 1},
		{name: "an address whose other pools were not read waits too",
			podOfDB:     "",
			wantPool:    map[string]string{"10.0.1.10": "", "10.0.1.11": web, "10.0.1.12": db},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.12": ipamoption.IPAMMarkForRelease},
			wantAdded:   1, wantQueries: []string{"10.0.1.12"}, wantDBNote: enipamv1alpha1.ReasonWaitingForOldPod, wantWaiting: 1},
		{name: "the leaving address stays while its pod is bound here",
			elsewhere: map[string]bool{"10.0.1.13": false}, podOfDB: "n1",
			wantPool:    map[string]string{"10.0.1.10": "", "10.0.1.11": web, "10.0.1.12": db, "10.0.1.13": ""},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{},
			wantAdded:   2, wantDBNote: enipamv1alpha1.ReasonWaitingForOldPod},
		{name: "the cluster's ENI without delete-on-termination is repaired beside the pool's decision",
			elsewhere: map[string]bool{"10.0.1.13": false}, podOfDB: "", ours: true,
			wantPool:    map[string]string{"10.0.1.10": "", "10.0.1.11": web, "10.0.1.12": db, "10.0.1.13": ""},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.12": ipamoption.IPAMMarkForRelease},
			wantAdded:   2, wantQueries: []string{"10.0.1.12"}, wantDBNote: enipamv1alpha1.ReasonWaitingForOldPod,
			wantRepairs: []string{"eni-1"}},
		{name: "a repair that backs off is not decided again before its time",
			elsewhere: map[string]bool{"10.0.1.13": false}, podOfDB: "", ours: true, backoff: true,
			wantPool:    map[string]string{"10.0.1.10": "", "10.0.1.11": web, "10.0.1.12": db, "10.0.1.13": ""},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.12": ipamoption.IPAMMarkForRelease},
			wantAdded:   2, wantQueries: []string{"10.0.1.12"}, wantDBNote: enipamv1alpha1.ReasonWaitingForOldPod},
	}
	ip := netip.MustParseAddr
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cn := &ciliumv2.CiliumNode{}
			cn.Name = "n1"
			cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.1.10": {Resource: "eni-1"}, "10.0.1.12": {Resource: "eni-1", Owner: db}}
			cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
			snap := &snapshot.Node{Instance: cloud.Instance{ID: "i-1", AZ: "us-east-1a"}, Type: cloud.InstanceType{MaxENIs: 3, IPv4PerENI: 10},
				ENIs: []cloud.ENI{{ID: "eni-1", DeviceIndex: 1, SubnetID: "subnet-a", InstanceID: "i-1", AttachmentStatus: cloud.AttachmentAttached,
					IPs: []netip.Addr{ip("10.0.1.10"), ip("10.0.1.11"), ip("10.0.1.12"), ip("10.0.1.13")}}}}
			if tc.ours {
				snap.ENIs[0].Tags = map[string]string{cloud.TagCluster: "test"}
				snap.ENIs[0].AttachmentID = "attach-1"
			}
			routed := func(eni string, a netip.Addr) bool { return eni == "eni-1" }
			static := &staticInputs{
				node: "n1",
				claims: map[string]*claims.Claim{
					db:  {Owner: db, Addr: ip("10.0.1.12"), Target: "n2", Ready: true},
					web: {Owner: web, Addr: ip("10.0.1.11"), Target: "n1", Ready: true},
				},
				podNodes:        map[string]string{db: tc.podOfDB},
				pooledElsewhere: map[string]bool{},
				located:         map[netip.Addr]inventory.Location{},
				subnets:         map[netip.Addr]cloud.Subnet{},
				report:          routed,
				listed:          map[string]bool{"10.0.1.10": true, "10.0.1.12": true},
			}
			in := &poolInputs{snap: snap, cfg: &pool.Config{FirstInterfaceIndex: 1}, routed: routed, missing: map[string]time.Time{},
				now: time.Unix(1000, 0), grace: time.Minute, static: static, pooledElsewhere: maps.Clone(tc.elsewhere)}
			in.cluster, in.backoff = "test", map[string]repair{}
			if tc.backoff {
				in.backoff["eni-1"] = repair{failures: 1, next: in.now.Add(time.Second)}
			}
			if in.pooledElsewhere == nil {
				in.pooledElsewhere = map[string]bool{}
			}
			in.pooledElsewhere["10.0.1.11"] = false
			v := &poolView{cn: cn}
			d := decidePool(v, in)

			got := map[string]string{}
			for a, e := range cn.Spec.IPAM.Pool {
				got[a] = e.Owner
			}
			if !maps.Equal(got, tc.wantPool) {
				t.Errorf("pool %v, want %v", got, tc.wantPool)
			}
			if !maps.Equal(cn.Status.IPAM.ReleaseIPs, tc.wantRelease) {
				t.Errorf("release-ips %v, want %v", cn.Status.IPAM.ReleaseIPs, tc.wantRelease)
			}
			if d.pool.added != tc.wantAdded || v.awaiting != tc.wantWaiting {
				t.Errorf("added %d, awaiting %d; want %d, %d", d.pool.added, v.awaiting, tc.wantAdded, tc.wantWaiting)
			}
			if !slices.Equal(d.static.queries, tc.wantQueries) {
				t.Errorf("endpoint queries %v, want %v", d.static.queries, tc.wantQueries)
			}
			if n := d.static.notes[db]; n.Reason != tc.wantDBNote {
				t.Errorf("db-0's note %+v, want %q", n, tc.wantDBNote)
			}
			var repaired []string
			for _, r := range d.repairs.due {
				repaired = append(repaired, r.eniID)
			}
			if !slices.Equal(repaired, tc.wantRepairs) {
				t.Errorf("repairs %v, want %v", repaired, tc.wantRepairs)
			}
			if len(d.static.place) > 0 || d.static.create != nil {
				t.Errorf("placements %+v, create %+v; want none (every claimed address is on the node)", d.static.place, d.static.create)
			}
		})
	}
}
