package ec2sim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// The filters EC2's API reference documents (as the SDK's
// DescribeNetworkInterfacesInput and DescribeInstancesInput list them).
var (
	documentedENIFilters = []string{
		"association.allocation-id", "association.association-id", "addresses.association.owner-id",
		"addresses.association.public-ip", "addresses.primary", "addresses.private-ip-address",
		"association.ip-owner-id", "association.public-ip", "association.public-dns-name",
		"attachment.attach-time", "attachment.attachment-id", "attachment.delete-on-termination",
		"attachment.device-index", "attachment.instance-id", "attachment.instance-owner-id",
		"attachment.status", "availability-zone", "availability-zone-id", "description", "group-id",
		"ipv6-addresses.ipv6-address", "interface-type", "mac-address", "network-interface-id",
		"operator.managed", "operator.principal", "owner-id", "private-dns-name", "private-ip-address",
		"requester-id", "requester-managed", "source-dest-check", "status", "subnet-id", "tag:k",
		"tag-key", "vpc-id",
	}
	documentedInstanceENIFilters = []string{
		"addresses.association.allocation-id", "addresses.association.association-id",
		"addresses.association.carrier-ip", "addresses.association.customer-owned-ip",
		"addresses.association.ip-owner-id", "addresses.association.public-dns-name",
		"addresses.association.public-ip", "addresses.primary", "addresses.private-dns-name",
		"addresses.private-ip-address", "association.allocation-id", "association.association-id",
		"association.carrier-ip", "association.customer-owned-ip", "association.ip-owner-id",
		"association.public-dns-name", "association.public-ip", "attachment.attach-time",
		"attachment.attachment-id", "attachment.delete-on-termination", "attachment.device-index",
		"attachment.instance-id", "attachment.instance-owner-id", "attachment.network-card-index",
		"attachment.status", "availability-zone", "deny-all-igw-traffic", "description", "group-id",
		"group-name", "ipv4-prefixes.ipv4-prefix", "ipv6-address", "ipv6-addresses.ipv6-address",
		"ipv6-addresses.is-primary-ipv6", "ipv6-native", "ipv6-prefixes.ipv6-prefix", "mac-address",
		"network-interface-id", "operator.managed", "operator.principal", "outpost-arn", "owner-id",
		"private-dns-name", "private-ip-address", "public-dns-name", "requester-id",
		"requester-managed", "status", "source-dest-check", "subnet-id", "tag-key", "tag-value", "vpc-id",
	}
)

// TestEveryDocumentedENIFilterIsAccepted sends each documented filter of
// DescribeNetworkInterfaces, and each network-interface.* filter of
// DescribeInstances, through the SDK: none is refused.
func TestEveryDocumentedENIFilterIsAccepted(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	for _, name := range documentedENIFilters {
		_, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{{Name: aws.String(name), Values: []string{"x"}}}})
		if err != nil {
			t.Errorf("DescribeNetworkInterfaces filter %s: %v", name, err)
		}
	}
	for _, name := range documentedInstanceENIFilters {
		_, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("network-interface." + name), Values: []string{"x"}}}})
		if err != nil {
			t.Errorf("DescribeInstances filter network-interface.%s: %v", name, err)
		}
	}
}

// TestENIFiltersMatch checks the filters added for EC2's list against
// what the describes answer: owner IDs, DNS names (eu-west-1's), the
// Elastic IP of the primary address against any address, attach time,
// network card.
func TestENIFiltersMatch(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-m5")
	primary := aws.ToString(node.NetworkInterfaces[0].NetworkInterfaceId)
	other := aws.ToString(e.instanceByName("node-t3").NetworkInterfaces[0].NetworkInterfaceId)
	e.clock.Advance(time.Minute) // the new attachment's time is its own
	ni := e.attachedENI(aws.ToString(node.InstanceId), 1, 1)
	id := aws.ToString(ni.NetworkInterfaceId)
	alloc, err := e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
	noErr(t, err)
	_, err = e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: alloc.AllocationId, NetworkInterfaceId: &id, PrivateIpAddress: aws.String(addresses(ni)[1])})
	noErr(t, err)
	ni = e.eni(id)
	eip := ni.PrivateIpAddresses[1].Association
	if want := "ec2-" + dashedIP(aws.ToString(alloc.PublicIp)) + ".eu-west-1.compute.amazonaws.com"; aws.ToString(eip.PublicDnsName) != want {
		t.Errorf("public DNS name %q, want %q", aws.ToString(eip.PublicDnsName), want)
	}
	if want := "ip-" + dashedIP(addresses(ni)[0]) + ".eu-west-1.compute.internal"; aws.ToString(ni.PrivateDnsName) != want {
		t.Errorf("private DNS name %q, want %q", aws.ToString(ni.PrivateDnsName), want)
	}

	for _, c := range []struct {
		name, value string
		want        []string
	}{
		{"owner-id", "111122223333", []string{primary, other, id}},
		{"owner-id", "999988887777", nil},
		{"attachment.instance-owner-id", "111122223333", []string{primary, other, id}},
		{"attachment.attach-time", aws.ToString(aws.String(ni.Attachment.AttachTime.UTC().Format("2006-01-02T15:04:05.000Z"))), []string{id}},
		{"private-dns-name", aws.ToString(ni.PrivateDnsName), []string{id}},
		{"addresses.association.public-ip", aws.ToString(alloc.PublicIp), []string{id}},
		{"addresses.association.owner-id", "111122223333", []string{id}},
		// The Elastic IP is on a secondary address: not the ENI's own
		// association.
		{"association.public-ip", aws.ToString(alloc.PublicIp), nil},
		{"association.association-id", aws.ToString(eip.AssociationId), nil},
		{"requester-id", "*", nil},
	} {
		if got := e.enisWhere(c.name, c.value); !slices.Equal(got, c.want) {
			t.Errorf("filter %s=%s: %v, want %v", c.name, c.value, got, c.want)
		}
	}
	instancesWhere := func(name, value string) int {
		out, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String(name), Values: []string{value}}}})
		noErr(t, err)
		return len(out.Reservations)
	}
	for _, c := range []struct {
		name, value string
		want        int
	}{
		{"network-interface.attachment.network-card-index", "0", 2},
		{"network-interface.attachment.device-index", "1", 1},
		{"network-interface.addresses.association.public-ip", aws.ToString(alloc.PublicIp), 1},
		{"network-interface.association.public-ip", aws.ToString(alloc.PublicIp), 0},
		{"network-interface.addresses.association.allocation-id", aws.ToString(alloc.AllocationId), 1},
		{"network-interface.network-interface-id", id, 1},
		{"network-interface.mac-address", aws.ToString(ni.MacAddress), 1},
		{"network-interface.private-dns-name", aws.ToString(ni.PrivateDnsName), 1},
		{"network-interface.ipv6-native", "false", 2},
	} {
		if got := instancesWhere(c.name, c.value); got != c.want {
			t.Errorf("DescribeInstances %s=%s: %d instances, want %d", c.name, c.value, got, c.want)
		}
	}
}

func dashedIP(ip string) string {
	b := []byte(ip)
	for i, c := range b {
		if c == '.' {
			b[i] = '-'
		}
	}
	return string(b)
}

// TestEveryDocumentedVPCFilterIsAccepted sends each documented filter of
// DescribeSubnets, DescribeVpcs, DescribeSecurityGroups,
// DescribeRouteTables and DescribeAddresses through the SDK: none is
// refused, and the owner, ARN, route and border-group filters match.
func TestEveryDocumentedVPCFilterIsAccepted(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	f := func(name, value string) []types.Filter {
		return []types.Filter{{Name: aws.String(name), Values: []string{value}}}
	}
	describe := map[string]func(name, value string) (int, error){
		"DescribeSubnets": func(n, v string) (int, error) {
			out, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{Filters: f(n, v)})
			if err != nil {
				return 0, err
			}
			return len(out.Subnets), nil
		},
		"DescribeVpcs": func(n, v string) (int, error) {
			out, err := e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{Filters: f(n, v)})
			if err != nil {
				return 0, err
			}
			return len(out.Vpcs), nil
		},
		"DescribeSecurityGroups": func(n, v string) (int, error) {
			out, err := e.ec2.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{Filters: f(n, v)})
			if err != nil {
				return 0, err
			}
			return len(out.SecurityGroups), nil
		},
		"DescribeRouteTables": func(n, v string) (int, error) {
			out, err := e.ec2.DescribeRouteTables(e.ctx, &ec2.DescribeRouteTablesInput{Filters: f(n, v)})
			if err != nil {
				return 0, err
			}
			return len(out.RouteTables), nil
		},
		"DescribeAddresses": func(n, v string) (int, error) {
			out, err := e.ec2.DescribeAddresses(e.ctx, &ec2.DescribeAddressesInput{Filters: f(n, v)})
			if err != nil {
				return 0, err
			}
			return len(out.Addresses), nil
		},
	}
	documented := map[string][]string{
		"DescribeSubnets": {"availability-zone", "availability-zone-id", "available-ip-address-count", "cidr-block",
			"customer-owned-ipv4-pool", "default-for-az", "enable-dns64", "enable-lni-at-device-index",
			"ipv6-cidr-block-association.ipv6-cidr-block", "ipv6-cidr-block-association.association-id",
			"ipv6-cidr-block-association.state", "ipv6-native", "map-customer-owned-ip-on-launch",
			"map-public-ip-on-launch", "outpost-arn", "owner-id", "private-dns-name-options-on-launch.hostname-type",
			"state", "subnet-arn", "subnet-id", "tag:k", "tag-key", "vpc-id"},
		"DescribeVpcs": {"cidr", "cidr-block-association.cidr-block", "cidr-block-association.association-id",
			"cidr-block-association.state", "dhcp-options-id", "ipv6-cidr-block-association.ipv6-cidr-block",
			"ipv6-cidr-block-association.ipv6-pool", "ipv6-cidr-block-association.association-id",
			"ipv6-cidr-block-association.state", "is-default", "owner-id", "state", "tag:k", "tag-key", "vpc-id"},
		"DescribeSecurityGroups": {"description", "egress.ip-permission.cidr", "egress.ip-permission.from-port",
			"egress.ip-permission.group-id", "egress.ip-permission.group-name", "egress.ip-permission.ipv6-cidr",
			"egress.ip-permission.prefix-list-id", "egress.ip-permission.protocol", "egress.ip-permission.to-port",
			"egress.ip-permission.user-id", "group-id", "group-name", "ip-permission.cidr", "ip-permission.from-port",
			"ip-permission.group-id", "ip-permission.group-name", "ip-permission.ipv6-cidr", "ip-permission.prefix-list-id",
			"ip-permission.protocol", "ip-permission.to-port", "ip-permission.user-id", "owner-id", "tag-key", "vpc-id"},
		"DescribeRouteTables": {"association.gateway-id", "association.route-table-association-id",
			"association.route-table-id", "association.subnet-id", "association.main", "owner-id", "route-table-id",
			"route.destination-cidr-block", "route.destination-ipv6-cidr-block", "route.destination-prefix-list-id",
			"route.egress-only-internet-gateway-id", "route.gateway-id", "route.instance-id", "route.nat-gateway-id",
			"route.transit-gateway-id", "route.origin", "route.state", "route.vpc-peering-connection-id", "tag:k",
			"tag-key", "vpc-id"},
		"DescribeAddresses": {"allocation-id", "association-id", "instance-id", "network-border-group",
			"network-interface-id", "network-interface-owner-id", "private-ip-address", "public-ip", "tag-key"},
	}
	for action, names := range documented {
		for _, name := range names {
			if _, err := describe[action](name, "x"); err != nil {
				t.Errorf("%s filter %s: %v", action, name, err)
			}
		}
	}
	_, err := e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
	noErr(t, err)
	subnet := e.subnetByName("tiny")
	for _, c := range []struct {
		action, name, value string
		want                int
	}{
		{"DescribeSubnets", "owner-id", "111122223333", 4},
		{"DescribeSubnets", "owner-id", "999988887777", 0},
		{"DescribeSubnets", "subnet-arn", aws.ToString(subnet.SubnetArn), 1},
		{"DescribeVpcs", "owner-id", "111122223333", 1},
		{"DescribeRouteTables", "route.destination-cidr-block", "100.64.0.0/16", 1},
		{"DescribeRouteTables", "route.destination-cidr-block", "10.9.0.0/16", 0},
		{"DescribeAddresses", "network-border-group", "eu-west-1", 1},
		{"DescribeSecurityGroups", "owner-id", "111122223333", 3},
	} {
		if got, err := describe[c.action](c.name, c.value); err != nil || got != c.want {
			t.Errorf("%s %s=%s: %d (%v), want %d", c.action, c.name, c.value, got, err, c.want)
		}
	}
}
