package routing

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
)

// Defaults, following Cilium's own ENI mode (pkg/datapath/linux/linux_defaults)
// so a node looks the same to people who know Cilium.
const (
	// TableOffset: an ENI with device number n routes through table
	// TableOffset+n (RouteTableInterfacesOffset); the primary ENI's is 10.
	TableOffset = 10
	// MaxENINumber bounds the device numbers, and so the tables, enipam owns:
	// tables TableOffset through TableOffset+MaxENINumber.
	MaxENINumber = 127
	// MainTable is the kernel's main routing table.
	MainTable = 254
	// DefaultProtocol is the routing protocol number enipam stamps on every
	// route and rule it creates; it is how enipam recognises its own. It is
	// unassigned in iproute2's rt_protos.
	DefaultProtocol = 213
	// DefaultMTU is the MTU of AWS ENIs (jumbo frames inside a VPC).
	DefaultMTU = 9001
	// DefaultEgressPriority is Cilium's egress rule priority (RulePriorityEgressv2).
	DefaultEgressPriority = 111
	// DefaultIngressPriority is Cilium's ingress rule priority (RulePriorityIngress).
	DefaultIngressPriority = 20
	// IPv6DefaultMetric is the metric the kernel gives an IPv6 route
	// added without one (IP6_RT_PRIO_USER); enipam's IPv6 routes carry it.
	IPv6DefaultMetric = 1024
	// RPFilterLoose is the rp_filter value set on secondary ENI links:
	// replies leave through the ENI that owns the source IP, not the one
	// the kernel would pick for the reverse path.
	RPFilterLoose = 2
)

// EgressMode says which traffic of a pod address leaves by its ENI.
type EgressMode string

const (
	// EgressAll: everything from a pod address leaves by its ENI's table
	// (`from <ip> lookup <table>`); the VPC's NAT gateway or an EIP does
	// the rest. Nothing on the node may masquerade pod traffic.
	EgressAll EgressMode = "all"
	// EgressVPC: only traffic to the VPC's CIDRs leaves by the ENI
	// (`from <ip> to <cidr> lookup <table>`); the rest follows the main
	// table out of the primary interface, where Cilium masquerades it to
	// the node's address. This is what Cilium's ENI mode does with
	// masquerading on (linuxrouting's RoutingInfo.Configure).
	EgressVPC EgressMode = "vpc"
)

// Config is how the node is laid out.
type Config struct {
	// MTU is set on every managed secondary ENI link.
	MTU int
	// EgressPriority is the priority of the `from <ip> lookup <table>` rules.
	EgressPriority int
	// IngressPriority is the priority of the `to <ip> lookup main` rules;
	// 0 installs none.
	IngressPriority int
	// Egress says which traffic of pod addresses uses their ENI's table.
	Egress EgressMode
	// Connmark installs the NodePort return path (see Connmark) and its
	// `fwmark` rule at ConnmarkPriority.
	Connmark bool
	// ConnmarkMark is the single bit of the connection and packet marks.
	ConnmarkMark uint32
	// Protocol marks what enipam creates; DefaultProtocol unless tests need
	// two owners side by side.
	Protocol int
}

// DefaultConfig returns the configuration Cilium's ENI mode would use.
func DefaultConfig() Config {
	return Config{
		MTU:             DefaultMTU,
		EgressPriority:  DefaultEgressPriority,
		IngressPriority: DefaultIngressPriority,
		Egress:          EgressAll,
		Connmark:        true,
		ConnmarkMark:    DefaultConnmarkMark,
		Protocol:        DefaultProtocol,
	}
}

// ConnmarkPriority is the priority of the `fwmark <mark> lookup main`
// rule: two below the egress rules, which is Cilium's RulePriorityNodeport
// (109) with the default egress priority.
func (c Config) ConnmarkPriority() int { return c.EgressPriority - 2 }

// Validate reports a configuration that would produce rules the kernel
// rejects or that would shadow the local table.
func (c Config) Validate() error {
	var errs []error
	if c.MTU < 68 || c.MTU > 65535 {
		errs = append(errs, fmt.Errorf("MTU %d out of range [68, 65535]", c.MTU))
	}
	// Priority 0 is the local table's rule; 32766 and 32767 are main and default.
	if c.EgressPriority < 1 || c.EgressPriority > 32765 {
		errs = append(errs, fmt.Errorf("egress rule priority %d out of range [1, 32765]", c.EgressPriority))
	}
	if c.IngressPriority < 0 || c.IngressPriority > 32765 {
		errs = append(errs, fmt.Errorf("ingress rule priority %d out of range [0 (off), 32765]", c.IngressPriority))
	}
	if c.IngressPriority != 0 && c.IngressPriority >= c.EgressPriority {
		errs = append(errs, fmt.Errorf("ingress rule priority %d must be evaluated before the egress priority %d (a lower number)", c.IngressPriority, c.EgressPriority))
	}
	if c.Egress != EgressAll && c.Egress != EgressVPC {
		errs = append(errs, fmt.Errorf("egress mode %q: want %q or %q", c.Egress, EgressAll, EgressVPC))
	}
	if c.Connmark {
		if bits.OnesCount32(c.ConnmarkMark) != 1 {
			errs = append(errs, fmt.Errorf("connmark mark %#x must be a single bit", c.ConnmarkMark))
		}
		if p := c.ConnmarkPriority(); p < 1 || p <= c.IngressPriority {
			errs = append(errs, fmt.Errorf("the connmark rule's priority (egress priority - 2 = %d) must be above 0 and the ingress priority %d", p, c.IngressPriority))
		}
	}
	if c.Protocol < 1 || c.Protocol > 255 {
		errs = append(errs, fmt.Errorf("route protocol %d out of range [1, 255]", c.Protocol))
	}
	return errors.Join(errs...)
}

// Table returns the route table of the ENI with device number n.
func Table(n int) int { return TableOffset + n }

// IPv6Gateway is the VPC router's IPv6 address on every subnet: the
// next hop of an ENI table's IPv6 default route. AWS answers at the
// link-local fe80:ec2::1 on every subnet with an IPv6 CIDR (besides the
// EUI-64 link-local address a router advertisement shows, which differs
// per subnet and is known only after the RA arrived). The VPC CNI
// (networkutils' GetIPv6Gateway) and Cilium's ENI mode (ipam's
// allocationResult) use the same fixed address, so nothing waits for an
// RA and the route is the same on every node. A link-local next hop
// needs its device, which the default route names; the host route to it
// mirrors the IPv4 table.
func IPv6Gateway() netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 0x0e, 0xc2, 15: 1})
}
