package room

import (
	"maps"
	"net/netip"
	"strings"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// These tests give Digest a node's ENIs in its NodeRouting's spec.enis
// with an empty status.eni.enis, as an operator writes them that copies
// them into the CiliumNode only where something reads the copy: what
// placement decides is what it decides with the copy.

// TestAPrefixOfSpecENIsPinsAsTheStatusCopysDoes: node a's eni-1 has the
// /28 prefix 10.0.2.16/28 delegated, listed in status.eni.enis (an
// earlier operator) or in its NodeRouting's spec.enis alone. Either way
// claim db-0's address 10.0.2.18 is pinned to a: node b, with room in the
// subnet, is refused because the address cannot move, and a takes the
// pod.
func TestAPrefixOfSpecENIsPinsAsTheStatusCopysDoes(t *testing.T) {
	withCopy := &ciliumv2.CiliumNode{}
	withCopy.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1",
		Prefixes: []ciliumip.Prefix{ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.2.16/28"))}}}
	spec := []enipamv1alpha1.NodeENI{{ID: "eni-1", Prefixes: []string{"10.0.2.16/28"}}}
	roomy := &enipamv1alpha1.NodeCapacity{AvailabilityZone: "us-east-1a", FreeENISlots: 1,
		SubnetSlots: []enipamv1alpha1.SubnetSlots{{SubnetID: "subnet-a", Free: 5}}}
	for _, tc := range []struct {
		name string
		cn   *ciliumv2.CiliumNode
		enis []enipamv1alpha1.NodeENI
	}{
		{"status copy", withCopy, nil},
		{"spec.enis alone", &ciliumv2.CiliumNode{}, spec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hp := Digest(tc.cn, tc.enis)
			c := &Claim{Address: "10.0.2.18", Subnet: "subnet-a", Zone: "us-east-1a", Holder: "a", Checked: true, Pinned: hp.InPrefix("10.0.2.18")}
			b := AssessStatic(&Node{Name: "b", Pool: &Pool{}, Capacity: roomy}, "db/db-0", c)
			if b.Kind != NoSlot || !strings.Contains(b.Reason, "cannot move") {
				t.Errorf("node b: %+v, want no_slot: the address cannot move (prefixes %v)", b, hp.Prefixes)
			}
			if a := AssessStatic(&Node{Name: "a", Pool: &hp, Capacity: roomy}, "db/db-0", c); a.Kind != Own {
				t.Errorf("node a: %+v, want own", a)
			}
		})
	}
}

// TestAStampSettlesOnTheENIsOfSpecENIs: four stamps out of any
// handshake. db-0's address is a secondary address of eni-1 and db-1's a
// member of eni-1's prefix: listed in status.eni.enis or in spec.enis
// alone, both are settled. db-2's entry names eni-2, which the status copy
// (older) says holds it and spec.enis says does not: spec.enis wins, not
// settled. db-3's names eni-3, which only the status copy lists (an
// earlier operator's): settled, the node's ENIs being the union of both
// lists.
func TestAStampSettlesOnTheENIsOfSpecENIs(t *testing.T) {
	stamped := func() *ciliumv2.CiliumNode {
		cn := &ciliumv2.CiliumNode{}
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
			"10.0.1.14": {Resource: "eni-1", Owner: "db/db-0"},
			"10.0.2.18": {Resource: "eni-1", Owner: "db/db-1"},
			"10.0.1.20": {Resource: "eni-2", Owner: "db/db-2"},
			"10.0.1.30": {Resource: "eni-3", Owner: "db/db-3"},
		}
		return cn
	}
	withCopy := stamped()
	withCopy.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1", Addresses: addrs("10.0.1.14"),
		Prefixes: []ciliumip.Prefix{ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.2.16/28"))}}}
	want := map[string]string{"db/db-0": "10.0.1.14", "db/db-1": "10.0.2.18"}
	if got := Digest(withCopy, nil).Settled; !maps.Equal(got, want) {
		t.Fatalf("with the status copy: settled %v, want %v", got, want)
	}
	spec := []enipamv1alpha1.NodeENI{
		{ID: "eni-1", Addresses: []string{"10.0.1.14"}, Prefixes: []string{"10.0.2.16/28"}},
		{ID: "eni-2", Addresses: []string{"10.0.1.21"}},
	}
	if got := Digest(stamped(), spec).Settled; !maps.Equal(got, want) {
		t.Errorf("spec.enis alone: settled %v, want %v", got, want)
	}
	both := stamped()
	both.Status.ENI.ENIs = map[string]awstypes.ENI{
		"eni-2": {ID: "eni-2", Addresses: addrs("10.0.1.20")},
		"eni-3": {ID: "eni-3", Addresses: addrs("10.0.1.30")},
	}
	want = map[string]string{"db/db-0": "10.0.1.14", "db/db-1": "10.0.2.18", "db/db-3": "10.0.1.30"}
	if got := Digest(both, spec).Settled; !maps.Equal(got, want) {
		t.Errorf("both lists: settled %v, want %v", got, want)
	}
}
