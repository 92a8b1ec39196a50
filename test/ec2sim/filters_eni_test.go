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
