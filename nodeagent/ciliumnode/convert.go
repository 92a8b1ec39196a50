package ciliumnode

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/nodeagent/routing"
)

// Reasons a part of the CiliumNode is left unrouted; ToNode reports them
// wrapped in *Problem.
var (
	// ErrBadMAC: status.eni.enis[id].mac does not parse.
	ErrBadMAC = errors.New("invalid MAC")
	// ErrBadSubnet: the ENI's subnet CIDR is missing, not IPv4, or too
	// small to have a gateway.
	ErrBadSubnet = errors.New("invalid subnet CIDR")
	// ErrBadPoolIP: a spec.ipam.pool key is not an IP address.
	ErrBadPoolIP = errors.New("invalid pool IP")
	// ErrUnknownENI: a pool IP names as resource an ENI that
	// status.eni.enis does not hold. The operator writes status before
	// spec, so this is a bug or a hand edit; the IP gets no rule.
	ErrUnknownENI = errors.New("pool IP on an ENI absent from status.eni.enis")
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

// Managed reports whether enipam's agent routes the ENI: never the primary
// (device number 0), never one excluded by spec.eni (first interface index,
// exclude-interface-tags), exactly as the operator decides.
func Managed(spec awstypes.ENISpec, eni *awstypes.ENI) bool {
	return eni.Number > 0 && !eni.IsExcludedBySpec(spec)
}

// ToNode extracts the managed ENIs of cn with their gateways and pool IPs.
// Pool IPs on unmanaged ENIs (the primary, an excluded one) are skipped
// silently: they need no policy routing. Anything malformed is skipped and
// reported as a *Problem; the rest of the node is still returned.
func ToNode(cn *ciliumv2.CiliumNode) (routing.Node, []error) {
	var node routing.Node
	var problems []error
	index := map[string]int{} // ENI ID -> position in node.ENIs
	known := map[string]bool{}

	ids := make([]string, 0, len(cn.Status.ENI.ENIs))
	for id := range cn.Status.ENI.ENIs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		eni := cn.Status.ENI.ENIs[id]
		known[id] = true
		if !Managed(cn.Spec.ENI, &eni) {
			continue
		}
		mac, err := net.ParseMAC(eni.MAC)
		if err != nil || len(mac) != 6 {
			problems = append(problems, &Problem{Item: id, Err: fmt.Errorf("%w %q", ErrBadMAC, eni.MAC)})
			continue
		}
		gw, err := Gateway(eni.Subnet.CIDR.Prefix)
		if err != nil {
			problems = append(problems, &Problem{Item: id, Err: err})
			continue
		}
		index[id] = len(node.ENIs)
		node.ENIs = append(node.ENIs, routing.ENI{ID: id, MAC: mac, Number: eni.Number, Gateway: gw})
	}

	ips := make([]string, 0, len(cn.Spec.IPAM.Pool))
	for ip := range cn.Spec.IPAM.Pool {
		ips = append(ips, ip)
	}
	slices.Sort(ips)
	for _, s := range ips {
		resource := cn.Spec.IPAM.Pool[s].Resource
		i, ok := index[resource]
		if !ok {
			if !known[resource] {
				problems = append(problems, &Problem{Item: s, Err: fmt.Errorf("%w (%q)", ErrUnknownENI, resource)})
			}
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil {
			problems = append(problems, &Problem{Item: s, Err: ErrBadPoolIP})
			continue
		}
		node.ENIs[i].IPs = append(node.ENIs[i].IPs, ip.Unmap())
	}
	return node, problems
}

// Gateway returns the VPC router's address of an IPv4 subnet: its first
// host address (10.0.2.0/24 -> 10.0.2.1), as AWS reserves it.
func Gateway(subnet netip.Prefix) (netip.Addr, error) {
	if !subnet.IsValid() || !subnet.Addr().Is4() || subnet.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("%w %q", ErrBadSubnet, subnet)
	}
	return subnet.Masked().Addr().Next(), nil
}
