package routing

// OwnsRoute reports whether a route is enipam's: it carries enipam's
// protocol and lives in one of enipam's ENI tables. The main table and any
// foreign route are never enipam's.
func (c Config) OwnsRoute(r Route) bool {
	return r.Protocol == c.Protocol && isENITable(r.Table)
}

// OwnsRule reports whether a rule is enipam's: it carries enipam's protocol
// and is either an egress rule into an ENI table, an ingress rule
// (destination only) into main, or the connmark rule (a fwmark match and
// nothing else) into main. Priority is deliberately not part of it, so
// that changing the configured priorities moves the rules instead of
// leaving the old ones behind.
func (c Config) OwnsRule(r Rule) bool {
	if r.Protocol != c.Protocol {
		return false
	}
	if isENITable(r.Table) {
		return true
	}
	if r.Table != MainTable || r.Src.IsValid() {
		return false
	}
	return r.Dst.IsValid() != (r.Mask != 0)
}

func isENITable(t int) bool {
	return t >= TableOffset && t <= TableOffset+MaxENINumber
}
