package routing

import (
	"fmt"
	"net"
	"net/netip"
)

// Node is what the agent must route on one node: the ENIs enipam manages
// there (never the primary ENI, never an excluded one), each with the pool
// IPs that live on it.
type Node struct {
	// ENIs are the managed ENIs, in any order; Desired sorts them.
	ENIs []ENI
}

// ENI is one managed secondary ENI.
type ENI struct {
	// ID is the EC2 ENI ID, used in logs, events and metrics.
	ID string
	// MAC identifies the ENI's link in the kernel.
	MAC net.HardwareAddr
	// Number is the ENI's device index; its route table is TableOffset+Number.
	Number int
	// Gateway is the subnet's first host address, the next hop of the
	// ENI's default route.
	Gateway netip.Addr
	// IPs are the pool IPs whose resource is this ENI; each gets a rule.
	IPs []netip.Addr
}

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

// Rule is an IPv4 policy routing rule. An invalid Src or Dst means "all".
type Rule struct {
	Priority int
	Src      netip.Prefix
	Dst      netip.Prefix
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
	return fmt.Sprintf("%d: from %s to %s lookup %d proto %d", r.Priority, from, to, r.Table, r.Protocol)
}

// Scope values of a Route, as the kernel numbers them.
const (
	ScopeUniverse = 0
	ScopeLink     = 253
)

// Route is an IPv4 route in one table. An invalid Gateway means a directly
// connected route.
type Route struct {
	Table     int
	Dst       netip.Prefix
	Gateway   netip.Addr
	LinkIndex int
	Scope     int
	Protocol  int
	// Metric is the route's priority; enipam's routes use 0. It matters
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
