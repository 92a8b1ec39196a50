package routing

import (
	"fmt"
	"net"
	"net/netip"
)

// Node is what the agent must route on one node.
type Node struct {
	// ENIs are the managed ENIs, draining ones included, in any order;
	// ComputeDesired sorts them.
	// The primary ENI (device 0) is one of them when the node's policy
	// puts pod addresses on it.
	ENIs []ENI
	// Retain are addresses still in use on the node whose ENI cannot be
	// routed right now (gone from the ENI list for a moment, its link
	// missing, its data malformed). Their rules, and the route tables those
	// rules point at, are left exactly as the kernel has them: routing is
	// never taken from an address a pod may hold.
	Retain []netip.Prefix
	// PrimaryMAC is the MAC of the instance's primary ENI, managed or not;
	// the connmark rules match its link. Empty when unknown.
	PrimaryMAC net.HardwareAddr
}

// ENI is one managed ENI.
type ENI struct {
	// ID is the EC2 ENI ID, used in logs, events, metrics and the report.
	ID string
	// MAC identifies the ENI's link in the kernel.
	MAC net.HardwareAddr
	// Number is the ENI's device index; its route table is TableOffset+Number.
	// Device 0 is the primary ENI, whose link is the node's own: it gets a
	// table and rules but its link settings are never changed.
	Number int
	// Gateway is the subnet's first host address, the next hop of the
	// ENI's default route.
	Gateway netip.Addr
	// IPs are the addresses living on the ENI that pods may use, IPv4 and
	// IPv6; each gets its rules, unless one of Prefixes covers it.
	IPs []netip.Addr
	// Prefixes are delegated prefixes of the ENI (IPv4 /28s, IPv6 /80s);
	// each gets one set of rules standing for every address inside it.
	// The IPv6 addresses and prefixes of the primary ENI get no rules
	// and no table: the main table routes them (see the package doc).
	Prefixes []netip.Prefix
	// VPCCIDRs are the CIDRs of the ENI's VPC: the destinations of its
	// egress rules in EgressVPC mode.
	VPCCIDRs []netip.Prefix
	// Draining: the node's policy no longer selects the ENI, but addresses
	// pods may hold still live on it (IPs and Prefixes are those alone).
	// It is routed as any other ENI (link, table, rules) until they leave;
	// while its link is missing its addresses are retained, and the node
	// is not held unready for it.
	Draining bool
}

// Primary reports whether the ENI is the instance's primary ENI.
func (e ENI) Primary() bool { return e.Number == 0 }

// Link is a network interface as the kernel shows it.
type Link struct {
	Index int
	Name  string
	MAC   net.HardwareAddr
	MTU   int
	Up    bool
	// RPFilter is the link's net.ipv4.conf.<name>.rp_filter, or -1 when it
	// is unknown (Host.Links does not read it; the Converger does, for the
	// links it manages).
	RPFilter int
}

// Rule is a policy routing rule. An invalid Src or Dst means "all"; a
// zero Mask means no fwmark match.
type Rule struct {
	// IPv6 puts the rule in the IPv6 rule list instead of the IPv4 one;
	// a valid Src or Dst must be of that family. The kernel keeps the two
	// lists apart, so a rule without addresses (the fwmark rule) is told
	// from its twin of the other family by this field alone.
	IPv6     bool
	Priority int
	Src      netip.Prefix
	Dst      netip.Prefix
	Mark     uint32
	Mask     uint32
	Table    int
	Protocol int
}

// String renders the rule the way `ip rule` does, for logs and errors.
func (r Rule) String() string {
	from, to := "all", "all"
	if r.Src.IsValid() {
		from = r.Src.String()
	}
	if r.Dst.IsValid() {
		to = r.Dst.String()
	}
	mark := ""
	if r.Mask != 0 {
		mark = fmt.Sprintf(" fwmark %#x/%#x", r.Mark, r.Mask)
	}
	family := ""
	if r.IPv6 {
		family = "-6 "
	}
	return fmt.Sprintf("%s%d: from %s to %s%s lookup %d proto %d", family, r.Priority, from, to, mark, r.Table, r.Protocol)
}

// Scope values of a Route, as the kernel numbers them.
const (
	ScopeUniverse = 0
	ScopeLink     = 253
)

// Route is a route in one table; Dst is always valid and says the family
// (0.0.0.0/0 or ::/0 for a default route). An invalid Gateway means a
// directly connected route.
type Route struct {
	Table     int
	Dst       netip.Prefix
	Gateway   netip.Addr
	LinkIndex int
	Scope     int
	Protocol  int
	// Metric is the route's priority; enipam's IPv4 routes use 0, its
	// IPv6 routes IPv6DefaultMetric (the kernel's default). It matters
	// only to delete exactly the route that was read.
	Metric int
}

// String renders the route the way `ip route` does, for logs and errors.
func (r Route) String() string {
	s := r.Dst.String()
	if r.Gateway.IsValid() {
		s += " via " + r.Gateway.String()
	}
	return fmt.Sprintf("%s ifindex %d table %d scope %d proto %d metric %d", s, r.LinkIndex, r.Table, r.Scope, r.Protocol, r.Metric)
}

// key identifies a route within the kernel's tables the way enipam's
// desired state does: one route per destination per table.
type routeKey struct {
	table int
	dst   netip.Prefix
}

func (r Route) key() routeKey { return routeKey{table: r.Table, dst: r.Dst} }

// sameAs reports whether an actual route already is the desired route r.
func (r Route) sameAs(actual Route) bool {
	return r.Table == actual.Table && r.Dst == actual.Dst && r.Gateway == actual.Gateway &&
		r.LinkIndex == actual.LinkIndex && r.Scope == actual.Scope &&
		r.Protocol == actual.Protocol && r.Metric == actual.Metric
}
