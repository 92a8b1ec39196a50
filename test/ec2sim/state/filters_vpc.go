package state

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// The other documented filters of the describes Cilium's operator and
// enipam's use (DescribeSubnets, DescribeVpcs, DescribeSecurityGroups,
// DescribeRouteTables, DescribeAddresses), beside those in describe.go and
// actions_eip.go. What ec2sim does not model (IPv6 CIDRs
// other than Amazon's, Outposts, customer-owned pools, security group rules, routes other than the
// VPC's local ones) is accepted and matches nothing.

// nothing is a filter on what ec2sim never has.
func nothing[T any]() field[T] { return func(T, func(string) bool) bool { return false } }

// constant is a filter whose value is the same for every resource.
func constant[T any](v string) field[T] { return one(func(T) string { return v }) }

func withFields[T any](base map[string]field[T], more map[string]field[T]) map[string]field[T] {
	out := maps.Clone(base)
	maps.Copy(out, more)
	return out
}

func (s *State) subnetFieldsOf() map[string]field[*subnet] {
	return withFields(subnetFields, map[string]field[*subnet]{
		"owner-id":                        constant[*subnet](s.account),
		"subnet-arn":                      one(func(sn *subnet) string { return fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", s.region, s.account, sn.id) }),
		"map-public-ip-on-launch":         constant[*subnet]("false"),
		"map-customer-owned-ip-on-launch": constant[*subnet]("false"),
		"enable-dns64":                    constant[*subnet]("false"),
		"ipv6-native":                     constant[*subnet]("false"),
		"private-dns-name-options-on-launch.hostname-type": constant[*subnet]("ip-name"),
		"customer-owned-ipv4-pool":                         nothing[*subnet](),
		"enable-lni-at-device-index":                       nothing[*subnet](),
		"ipv6-cidr-block-association.ipv6-cidr-block":      subnetIPv6(func(v *ipv6Space) string { return v.cidr.String() }),
		"ipv6-cidr-block-association.association-id":       subnetIPv6(func(v *ipv6Space) string { return v.assocID }),
		"ipv6-cidr-block-association.state":                subnetIPv6(func(*ipv6Space) string { return "associated" }),
		"outpost-arn":                                      nothing[*subnet](),
	})
}

func (s *State) vpcFieldsOf() map[string]field[*vpc] {
	return withFields(vpcFields, map[string]field[*vpc]{
		"owner-id": constant[*vpc](s.account),
		"cidr-block-association.association-id": func(v *vpc, match func(string) bool) bool {
			return slices.ContainsFunc(v.cidrAssoc, match)
		},
		"cidr-block-association.state":                nothing[*vpc](),
		"ipv6-cidr-block-association.ipv6-cidr-block": vpcIPv6(func(v *vpc) string { return v.ipv6CIDR.String() }),
		"ipv6-cidr-block-association.ipv6-pool":       vpcIPv6(func(*vpc) string { return "Amazon" }),
		"ipv6-cidr-block-association.association-id":  vpcIPv6(func(v *vpc) string { return v.ipv6Assoc }),
		"ipv6-cidr-block-association.state":           vpcIPv6(func(*vpc) string { return "associated" }),
	})
}

// subnetIPv6 is a filter on a subnet's IPv6 CIDR; a subnet without one
// matches nothing.
func subnetIPv6(get func(*ipv6Space) string) field[*subnet] {
	return func(sn *subnet, match func(string) bool) bool { return sn.ipv6 != nil && match(get(sn.ipv6)) }
}

// vpcIPv6 is as subnetIPv6 for a VPC's /56.
func vpcIPv6(get func(*vpc) string) field[*vpc] {
	return func(v *vpc, match func(string) bool) bool { return v.ipv6CIDR.IsValid() && match(get(v)) }
}

func (s *State) groupFieldsOf() map[string]field[*securityGroup] {
	more := map[string]field[*securityGroup]{"owner-id": constant[*securityGroup](s.account)}
	for _, p := range []string{"ip-permission.", "egress.ip-permission."} {
		for _, k := range []string{"cidr", "from-port", "group-id", "group-name", "ipv6-cidr", "prefix-list-id", "protocol", "to-port", "user-id"} {
			more[p+k] = nothing[*securityGroup]()
		}
	}
	return withFields(groupFields, more)
}

func (s *State) routeTableFieldsOf() map[string]field[*routeTable] {
	return withFields(routeTableFields, map[string]field[*routeTable]{
		"owner-id":                               constant[*routeTable](s.account),
		"association.route-table-id":             one(func(rt *routeTable) string { return rt.id }),
		"association.route-table-association-id": one(func(rt *routeTable) string { return rt.assocID }),
		"association.gateway-id":                 nothing[*routeTable](),
		"route.destination-cidr-block": func(rt *routeTable, match func(string) bool) bool {
			return slices.ContainsFunc(rt.vpc.cidrs, func(c netip.Prefix) bool { return match(c.String()) })
		},
		"route.gateway-id":                      constant[*routeTable]("local"),
		"route.origin":                          constant[*routeTable]("CreateRouteTable"),
		"route.state":                           constant[*routeTable]("active"),
		"route.destination-ipv6-cidr-block":     nothing[*routeTable](),
		"route.destination-prefix-list-id":      nothing[*routeTable](),
		"route.egress-only-internet-gateway-id": nothing[*routeTable](),
		"route.instance-id":                     nothing[*routeTable](),
		"route.nat-gateway-id":                  nothing[*routeTable](),
		"route.transit-gateway-id":              nothing[*routeTable](),
		"route.vpc-peering-connection-id":       nothing[*routeTable](),
	})
}

func (s *State) addressFieldsOf() map[string]field[*address] {
	return withFields(addressFields, map[string]field[*address]{
		"network-border-group": constant[*address](s.region),
		"network-interface-owner-id": func(a *address, match func(string) bool) bool {
			return a.eni != nil && match(s.account)
		},
	})
}
