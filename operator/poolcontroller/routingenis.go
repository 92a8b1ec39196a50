package poolcontroller

import (
	"maps"
	"net/netip"
	"slices"

	awstypes "github.com/cilium/cilium/pkg/aws/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// A node in shape costs its periodic reconcile no more for its ENIs in
// the NodeRouting's spec.enis than it did before that list: the list read
// is kept when it is what fill would list (unchangedRoutingENIs, which
// compares without writing a string), compared with what it would write
// field by field (sameNodeENIs) rather than as JSON, and shared between
// the copies of the NodeRouting a reconcile keeps (copyRouting).

// unchangedRoutingENIs reports whether had, the NodeRouting's spec.enis
// as read, is what wantRoutingENIs would list for enis with none kept for
// the consistency grace: one entry per ENI, sorted by ID, each as specENI
// makes it.
func unchangedRoutingENIs(enis map[string]awstypes.ENI, had []enipamv1alpha1.NodeENI, exclude map[string]string) bool {
	if len(had) != len(enis) {
		return false
	}
	for i := range had {
		if i > 0 && had[i-1].ID >= had[i].ID {
			return false
		}
		e, ok := enis[had[i].ID]
		if !ok || !isSpecENI(&e, &had[i], exclude) {
			return false
		}
	}
	return true
}

// maxMatched is the most addresses or prefixes of one ENI isSpecENI sorts
// in place of the list; an ENI with more is compared by making its entry.
const maxMatched = 64

// isSpecENI reports whether n is specENI(e, exclude), as its JSON would
// say, without making it: every address is written into a buffer on the
// stack and compared with the string n has.
func isSpecENI(e *awstypes.ENI, n *enipamv1alpha1.NodeENI, exclude map[string]string) bool {
	if n.ID != e.ID || n.MAC != e.MAC || n.Number != int32(e.Number) || n.SubnetID != e.Subnet.ID {
		return false
	}
	var buf [64]byte
	if e.IP.IsValid() != (n.PrimaryIP != "") || e.IP.IsValid() && string(e.IP.Addr.AppendTo(buf[:0])) != n.PrimaryIP {
		return false
	}
	if e.Subnet.CIDR.IsValid() != (n.SubnetCIDR != "") ||
		e.Subnet.CIDR.IsValid() && string(e.Subnet.CIDR.Prefix.AppendTo(buf[:0])) != n.SubnetCIDR {
		return false
	}
	// The VPC's CIDRs: the primary first, then the others not yet listed.
	k := 0
	vpcCIDR := func(p netip.Prefix) bool {
		text := p.AppendTo(buf[:0])
		if slices.ContainsFunc(n.VPCCIDRs[:k], func(c string) bool { return c == string(text) }) {
			return true
		}
		if k == len(n.VPCCIDRs) || n.VPCCIDRs[k] != string(text) {
			return false
		}
		k++
		return true
	}
	if e.VPC.PrimaryCIDR.IsValid() && !vpcCIDR(e.VPC.PrimaryCIDR.Prefix) {
		return false
	}
	for _, c := range e.VPC.CIDRs {
		if c.IsValid() && !vpcCIDR(c.Prefix) {
			return false
		}
	}
	if k != len(n.VPCCIDRs) {
		return false
	}
	// Addresses and prefixes sorted by address.
	var addrs [maxMatched]netip.Addr
	a := addrs[:0]
	for _, x := range e.Addresses {
		if x.IsValid() {
			if len(a) == maxMatched {
				return sameNodeENI(specENI(e, exclude), *n)
			}
			a = append(a, x.Addr)
		}
	}
	if len(a) != len(n.Addresses) {
		return false
	}
	slices.SortFunc(a, netip.Addr.Compare)
	for i := range a {
		if string(a[i].AppendTo(buf[:0])) != n.Addresses[i] {
			return false
		}
	}
	var prefixes [maxMatched]netip.Prefix
	p := prefixes[:0]
	for _, x := range e.Prefixes {
		if x.IsValid() {
			if len(p) == maxMatched {
				return sameNodeENI(specENI(e, exclude), *n)
			}
			p = append(p, x.Prefix)
		}
	}
	if len(p) != len(n.Prefixes) {
		return false
	}
	slices.SortFunc(p, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for i := range p {
		if string(p[i].AppendTo(buf[:0])) != n.Prefixes[i] {
			return false
		}
	}
	k = 0
	for _, x := range e.IPv6Prefixes {
		if !x.IsValid() {
			continue
		}
		if k == len(n.IPv6Prefixes) || string(x.Prefix.AppendTo(buf[:0])) != n.IPv6Prefixes[k] {
			return false
		}
		k++
	}
	if k != len(n.IPv6Prefixes) {
		return false
	}
	// The tags exclude names, those alone.
	k = 0
	for key := range exclude {
		if v, ok := e.Tags[key]; ok {
			if w, ok := n.Tags[key]; !ok || w != v {
				return false
			}
			k++
		}
	}
	return k == len(n.Tags)
}

// sameNodeENIs reports whether two lists of spec.enis say the same, as
// their JSON would: an empty list or map is one left out.
func sameNodeENIs(a, b []enipamv1alpha1.NodeENI) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true // the same list
	}
	return slices.EqualFunc(a, b, sameNodeENI)
}

func sameNodeENI(a, b enipamv1alpha1.NodeENI) bool {
	return a.ID == b.ID && a.MAC == b.MAC && a.Number == b.Number && a.PrimaryIP == b.PrimaryIP &&
		a.SubnetID == b.SubnetID && a.SubnetCIDR == b.SubnetCIDR && slices.Equal(a.VPCCIDRs, b.VPCCIDRs) &&
		slices.Equal(a.Addresses, b.Addresses) && slices.Equal(a.Prefixes, b.Prefixes) &&
		slices.Equal(a.IPv6Prefixes, b.IPv6Prefixes) && maps.Equal(a.Tags, b.Tags)
}

// sameRoutingSpec reports whether two NodeRouting specs say the same, as
// their JSON would: spec.enis compared field by field, the rest (small)
// as JSON.
func sameRoutingSpec(a, b enipamv1alpha1.NodeRoutingSpec) bool {
	if !sameNodeENIs(a.ENIs, b.ENIs) {
		return false
	}
	a.ENIs, b.ENIs = nil, nil
	return sameJSON(a, b)
}

// copyRouting is a deep copy of nr but for its spec.enis, which the copy
// shares: no reconcile changes an entry of the list in place (fill makes
// a new list when it changes, and applyRouting writes the answer into a
// list of its own), and every node's reconcile keeps two copies of its
// NodeRouting.
func copyRouting(nr *enipamv1alpha1.NodeRouting) *enipamv1alpha1.NodeRouting {
	enis := nr.Spec.ENIs
	nr.Spec.ENIs = nil
	out := nr.DeepCopy()
	nr.Spec.ENIs, out.Spec.ENIs = enis, enis
	return out
}
