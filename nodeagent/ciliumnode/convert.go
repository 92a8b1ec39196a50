package ciliumnode

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/routing"
)

// Reasons a part of the CiliumNode is left unrouted; ToNode reports them
// wrapped in *Problem.
var (
	// ErrBadMAC: the listed ENI's MAC does not parse.
	ErrBadMAC = errors.New("invalid MAC")
	// ErrBadSubnet: the ENI's subnet CIDR is missing, not IPv4, or too
	// small to have a gateway.
	ErrBadSubnet = errors.New("invalid subnet CIDR")
	// ErrBadPoolIP: a spec.ipam.pool key is not an IP address.
	ErrBadPoolIP = errors.New("invalid pool IP")
)

// Problem is one part of the CiliumNode that could not be used.
type Problem struct {
	// Item is the ENI ID or pool IP concerned.
	Item string
	Err  error
}

func (p *Problem) Error() string { return fmt.Sprintf("%s: %v", p.Item, p.Err) }

// Unwrap lets errors.Is see the reason.
func (p *Problem) Unwrap() error { return p.Err }

// Managed reports whether enipam's agent routes the ENI under the node's
// effective policy: its device number is at least the first interface
// index and it does not carry all of the exclude tags. It is Cilium's own
// ENI.IsExcludedBySpec, fed with the values the operator resolved into
// the NodeRouting spec, so agent and operator cannot disagree.
func Managed(spec *enipamv1alpha1.NodeRoutingSpec, eni *awstypes.ENI) bool {
	first := int(spec.FirstInterfaceIndex)
	return !eni.IsExcludedBySpec(awstypes.ENISpec{FirstInterfaceIndex: &first, ExcludeInterfaceTags: spec.ExcludeInterfaceTags})
}

// Input is what ToNode read, besides the node, for logs.
type Input struct {
	// Retained maps each retained address to the ENI the pool names for
	// it: in use, but its ENI is listed neither in spec.enis nor in
	// status.eni.enis.
	Retained map[netip.Prefix]string
	// Draining maps each ENI the policy no longer wants but that still
	// holds addresses of the node to those addresses: they keep their
	// routing until they leave the pool.
	Draining map[string][]netip.Addr
	// Released counts the addresses left out because the release
	// handshake marked them released.
	Released int
}

// ToNode extracts what the agent must route from cn under spec, the
// NodeRouting's spec. The node holds an address while it is in the pool
// (spec.ipam.pool) or in use (status.ipam.used, with the ENI Cilium took
// it from) and not marked released by status.ipam.release-ips: Cilium
// hands out any pool address that is not in the handshake, and records
// its use late, so a held address may carry a pod at any moment.
//
// The ENIs are those the NodeRouting's spec.enis lists, and those only
// the CiliumNode's status.eni.enis lists (ENIs: an earlier operator
// writes the status alone). Per managed ENI, the addresses to route are
// its listed addresses, its IPv4 and IPv6 prefixes (prefixes,
// ipv6-prefixes) and the held addresses it is named for, of both
// families,
// minus the released ones (a prefix holding a released address is routed
// address by address). A held address names one ENI: it wins over another
// ENI's status addresses. An ENI the spec does not select (device number
// below the first interface index, or excluded by tags) that still holds
// addresses is draining: those addresses alone keep their routing, the
// policy change applies to new addresses only. Held addresses whose ENI
// is listed nowhere are retained: their existing rules
// stay. Anything malformed is skipped and reported as a *Problem; the
// rest of the node is still returned.
func ToNode(cn *ciliumv2.CiliumNode, spec *enipamv1alpha1.NodeRoutingSpec) (routing.Node, Input, []error) {
	var node routing.Node
	in := Input{Retained: map[netip.Prefix]string{}, Draining: map[string][]netip.Addr{}}
	enis, problems := ENIs(cn, spec)

	released := map[netip.Addr]bool{}
	for s, state := range cn.Status.IPAM.ReleaseIPs {
		if ip, err := netip.ParseAddr(s); err == nil && state == ipamoption.IPAMReleased {
			released[ip.Unmap()] = true
		}
	}
	// The addresses the node holds, by the ENI named for each: the pool's
	// entries, then addresses in use that the pool lacks.
	held := map[netip.Addr]string{}
	for _, s := range slices.Sorted(maps.Keys(cn.Spec.IPAM.Pool)) {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			problems = append(problems, &Problem{Item: s, Err: ErrBadPoolIP})
			continue
		}
		if ip = ip.Unmap(); released[ip] {
			in.Released++
			continue
		}
		held[ip] = cn.Spec.IPAM.Pool[s].Resource
	}
	for s, use := range cn.Status.IPAM.Used {
		ip, err := netip.ParseAddr(s)
		if err != nil || use.Resource == "" {
			continue // Cilium's own record; nothing to route by
		}
		ip = ip.Unmap()
		if _, pooled := held[ip]; !pooled && !released[ip] {
			held[ip] = use.Resource
		}
	}

	known := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(enis)) {
		eni := enis[id]
		known[id] = true
		if eni.Number == 0 {
			if mac, err := net.ParseMAC(eni.MAC); err == nil && len(mac) == 6 {
				node.PrimaryMAC = mac
			}
		}
		managed := Managed(spec, &eni)
		window := primaryWindow(&eni)
		if !managed && !holdsAny(id, held) && len(window) == 0 {
			continue
		}
		e, err := toENI(id, &eni)
		if err != nil {
			problems = append(problems, &Problem{Item: id, Err: err})
			// Nothing of the ENI can be trusted but its addresses: keep
			// whatever routing they have.
			for ip, resource := range held {
				if resource == id {
					in.Retained[netip.PrefixFrom(ip, ip.BitLen())] = id
				}
			}
			continue
		}
		if managed {
			e.IPs, e.Prefixes = addresses(id, &eni, held, released)
		} else {
			e.IPs, e.Prefixes = heldAddresses(id, &eni, held)
			// The primary ENI's /80s are the node's IPv6 window, routed
			// by the main table whatever the spec selects: they stand
			// for the window's addresses; the ENI drains only if it
			// holds other addresses.
			e.IPs = slices.DeleteFunc(e.IPs, func(ip netip.Addr) bool {
				return slices.ContainsFunc(window, func(p netip.Prefix) bool { return p.Contains(ip) })
			})
			e.Draining = len(e.IPs)+len(e.Prefixes) > 0
			e.Prefixes = append(e.Prefixes, window...)
		}
		if e.Primary() && eni.IP.IsValid() {
			// The primary ENI's own address is the node's: never a pod's.
			e.IPs = slices.DeleteFunc(e.IPs, func(ip netip.Addr) bool { return ip == eni.IP.Addr.Unmap() })
		}
		if e.Draining {
			in.Draining[id] = e.IPs
		}
		node.ENIs = append(node.ENIs, e)
	}
	for ip, resource := range held {
		if !known[resource] {
			in.Retained[netip.PrefixFrom(ip, ip.BitLen())] = resource
		}
	}
	node.Retain = slices.SortedFunc(maps.Keys(in.Retained), func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return node, in, problems
}

// toENI reads the identity of a managed ENI: MAC, number, gateway and VPC.
func toENI(id string, eni *awstypes.ENI) (routing.ENI, error) {
	mac, err := net.ParseMAC(eni.MAC)
	if err != nil || len(mac) != 6 {
		return routing.ENI{}, fmt.Errorf("%w %q", ErrBadMAC, eni.MAC)
	}
	gw, err := Gateway(eni.Subnet.CIDR.Prefix)
	if err != nil {
		return routing.ENI{}, err
	}
	e := routing.ENI{ID: id, MAC: mac, Number: eni.Number, Gateway: gw}
	if eni.VPC.PrimaryCIDR.IsValid() {
		e.VPCCIDRs = append(e.VPCCIDRs, eni.VPC.PrimaryCIDR.Prefix)
	}
	for _, c := range eni.VPC.CIDRs {
		if c.IsValid() {
			e.VPCCIDRs = append(e.VPCCIDRs, c.Prefix)
		}
	}
	return e, nil
}

// addresses are a managed ENI's addresses and prefixes to route: its
// status addresses that no other ENI holds, its prefixes, and the
// addresses held on it; released addresses never. An IPv4 prefix
// holding a released address is routed address by address, that one
// left out; an IPv6 prefix (ipv6-prefixes, a /80) is routed whole: EC2
// keeps it on the ENI until none of its addresses is pooled, and 2^48
// addresses cannot be listed one by one.
func addresses(id string, eni *awstypes.ENI, held map[netip.Addr]string, released map[netip.Addr]bool) ([]netip.Addr, []netip.Prefix) {
	var ips []netip.Addr
	for _, a := range eni.Addresses {
		ip := a.Addr.Unmap()
		if !a.IsValid() || released[ip] {
			continue
		}
		if owner, ok := held[ip]; ok && owner != id {
			continue
		}
		ips = append(ips, ip)
	}
	for ip, resource := range held {
		if resource == id {
			ips = append(ips, ip)
		}
	}
	var prefixes []netip.Prefix
	for _, p := range slices.Concat(eni.Prefixes, eni.IPv6Prefixes) {
		if !p.IsValid() {
			continue
		}
		pfx := p.Masked()
		if pfx.Addr().Is6() {
			// An IPv6 prefix stays whole on its ENI in EC2 until no address
			// of it is pooled, released ones included: routed whole.
			prefixes = append(prefixes, pfx)
			continue
		}
		if !containsAny(pfx, released) {
			prefixes = append(prefixes, pfx)
			continue
		}
		if !pfx.Addr().Is4() || pfx.Bits() < maxSplitBits {
			continue
		}
		for ip := pfx.Addr(); pfx.Contains(ip); ip = ip.Next() {
			if !released[ip] {
				ips = append(ips, ip)
			}
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	return slices.Compact(ips), prefixes
}

// heldAddresses are what a draining ENI routes: the addresses held on it
// (listed alone, they are never offered to the operator for the pool),
// and those of its prefixes whose every address is held, which keep the
// prefix's one set of rules. The ENI's other addresses get none.
func heldAddresses(id string, eni *awstypes.ENI, held map[netip.Addr]string) ([]netip.Addr, []netip.Prefix) {
	var ips []netip.Addr
	for ip, resource := range held {
		if resource == id {
			ips = append(ips, ip)
		}
	}
	var prefixes []netip.Prefix
	for _, p := range eni.Prefixes {
		if !p.IsValid() || !p.Addr().Is4() || p.Bits() < maxSplitBits {
			continue
		}
		pfx, whole := p.Masked(), true
		for ip := pfx.Addr(); pfx.Contains(ip) && whole; ip = ip.Next() {
			whole = held[ip] == id
		}
		if whole {
			prefixes = append(prefixes, pfx)
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	return ips, prefixes
}

// primaryWindow returns the IPv6 /80s of the instance's primary ENI
// (none for another ENI): the node's IPv6 window, which the main table
// routes with no rule of enipam's.
func primaryWindow(eni *awstypes.ENI) []netip.Prefix {
	if eni.Number != 0 {
		return nil
	}
	var out []netip.Prefix
	for _, p := range eni.IPv6Prefixes {
		if p.IsValid() && p.Addr().Is6() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// maxSplitBits bounds the prefixes split into addresses around a released
// one; EC2 delegates /28s.
const maxSplitBits = 24

// holdsAny reports whether any held address names the ENI id.
func holdsAny(id string, held map[netip.Addr]string) bool {
	for _, resource := range held {
		if resource == id {
			return true
		}
	}
	return false
}

func containsAny(p netip.Prefix, ips map[netip.Addr]bool) bool {
	for ip := range ips {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Gateway returns the VPC router's address of an IPv4 subnet: its first
// host address (10.0.2.0/24 -> 10.0.2.1), as AWS reserves it.
func Gateway(subnet netip.Prefix) (netip.Addr, error) {
	if !subnet.IsValid() || !subnet.Addr().Is4() || subnet.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("%w %q", ErrBadSubnet, subnet)
	}
	return subnet.Masked().Addr().Next(), nil
}
