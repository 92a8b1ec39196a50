package ciliumnode

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// ErrBadSpecENI: an entry of the NodeRouting's spec.enis holds a value
// that does not parse; the value is left out.
var ErrBadSpecENI = errors.New("invalid value in spec.enis")

// ENIs are the ENIs the agent routes: the union of the NodeRouting's
// spec.enis and the CiliumNode's status.eni.enis. The spec is the
// operator's authoritative list; the status is Cilium's field, which an
// operator of an earlier version alone fills, and where the current one
// keeps a copy only where something reads it. So an ENI both
// list is taken from the spec, whole; one only the status lists is taken
// from there (an earlier operator's, or a copy that lags). Values of the
// spec that do not parse are left out and reported as *Problem.
func ENIs(cn *ciliumv2.CiliumNode, spec *enipamv1alpha1.NodeRoutingSpec) (map[string]awstypes.ENI, []error) {
	out := maps.Clone(cn.Status.ENI.ENIs)
	if out == nil {
		out = map[string]awstypes.ENI{}
	}
	var problems []error
	for i := range spec.ENIs {
		e, bad := FromSpec(&spec.ENIs[i])
		out[e.ID] = e
		for _, v := range bad {
			problems = append(problems, &Problem{Item: e.ID, Err: fmt.Errorf("%w: %q", ErrBadSpecENI, v)})
		}
	}
	return out, problems
}

// FromSpec is a spec.enis entry as Cilium's ENI type, the one
// status.eni.enis holds, with the values that do not parse left out and
// returned. The VPC's first CIDR is its primary one, as the operator
// writes them.
func FromSpec(n *enipamv1alpha1.NodeENI) (awstypes.ENI, []string) {
	var bad []string
	addr := func(s string) (netip.Addr, bool) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			bad = append(bad, s)
			return netip.Addr{}, false
		}
		return a, true
	}
	prefix := func(s string) (netip.Prefix, bool) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			bad = append(bad, s)
			return netip.Prefix{}, false
		}
		return p, true
	}
	e := awstypes.ENI{ID: n.ID, MAC: n.MAC, Number: int(n.Number), Tags: maps.Clone(n.Tags)}
	if n.PrimaryIP != "" {
		if a, ok := addr(n.PrimaryIP); ok {
			e.IP = ciliumip.AddrFrom(a)
		}
	}
	e.Subnet.ID = n.SubnetID
	if n.SubnetCIDR != "" {
		if p, ok := prefix(n.SubnetCIDR); ok {
			e.Subnet.CIDR = ciliumip.PrefixFrom(p)
		}
	}
	for i, s := range n.VPCCIDRs {
		p, ok := prefix(s)
		if !ok {
			continue
		}
		if i == 0 {
			e.VPC.PrimaryCIDR = ciliumip.PrefixFrom(p)
		}
		e.VPC.CIDRs = append(e.VPC.CIDRs, ciliumip.PrefixFrom(p))
	}
	for _, s := range n.Addresses {
		if a, ok := addr(s); ok {
			e.Addresses = append(e.Addresses, ciliumip.AddrFrom(a))
		}
	}
	for _, s := range n.Prefixes {
		if p, ok := prefix(s); ok {
			e.Prefixes = append(e.Prefixes, ciliumip.PrefixFrom(p))
		}
	}
	for _, s := range n.IPv6Prefixes {
		if p, ok := prefix(s); ok {
			e.IPv6Prefixes = append(e.IPv6Prefixes, ciliumip.PrefixFrom(p))
		}
	}
	return e, bad
}
