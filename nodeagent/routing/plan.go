package routing

import "net/netip"

// Plan is the minimal set of kernel changes that takes the node from its
// actual state to the desired one, in the order they must be applied:
// links, then routes (a route needs its link up), then new rules, then the
// connmark table, then stale rules, then stale routes (a rule is never
// left pointing at a table being emptied while traffic still matches it).
type Plan struct {
	Links         []LinkChange
	ReplaceRoutes []Route
	AddRules      []Rule
	// Connmark, when set, replaces the connmark table with its Want (nil:
	// deletes it).
	Connmark  *ConnmarkChange
	DelRules  []Rule
	DelRoutes []Route
}

// ConnmarkChange is the connmark table to write; a nil Want removes it.
type ConnmarkChange struct {
	Want *Connmark
}

// LinkChange is what must change on one link.
type LinkChange struct {
	ENI  string
	Link Link
	// MTU to set, 0 to leave it.
	MTU int
	// Up brings the link up.
	Up bool
	// RPFilter to write, -1 to leave it.
	RPFilter int
}

// Len is the number of kernel writes the plan costs.
func (p Plan) Len() int {
	n := len(p.ReplaceRoutes) + len(p.AddRules) + len(p.DelRules) + len(p.DelRoutes)
	if p.Connmark != nil {
		n++
	}
	for _, c := range p.Links {
		n += c.writes()
	}
	return n
}

func (c LinkChange) writes() int {
	n := 0
	if c.MTU != 0 {
		n++
	}
	if c.Up {
		n++
	}
	if c.RPFilter >= 0 {
		n++
	}
	return n
}

// Diff plans the changes from the actual rules, routes and connmark table
// to the desired state. Only what cfg owns is ever deleted; foreign rules
// and routes are invisible to it, even when they look like enipam's. The
// rules of retained addresses, and the tables they point at, are never
// deleted.
func Diff(d Desired, rules []Rule, routes []Route, connmark *Connmark, cfg Config) Plan {
	var p Plan
	for _, w := range d.Links {
		c := LinkChange{ENI: w.ENI, Link: w.Link, RPFilter: -1}
		if w.LoosenOnly {
			// The kernel checks with the stricter of the link's value and
			// "all"; 1 is strict.
			if max(w.Link.RPFilter, d.RPFilterAll) == 1 {
				c.RPFilter = w.RPFilter
				p.Links = append(p.Links, c)
			}
			continue
		}
		if w.Link.MTU != w.MTU {
			c.MTU = w.MTU
		}
		c.Up = !w.Link.Up
		if w.Link.RPFilter != w.RPFilter {
			c.RPFilter = w.RPFilter
		}
		if c.writes() > 0 {
			p.Links = append(p.Links, c)
		}
	}
	kept := retained(d.Retain, rules, cfg)
	p.AddRules, p.DelRules = diffRules(d.Rules, rules, kept, cfg)
	keptTables := map[int]bool{}
	for r := range kept {
		if r.Table != MainTable {
			keptTables[r.Table] = true
		}
	}
	p.ReplaceRoutes, p.DelRoutes = diffRoutes(d.Routes, routes, keptTables, cfg)
	if !d.KeepConnmark && !sameConnmark(d.Connmark, connmark) {
		p.Connmark = &ConnmarkChange{Want: d.Connmark}
	}
	return p
}

// retained returns the owned rules of retained addresses: egress rules
// from them and ingress rules to them.
func retained(retain []netip.Prefix, rules []Rule, cfg Config) map[Rule]bool {
	if len(retain) == 0 {
		return nil
	}
	set := make(map[netip.Prefix]bool, len(retain))
	for _, p := range retain {
		set[p] = true
	}
	kept := map[Rule]bool{}
	for _, r := range rules {
		if !cfg.OwnsRule(r) {
			continue
		}
		if (isENITable(r.Table) && set[r.Src]) || (r.Table == MainTable && !r.Src.IsValid() && set[r.Dst]) {
			kept[r] = true
		}
	}
	return kept
}

func sameConnmark(a, b *Connmark) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// diffRoutes: a desired route is kept if an owned route is exactly it,
// otherwise it is replaced (which also rewrites an owned route with the
// same table, destination and metric in place). Every other owned route
// goes.
func diffRoutes(desired []Route, actual []Route, keptTables map[int]bool, cfg Config) (replace, del []Route) {
	owned := map[routeKey][]Route{}
	desiredTables := map[int]bool{}
	for _, r := range desired {
		desiredTables[r.Table] = true
	}
	for _, r := range actual {
		// A table kept for retained rules stays as it is, unless a routed
		// ENI now owns it.
		if cfg.OwnsRoute(r) && !(keptTables[r.Table] && !desiredTables[r.Table]) {
			owned[r.key()] = append(owned[r.key()], r)
		}
	}
	for _, want := range desired {
		have := owned[want.key()]
		kept := -1
		for i, r := range have {
			if want.sameAs(r) {
				kept = i
				break
			}
		}
		if kept < 0 {
			replace = append(replace, want)
		}
		// What remains under this key is stale, except the route kept as
		// is and the one the replace rewrites (same metric).
		var stale []Route
		for i, r := range have {
			if i == kept || (kept < 0 && r.Metric == want.Metric) {
				continue
			}
			stale = append(stale, r)
		}
		owned[want.key()] = stale
	}
	for _, rs := range owned {
		del = append(del, rs...)
	}
	sortRoutesForDelete(del)
	return replace, del
}

// diffRules: rules are identified by all their fields; a desired rule
// missing is added, and every owned rule neither desired nor kept (or a
// duplicate of one already counted) is deleted.
func diffRules(desired []Rule, actual []Rule, kept map[Rule]bool, cfg Config) (add, del []Rule) {
	want := make(map[Rule]bool, len(desired))
	for _, r := range desired {
		want[r] = true
	}
	seen := make(map[Rule]bool, len(actual))
	for _, r := range actual {
		if !cfg.OwnsRule(r) {
			continue
		}
		if (want[r] || kept[r]) && !seen[r] {
			seen[r] = true
			continue
		}
		del = append(del, r)
	}
	for _, r := range desired {
		if !seen[r] {
			add = append(add, r)
			seen[r] = true
		}
	}
	return add, del
}
