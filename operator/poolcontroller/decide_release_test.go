package poolcontroller

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestDecideRelease: how the release handshake completes, decided from
// the CiliumNode, the snapshot and the claims alone. eni-1 holds the
// secondaries 10.0.1.10-13 and the /28 10.0.1.32; eni-2 holds 10.0.2.10.
func TestDecideRelease(t *testing.T) {
	const (
		rel  = ipamoption.IPAMReadyForRelease
		mark = ipamoption.IPAMMarkForRelease
		dnr  = ipamoption.IPAMDoNotRelease
	)
	prefix := netip.MustParsePrefix("10.0.1.32/28")
	members := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("10.0.1.%d", 32+i))
		}
		return out
	}
	cases := []struct {
		name   string
		pool   map[string]releaseEntry
		drain  netip.Prefix
		claim  string // an address a claim records
		noRead bool   // the claims could not be read
		// want: the steps as "eni: prefixes | ips | held", and the
		// release-ips left in the desired status.
		wantSteps   []string
		wantRelease map[string]ipamtypes.IPReleaseStatus
	}{
		{name: "refused: forgotten", pool: map[string]releaseEntry{"10.0.1.10": {"eni-1", "", dnr}},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{}},
		{name: "acknowledged on its ENI: unassigned", pool: map[string]releaseEntry{"10.0.1.10": {"eni-1", "", rel}, "10.0.2.10": {"eni-2", "", rel}},
			wantSteps:   []string{"eni-1: [] | [10.0.1.10] | [10.0.1.10]", "eni-2: [] | [10.0.2.10] | [10.0.2.10]"},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.10": rel, "10.0.2.10": rel}},
		{name: "acknowledged, gone from its ENI: released without a call", pool: map[string]releaseEntry{"10.0.1.99": {"eni-1", "", rel}},
			wantSteps:   []string{"eni-1: [] | [10.0.1.99] | []"},
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.99": rel}},
		{name: "stamped or claimed: never unassigned", pool: map[string]releaseEntry{"10.0.1.10": {"eni-1", "ns/db-0", rel}, "10.0.1.11": {"eni-1", "", rel}},
			claim:       "10.0.1.11",
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.10": rel, "10.0.1.11": rel}},
		{name: "claims unread: nothing unassigned", pool: map[string]releaseEntry{"10.0.1.10": {"eni-1", "", rel}}, noRead: true,
			wantRelease: map[string]ipamtypes.IPReleaseStatus{"10.0.1.10": rel}},
		{name: "a whole /28 acknowledged: one Unassign of the prefix", pool: prefixPool(members(16), rel),
			wantSteps:   []string{"eni-1: [10.0.1.32/28] | [] | []"},
			wantRelease: prefixStates(members(16), rel)},
		{name: "part of a /28 acknowledged, the rest refused: taken back", pool: prefixPool(members(3), rel),
			wantRelease: map[string]ipamtypes.IPReleaseStatus{}},
		{name: "part of a /28 acknowledged, the rest pending: kept", pool: withEntry(prefixPool(members(3), rel), "10.0.1.40", mark),
			wantRelease: withState(prefixStates(members(3), rel), "10.0.1.40", mark)},
		{name: "part of the /28 being drained: kept", pool: prefixPool(members(3), rel), drain: prefix,
			wantRelease: prefixStates(members(3), rel)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cn := &ciliumv2.CiliumNode{}
			cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
			cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
			for ip, e := range tc.pool {
				cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: e.eni, Owner: e.owner}
				cn.Status.IPAM.ReleaseIPs[ip] = e.state
			}
			snap := &snapshot.Node{ENIs: []cloud.ENI{
				{ID: "eni-1", IPs: addrs("10.0.1.10", "10.0.1.11", "10.0.1.12", "10.0.1.13"), Prefixes: []netip.Prefix{prefix}},
				{ID: "eni-2", IPs: addrs("10.0.2.10")},
			}}
			static := &staticInputs{node: "n1", claims: map[string]*claims.Claim{}}
			if tc.claim != "" {
				static.claims["ns/web-0"] = &claims.Claim{Owner: "ns/web-0", Addr: netip.MustParseAddr(tc.claim)}
			}
			if tc.noRead {
				static = nil
			}
			before := cn.DeepCopy()
			steps := decideRelease(cn, snap, static, nil, tc.drain)

			var got []string
			for _, s := range steps {
				got = append(got, fmt.Sprintf("%s: %v | %v | %v", s.eniID, s.prefixes, s.ips, s.held))
				if len(s.prefixes) > 0 && len(s.members) != 16*len(s.prefixes) {
					t.Errorf("%s: %d members for %d prefixes", s.eniID, len(s.members), len(s.prefixes))
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.wantSteps) {
				t.Errorf("steps %q, want %q", got, tc.wantSteps)
			}
			if !maps.Equal(cn.Status.IPAM.ReleaseIPs, tc.wantRelease) {
				t.Errorf("release-ips %v, want %v", cn.Status.IPAM.ReleaseIPs, tc.wantRelease)
			}
			if !sameJSON(cn.Spec, before.Spec) {
				t.Errorf("the decision changed the pool: %v, was %v", cn.Spec.IPAM.Pool, before.Spec.IPAM.Pool)
			}
		})
	}
}

func addrs(ips ...string) []netip.Addr {
	out := make([]netip.Addr, len(ips))
	for i, ip := range ips {
		out[i] = netip.MustParseAddr(ip)
	}
	return out
}

// releaseEntry is a pool entry and its state in the handshake.
type releaseEntry struct {
	eni, owner string
	state      ipamtypes.IPReleaseStatus
}

// prefixPool is a pool of members of eni-1's /28, each in state st.
func prefixPool(ips []string, st ipamtypes.IPReleaseStatus) map[string]releaseEntry {
	out := map[string]releaseEntry{}
	for _, ip := range ips {
		out[ip] = releaseEntry{"eni-1", "", st}
	}
	return out
}

func withEntry(pool map[string]releaseEntry, ip string, st ipamtypes.IPReleaseStatus) map[string]releaseEntry {
	pool[ip] = releaseEntry{"eni-1", "", st}
	return pool
}

func prefixStates(ips []string, st ipamtypes.IPReleaseStatus) map[string]ipamtypes.IPReleaseStatus {
	out := map[string]ipamtypes.IPReleaseStatus{}
	for _, ip := range ips {
		out[ip] = st
	}
	return out
}

func withState(states map[string]ipamtypes.IPReleaseStatus, ip string, st ipamtypes.IPReleaseStatus) map[string]ipamtypes.IPReleaseStatus {
	states[ip] = st
	return states
}
