package routing

// Plan is the minimal set of kernel changes that takes the node from its
// actual state to the desired one, in the order they must be applied:
// links, then routes (a route needs its link up), then new rules, then
// stale rules, then stale routes (a rule is never left pointing at a table
// being emptied while traffic still matches it).
type Plan struct {
	Links         []LinkChange
	ReplaceRoutes []Route
	AddRules      []Rule
	DelRules      []Rule
	DelRoutes     []Route
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

// Diff plans the changes from the actual rules and routes to the desired
// state. Only what cfg owns is ever deleted; foreign rules and routes are
// invisible to it, even when they look like enipam's.
func Diff(d Desired, rules []Rule, routes []Route, cfg Config) Plan {
	var p Plan
	for _, w := range d.Links {
		c := LinkChange{ENI: w.ENI, Link: w.Link, RPFilter: -1}
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
	p.ReplaceRoutes, p.DelRoutes = diffRoutes(d.Routes, routes, cfg)
	p.AddRules, p.DelRules = diffRules(d.Rules, rules, cfg)
	return p
}

// diffRoutes: a desired route is kept if an owned route is exactly it,
// otherwise it is replaced (which also rewrites an owned route with the
// same table, destination and metric in place). Every other owned route
// goes.
func diffRoutes(desired []Route, actual []Route, cfg Config) (replace, del []Route) {
	owned := map[routeKey][]Route{}
	for _, r := range actual {
		if cfg.OwnsRoute(r) {
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
// missing is added, and every owned rule not desired (or a duplicate of one
// already counted) is deleted.
func diffRules(desired []Rule, actual []Rule, cfg Config) (add, del []Rule) {
	want := make(map[Rule]bool, len(desired))
	for _, r := range desired {
		want[r] = true
	}
	seen := make(map[Rule]bool, len(actual))
	for _, r := range actual {
		if !cfg.OwnsRule(r) {
			continue
		}
		if want[r] && !seen[r] {
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
