package routing

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Desired is the state a node should be in.
type Desired struct {
	// Links are the managed ENIs' links with the settings they need.
	Links []LinkWant
	// Routes are the routes of the ENI tables, each ENI's link route
	// before its default route (the default route's gateway must be
	// reachable when it is added).
	Routes []Route
	// Rules are the egress and ingress rules of the pool IPs.
	Rules []Rule
	// Missing are the managed ENIs whose link the kernel does not show
	// (yet); they get no routes and no rules.
	Missing []ENI
	// Problems are ENIs that cannot be routed at all, as *ENIError.
	Problems []error
}

// LinkWant is what a managed ENI's link must look like.
type LinkWant struct {
	ENI      string
	Link     Link
	MTU      int
	RPFilter int
}

// ComputeDesired derives the desired state of the node from its managed ENIs
// and the links the kernel shows. It is pure: the same inputs always give
// the same, sorted output.
func ComputeDesired(node Node, links []Link, cfg Config) Desired {
	var d Desired
	byMAC := linksByMAC(links)

	enis := slices.Clone(node.ENIs)
	slices.SortFunc(enis, func(a, b ENI) int {
		return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.ID, b.ID))
	})
	tableOf := map[int]string{}
	for _, eni := range enis {
		if eni.Number < 1 || eni.Number > MaxENINumber {
			d.Problems = append(d.Problems, &ENIError{ENI: eni.ID, Err: fmt.Errorf("%w: %d", ErrENINumber, eni.Number)})
			continue
		}
		if other, ok := tableOf[eni.Number]; ok {
			d.Problems = append(d.Problems, &ENIError{ENI: eni.ID, Err: fmt.Errorf("%w: %d (%s)", ErrENINumberConflict, eni.Number, other)})
			continue
		}
		if !eni.Gateway.Is4() {
			d.Problems = append(d.Problems, &ENIError{ENI: eni.ID, Err: ErrNoGateway})
			continue
		}
		tableOf[eni.Number] = eni.ID

		link, ok := byMAC[string(eni.MAC)]
		if !ok {
			d.Missing = append(d.Missing, eni)
			continue
		}
		d.Links = append(d.Links, LinkWant{ENI: eni.ID, Link: link, MTU: cfg.MTU, RPFilter: RPFilterLoose})
		d.Routes = append(d.Routes, eniRoutes(eni, link, cfg)...)
		d.Rules = append(d.Rules, eniRules(eni, cfg)...)
	}
	return d
}

// linksByMAC indexes links by MAC; when several share one (a bond and its
// slaves, say) the lowest index wins, so the choice is stable.
func linksByMAC(links []Link) map[string]Link {
	m := make(map[string]Link, len(links))
	for _, l := range links {
		if len(l.MAC) == 0 {
			continue
		}
		if have, ok := m[string(l.MAC)]; ok && have.Index < l.Index {
			continue
		}
		m[string(l.MAC)] = l
	}
	return m
}

func eniRoutes(eni ENI, link Link, cfg Config) []Route {
	table := Table(eni.Number)
	return []Route{
		{Table: table, Dst: netip.PrefixFrom(eni.Gateway, 32), LinkIndex: link.Index, Scope: ScopeLink, Protocol: cfg.Protocol},
		{Table: table, Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gateway: eni.Gateway, LinkIndex: link.Index, Scope: ScopeUniverse, Protocol: cfg.Protocol},
	}
}

func eniRules(eni ENI, cfg Config) []Rule {
	ips := slices.Clone(eni.IPs)
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	rules := make([]Rule, 0, 2*len(ips))
	for _, ip := range ips {
		if !ip.Is4() {
			continue
		}
		host := netip.PrefixFrom(ip, 32)
		rules = append(rules, Rule{Priority: cfg.EgressPriority, Src: host, Table: Table(eni.Number), Protocol: cfg.Protocol})
		if cfg.IngressPriority != 0 {
			rules = append(rules, Rule{Priority: cfg.IngressPriority, Dst: host, Table: MainTable, Protocol: cfg.Protocol})
		}
	}
	return rules
}
