package routing

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// Desired is the state a node should be in.
type Desired struct {
	// ENIs are the managed ENIs whose link the kernel shows, with what
	// they route: the report's candidates.
	ENIs []ENIWant
	// Links are the managed secondary ENIs' links with the settings they
	// need, and, with connmark on, the primary ENI's link, whose rp_filter
	// alone may be loosened (LinkWant.LoosenOnly).
	Links []LinkWant
	// RPFilterAll is net.ipv4.conf.all.rp_filter, which the kernel applies
	// on top of each link's own (the stricter wins); -1 when unknown. The
	// Converger fills it in when a link is LoosenOnly.
	RPFilterAll int
	// Routes are the routes of the ENI tables, each ENI's link route
	// before its default route (the default route's gateway must be
	// reachable when it is added).
	Routes []Route
	// Rules are the egress and ingress rules of the ENIs' addresses and
	// prefixes, and the connmark rule.
	Rules []Rule
	// Connmark is the connmark table to have (nil: none), unless
	// KeepConnmark says to leave whatever is there.
	Connmark     *Connmark
	KeepConnmark bool
	// Retain are the addresses whose rules, and the tables those rules
	// use, stay as they are: Node.Retain and the addresses of the ENIs
	// that are missing or cannot be routed.
	Retain []netip.Prefix
	// Missing are the managed ENIs whose link the kernel does not show
	// (yet), draining ones aside; their addresses are retained.
	Missing []ENI
	// Problems are ENIs that cannot be routed at all (*ENIError), and
	// ErrNoPrimaryLink.
	Problems []error
}

// ENIWant is one ENI to route: its link, its table, and the addresses
// and prefixes that get rules.
type ENIWant struct {
	ENI   ENI
	Link  Link
	Table int
	// IPs are the addresses with rules of their own, sorted; addresses
	// inside Prefixes are not repeated here.
	IPs []netip.Addr
	// Prefixes are the prefixes with rules, sorted.
	Prefixes []netip.Prefix
}

// LinkWant is what a managed ENI's link must look like.
type LinkWant struct {
	ENI      string
	Link     Link
	MTU      int
	RPFilter int
	// LoosenOnly: change nothing on the link but a strict rp_filter, which
	// becomes RPFilter. It is the primary ENI's link under connmark: after
	// kube-proxy's DNAT a NodePort request's reverse path is the pod
	// address's ENI table, so strict checking drops it on the primary
	// interface. Cilium's ENI mode sets it to loose for the same reason
	// (loader's addIPv4ENIRules); enipam never tightens it back.
	LoosenOnly bool
}

// ComputeDesired derives the desired state of the node from its managed ENIs
// and the links the kernel shows. It is pure: the same inputs always give
// the same, sorted output.
func ComputeDesired(node Node, links []Link, cfg Config) Desired {
	d := Desired{Retain: slices.Clone(node.Retain), RPFilterAll: -1}
	byMAC := linksByMAC(links)

	enis := slices.Clone(node.ENIs)
	slices.SortFunc(enis, func(a, b ENI) int {
		return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.ID, b.ID))
	})
	tableOf := map[int]string{}
	for _, eni := range enis {
		if err := checkENI(eni, tableOf, cfg); err != nil {
			d.Problems = append(d.Problems, &ENIError{ENI: eni.ID, Err: err})
			d.Retain = append(d.Retain, addresses(eni)...)
			continue
		}
		tableOf[eni.Number] = eni.ID

		link, ok := byMAC[string(eni.MAC)]
		if !ok {
			if !eni.Draining {
				d.Missing = append(d.Missing, eni)
			}
			d.Retain = append(d.Retain, addresses(eni)...)
			continue
		}
		w := ENIWant{ENI: eni, Link: link, Table: Table(eni.Number)}
		w.IPs, w.Prefixes = routedAddresses(eni)
		d.ENIs = append(d.ENIs, w)
		if !eni.Primary() {
			d.Links = append(d.Links, LinkWant{ENI: eni.ID, Link: link, MTU: cfg.MTU, RPFilter: RPFilterLoose})
		}
		d.Routes = append(d.Routes, eniRoutes(w, cfg)...)
		d.Rules = append(d.Rules, w.rules(cfg)...)
	}

	switch {
	case !cfg.Connmark:
	case len(node.PrimaryMAC) == 0:
		d.KeepConnmark = true
	default:
		if l, ok := byMAC[string(node.PrimaryMAC)]; ok {
			d.Connmark = &Connmark{Primary: l.Name, Mark: cfg.ConnmarkMark}
			d.Links = append(d.Links, LinkWant{ENI: primaryID(node), Link: l, RPFilter: RPFilterLoose, LoosenOnly: true})
		} else {
			d.KeepConnmark = true
			d.Problems = append(d.Problems, fmt.Errorf("%w (MAC %s)", ErrNoPrimaryLink, node.PrimaryMAC))
		}
	}
	if cfg.Connmark {
		d.Rules = append(d.Rules, Rule{Priority: cfg.ConnmarkPriority(), Mark: cfg.ConnmarkMark, Mask: cfg.ConnmarkMark, Table: MainTable, Protocol: cfg.Protocol})
	}
	return d
}

// primaryID is the primary ENI's ID when it is managed, for logs.
func primaryID(node Node) string {
	for _, e := range node.ENIs {
		if e.Primary() {
			return e.ID
		}
	}
	return "primary"
}

// checkENI says why an ENI cannot be routed, or nil.
func checkENI(eni ENI, tableOf map[int]string, cfg Config) error {
	switch {
	case eni.Number < 0 || eni.Number > MaxENINumber:
		return fmt.Errorf("%w: %d", ErrENINumber, eni.Number)
	case tableOf[eni.Number] != "":
		return fmt.Errorf("%w: %d (%s)", ErrENINumberConflict, eni.Number, tableOf[eni.Number])
	case !eni.Gateway.Is4():
		return ErrNoGateway
	case cfg.Egress == EgressVPC && len(vpcDestinations(eni.VPCCIDRs)) == 0:
		return ErrNoVPCCIDR
	}
	return nil
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

// routedAddresses returns the ENI's addresses and prefixes that get
// rules (IPv4 first, then IPv6, each sorted) without duplicates; an
// address inside one of the prefixes is left to the prefix's rules.
func routedAddresses(eni ENI) ([]netip.Addr, []netip.Prefix) {
	var prefixes []netip.Prefix
	for _, p := range eni.Prefixes {
		if p.IsValid() {
			prefixes = append(prefixes, p.Masked())
		}
	}
	prefixes = coalesce(prefixes)
	var ips []netip.Addr
	for _, ip := range eni.IPs {
		ip = ip.Unmap()
		if !ip.IsValid() || slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			continue
		}
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	return slices.Compact(ips), prefixes
}

// addresses are the ENI's addresses and prefixes as prefixes, for
// retention.
func addresses(eni ENI) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(eni.IPs)+len(eni.Prefixes))
	for _, ip := range eni.IPs {
		if ip = ip.Unmap(); ip.IsValid() {
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	for _, p := range eni.Prefixes {
		if p.IsValid() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// hasIPv6Rules reports whether the ENI's IPv6 addresses need its table:
// it has some, and it is not the primary ENI.
func (w ENIWant) hasIPv6Rules() bool {
	if w.ENI.Primary() {
		return false
	}
	return slices.ContainsFunc(w.IPs, netip.Addr.Is6) || slices.ContainsFunc(w.Prefixes, func(p netip.Prefix) bool { return p.Addr().Is6() })
}

// eniRoutes are the ENI's table: its IPv4 gateway's link route and the
// default route through it, and, when the ENI routes IPv6 addresses, the
// same pair for the VPC's IPv6 router (see IPv6Gateway).
func eniRoutes(w ENIWant, cfg Config) []Route {
	routes := gatewayRoutes(w.Table, w.ENI.Gateway, w.Link, cfg)
	if w.hasIPv6Rules() {
		routes = append(routes, gatewayRoutes(w.Table, IPv6Gateway(), w.Link, cfg)...)
	}
	return routes
}

// gatewayRoutes are a host route to gw on the link, then the default
// route via gw, of gw's family.
func gatewayRoutes(table int, gw netip.Addr, link Link, cfg Config) []Route {
	if gw.Is6() {
		// The kernel keeps no scope for IPv6 routes (it shows universe)
		// and gives a route added with metric 0 its default, 1024: the
		// desired routes say so, or every converge would rewrite them.
		return []Route{
			{Table: table, Dst: netip.PrefixFrom(gw, 128), LinkIndex: link.Index, Scope: ScopeUniverse, Protocol: cfg.Protocol, Metric: IPv6DefaultMetric},
			{Table: table, Dst: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Gateway: gw, LinkIndex: link.Index, Scope: ScopeUniverse, Protocol: cfg.Protocol, Metric: IPv6DefaultMetric},
		}
	}
	return []Route{
		{Table: table, Dst: netip.PrefixFrom(gw, 32), LinkIndex: link.Index, Scope: ScopeLink, Protocol: cfg.Protocol},
		{Table: table, Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gateway: gw, LinkIndex: link.Index, Scope: ScopeUniverse, Protocol: cfg.Protocol},
	}
}

// rules are the rules of every address and prefix of the ENI: per source
// one egress rule (EgressAll) or one per VPC CIDR (EgressVPC), and one
// ingress rule. IPv6 sources always get the single egress rule of
// EgressAll: an IPv6 pod address is the pod's own, global one, never
// masqueraded on AWS, and the VPC drops a packet leaving by an ENI that
// does not hold its source, so all of its traffic must leave by its ENI
// (Cilium's ENI mode, whose AwsVPC lists IPv4 CIDRs only, would send it
// to ipv6-native-routing-cidr alone). The primary ENI's IPv6 sources get
// no rules: the main table is theirs.
func (w ENIWant) rules(cfg Config) []Rule {
	sources := make([]netip.Prefix, 0, len(w.IPs)+len(w.Prefixes))
	for _, ip := range w.IPs {
		sources = append(sources, netip.PrefixFrom(ip, ip.BitLen()))
	}
	sources = append(sources, w.Prefixes...)
	slices.SortFunc(sources, comparePrefix)
	vpcDsts := []netip.Prefix{{}}
	if cfg.Egress == EgressVPC {
		vpcDsts = vpcDestinations(w.ENI.VPCCIDRs)
	}
	rules := make([]Rule, 0, (len(vpcDsts)+1)*len(sources))
	for _, src := range sources {
		v6 := src.Addr().Is6()
		dsts := vpcDsts
		if v6 {
			if w.ENI.Primary() {
				continue
			}
			dsts = []netip.Prefix{{}}
		}
		for _, dst := range dsts {
			rules = append(rules, Rule{IPv6: v6, Priority: cfg.EgressPriority, Src: src, Dst: dst, Table: w.Table, Protocol: cfg.Protocol})
		}
		if cfg.IngressPriority != 0 {
			rules = append(rules, Rule{IPv6: v6, Priority: cfg.IngressPriority, Dst: src, Table: MainTable, Protocol: cfg.Protocol})
		}
	}
	return rules
}

// vpcDestinations are the destinations of EgressVPC rules: the VPC's IPv4
// CIDRs, coalesced as Cilium's CNI does (ip.CoalesceCIDRs); a /0 becomes
// the invalid prefix, "all", as linuxrouting's normalizeRuleToCIDR makes it.
func vpcDestinations(cidrs []netip.Prefix) []netip.Prefix {
	var v4 []netip.Prefix
	for _, c := range cidrs {
		if c.IsValid() && c.Addr().Is4() {
			v4 = append(v4, c.Masked())
		}
	}
	out := coalesce(v4)
	for i, c := range out {
		if c.Bits() == 0 {
			out[i] = netip.Prefix{}
		}
	}
	return out
}

// coalesce sorts prefixes and drops those inside another one.
func coalesce(ps []netip.Prefix) []netip.Prefix {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		return cmp.Or(cmp.Compare(a.Bits(), b.Bits()), a.Addr().Compare(b.Addr()))
	})
	var out []netip.Prefix
	for _, p := range ps {
		if !slices.ContainsFunc(out, func(o netip.Prefix) bool { return o.Contains(p.Addr()) }) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, comparePrefix)
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// ErrNoPrimaryLink: the connmark rules cannot be written because no link
// carries the primary ENI's MAC; whatever connmark table there is stays.
var ErrNoPrimaryLink = errors.New("no link with the primary ENI's MAC; connmark table left as it is")
