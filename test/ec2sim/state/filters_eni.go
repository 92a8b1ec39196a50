package state

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
)

// The filters on ENIs: every filter EC2's API reference documents for
// DescribeNetworkInterfaces (eniFields), and for DescribeInstances the
// network-interface.* filters, which match an instance when any ENI it
// shows matches (instanceENIFields). Primary IPv6 addresses, carrier
// and customer-owned addresses, Outposts and managed interfaces do not exist in ec2sim:
// their filters are accepted and match nothing (operator.managed and
// requester-managed match "false").

var eniFields = map[string]field[*eni]{
	"network-interface-id":         one(func(e *eni) string { return e.id }),
	"subnet-id":                    one(func(e *eni) string { return e.subnet.id }),
	"vpc-id":                       one(func(e *eni) string { return e.subnet.vpc.id }),
	"availability-zone":            one(func(e *eni) string { return e.subnet.zone.name }),
	"availability-zone-id":         one(func(e *eni) string { return e.subnet.zone.id }),
	"status":                       one(func(e *eni) string { return e.status() }),
	"description":                  one(func(e *eni) string { return e.description }),
	"mac-address":                  one(func(e *eni) string { return e.mac }),
	"interface-type":               one(func(e *eni) string { return e.interfaceType }),
	"requester-managed":            one(func(e *eni) string { return "false" }),
	"operator.managed":             one(func(e *eni) string { return "false" }),
	"operator.principal":           none,
	"requester-id":                 none,
	"ipv6-addresses.ipv6-address":  eniIPv6s,
	"source-dest-check":            one(func(e *eni) string { return boolString(e.sourceDestCheck) }),
	"private-ip-address":           eniAddresses,
	"addresses.private-ip-address": eniAddresses,
	"addresses.primary":            eniPrimary,
	"ipv4-prefix":                  eniPrefixes,
	"group-id":                     eniGroups(func(g *securityGroup) string { return g.id }),
	"group-name":                   eniGroups(func(g *securityGroup) string { return g.name }),
	"attachment.instance-id":       attachmentField(func(a *attachment) string { return a.instance.id }),
	"attachment.attachment-id":     attachmentField(func(a *attachment) string { return a.id }),
	"attachment.status":            attachmentField(func(a *attachment) string { return a.status }),
	"attachment.device-index":      attachmentField(func(a *attachment) string { return strconv.Itoa(a.deviceIndex) }),
	"attachment.attach-time":       attachmentField(func(a *attachment) string { return timestamp(a.since) }),
	"attachment.delete-on-termination": attachmentField(func(a *attachment) string {
		return boolString(a.deleteOnTermination)
	}),
	"association.public-ip":           primaryEIP(func(a *address) string { return a.publicIP.String() }),
	"association.allocation-id":       primaryEIP(func(a *address) string { return a.id }),
	"association.association-id":      primaryEIP(func(a *address) string { return a.associationID }),
	"addresses.association.public-ip": anyEIP(func(a *address) string { return a.publicIP.String() }),
}

// eniFieldsOf adds the filters that need the State: owner IDs and DNS
// names.
func (s *State) eniFieldsOf() map[string]field[*eni] {
	fields := maps.Clone(eniFields)
	fields["association.public-dns-name"] = primaryEIP(func(a *address) string { return s.publicDNSName(a.publicIP) })
	fields["private-dns-name"] = s.eniPrivateDNSNames
	account := func(*eni) string { return s.account }
	fields["owner-id"] = one(account)
	fields["attachment.instance-owner-id"] = func(e *eni, match func(string) bool) bool {
		return e.attachment != nil && match(s.account)
	}
	fields["association.ip-owner-id"] = func(e *eni, match func(string) bool) bool {
		return primaryEIP(func(*address) string { return s.account })(e, match)
	}
	fields["addresses.association.owner-id"] = func(e *eni, match func(string) bool) bool {
		return anyEIP(func(*address) string { return s.account })(e, match)
	}
	return fields
}

// instanceFields are DescribeInstances' filters: the instance's own and
// network-interface.*, over the ENIs as describes show them (lag.go).
func (s *State) instanceFields() map[string]field[*instance] {
	fields := maps.Clone(instanceFields)
	eniFs := s.eniFieldsOf()
	for name, f := range eniFs {
		fields["network-interface."+name] = s.anyInstanceENI(f)
	}
	for name, f := range map[string]field[*eni]{
		"addresses.association.allocation-id":     anyEIP(func(a *address) string { return a.id }),
		"addresses.association.association-id":    anyEIP(func(a *address) string { return a.associationID }),
		"addresses.association.ip-owner-id":       eniFs["addresses.association.owner-id"],
		"addresses.association.public-dns-name":   anyEIP(func(a *address) string { return s.publicDNSName(a.publicIP) }),
		"addresses.association.carrier-ip":        none,
		"addresses.association.customer-owned-ip": none,
		"addresses.private-dns-name":              s.eniPrivateDNSNames,
		"association.carrier-ip":                  none,
		"association.customer-owned-ip":           none,
		"attachment.network-card-index":           attachmentField(func(a *attachment) string { return strconv.Itoa(a.networkCard) }),
		"deny-all-igw-traffic":                    none,
		"ipv4-prefixes.ipv4-prefix":               eniPrefixes,
		"ipv6-address":                            eniIPv6s,
		"ipv6-addresses.is-primary-ipv6":          eniIPv6Primary,
		"ipv6-native":                             one(func(*eni) string { return "false" }),
		"ipv6-prefixes.ipv6-prefix":               eniIPv6Prefixes,
		"outpost-arn":                             none,
		"public-dns-name":                         eniFs["association.public-dns-name"],
		"tag-key": func(e *eni, match func(string) bool) bool {
			return slices.ContainsFunc(e.tags, func(t Tag) bool { return match(t.Key) })
		},
		"tag-value": func(e *eni, match func(string) bool) bool {
			return slices.ContainsFunc(e.tags, func(t Tag) bool { return match(t.Value) })
		},
	} {
		fields["network-interface."+name] = s.anyInstanceENI(f)
	}
	return fields
}

func (s *State) anyInstanceENI(f field[*eni]) field[*instance] {
	return func(in *instance, match func(string) bool) bool {
		return slices.ContainsFunc(s.instanceENIs(in), func(e *eni) bool { return f(e, match) })
	}
}

// none is a filter on something ec2sim's ENIs never have: it matches
// nothing.
func none(*eni, func(string) bool) bool { return false }

func eniAddresses(e *eni, match func(string) bool) bool {
	return slices.ContainsFunc(e.ips, func(ip netip.Addr) bool { return match(ip.String()) })
}

func eniPrimary(e *eni, match func(string) bool) bool {
	return match("true") || len(e.ips) > 1 && match("false")
}

func eniPrefixes(e *eni, match func(string) bool) bool {
	return slices.ContainsFunc(e.prefixes, func(p netip.Prefix) bool { return match(p.String()) })
}

// eniIPv6s matches an ENI's IPv6 addresses in EC2's compressed form.
func eniIPv6s(e *eni, match func(string) bool) bool {
	return slices.ContainsFunc(e.ipv6s, func(a netip.Addr) bool { return match(a.String()) })
}

// eniIPv6Primary: no IPv6 address is primary in ec2sim (views.go).
func eniIPv6Primary(e *eni, match func(string) bool) bool { return len(e.ipv6s) > 0 && match("false") }

func eniIPv6Prefixes(e *eni, match func(string) bool) bool {
	return slices.ContainsFunc(e.ipv6Prefixes, func(p netip.Prefix) bool { return match(p.String()) })
}

func eniGroups(get func(*securityGroup) string) field[*eni] {
	return func(e *eni, match func(string) bool) bool {
		return slices.ContainsFunc(e.groups, func(g *securityGroup) bool { return match(get(g)) })
	}
}

func (s *State) eniPrivateDNSNames(e *eni, match func(string) bool) bool {
	return slices.ContainsFunc(e.ips, func(ip netip.Addr) bool { return match(s.privateDNSName(ip)) })
}

func attachmentField(get func(*attachment) string) field[*eni] {
	return func(e *eni, match func(string) bool) bool {
		return e.attachment != nil && match(get(e.attachment))
	}
}

// primaryEIP matches the Elastic IP of the ENI's primary address (the
// ENI's own association element).
func primaryEIP(get func(*address) string) field[*eni] {
	return func(e *eni, match func(string) bool) bool {
		return len(e.ips) > 0 && slices.ContainsFunc(e.eips, func(a *address) bool { return a.privateIP == e.ips[0] && match(get(a)) })
	}
}

// anyEIP matches the Elastic IP of any of the ENI's addresses.
func anyEIP(get func(*address) string) field[*eni] {
	return func(e *eni, match func(string) bool) bool {
		return slices.ContainsFunc(e.eips, func(a *address) bool { return match(get(a)) })
	}
}
