package ec2

import (
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/operator/cloud"
)

// TestENIStringsShared: two described ENIs keep one copy of the strings
// they share (subnet, zone, state, group, tag keys), with every value as
// EC2 sent it.
func TestENIStringsShared(t *testing.T) {
	describe := func(id string) types.NetworkInterface {
		// Fresh copies, as a decoder makes them.
		s := func(v string) *string { return aws.String(strings.Clone(v)) }
		return types.NetworkInterface{
			NetworkInterfaceId: s(id), SubnetId: s("subnet-1"), VpcId: s("vpc-1"), AvailabilityZone: s("us-east-1a"),
			Status: types.NetworkInterfaceStatus(strings.Clone("in-use")), Groups: []types.GroupIdentifier{{GroupId: s("sg-1")}},
			TagSet:     []types.Tag{{Key: s(cloud.TagCluster), Value: s("c1")}, {Key: s(cloud.TagCreatedAt), Value: s("2026-01-01T00:00:0" + id[len(id)-1:] + "Z")}},
			Attachment: &types.NetworkInterfaceAttachment{InstanceId: s("i-1"), Status: types.AttachmentStatusAttached},
		}
	}
	a := eniFrom(describe("eni-1"))
	runtime.GC() // sharing outlives a collection
	b := eniFrom(describe("eni-2"))
	if a.ID != "eni-1" || a.SubnetID != "subnet-1" || a.Status != cloud.ENIInUse || a.AttachmentStatus != cloud.AttachmentAttached ||
		a.Tags[cloud.TagCluster] != "c1" || a.Tags[cloud.TagCreatedAt] != "2026-01-01T00:00:01Z" || a.SecurityGroups[0] != "sg-1" {
		t.Fatalf("converted %+v", a)
	}
	for what, pair := range map[string][2]string{
		"subnet": {a.SubnetID, b.SubnetID}, "zone": {a.AZ, b.AZ}, "status": {a.Status, b.Status},
		"group": {a.SecurityGroups[0], b.SecurityGroups[0]}, "cluster tag": {a.Tags[cloud.TagCluster], b.Tags[cloud.TagCluster]},
	} {
		if unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("%s: %q stored twice", what, pair[0])
		}
	}
}

// TestIPv6Converted: an ENI's IPv6 addresses and /80 prefixes reach
// cloud.ENI (not its IPv4 lists), and a subnet's IPv6 CIDR only while its
// association is associated; anything unparsable is left out.
func TestIPv6Converted(t *testing.T) {
	e := eniFrom(types.NetworkInterface{
		PrivateIpAddress: aws.String("10.0.0.5"),
		Ipv6Addresses: []types.NetworkInterfaceIpv6Address{
			{Ipv6Address: aws.String("2600:1f18::10")}, {Ipv6Address: aws.String("10.0.0.9")}, {Ipv6Address: aws.String("nope")},
		},
		Ipv6Prefixes: []types.Ipv6PrefixSpecification{{Ipv6Prefix: aws.String("2600:1f18:0:0:1::/80")}, {Ipv6Prefix: aws.String("10.0.0.16/28")}},
	})
	if len(e.IPv6s) != 1 || e.IPv6s[0].String() != "2600:1f18::10" || len(e.IPv6Prefixes) != 1 || e.IPv6Prefixes[0].String() != "2600:1f18:0:0:1::/80" ||
		len(e.IPs) != 0 || len(e.Prefixes) != 0 || e.IPv6Slots() != 2 {
		t.Errorf("ENI %+v", e)
	}
	if !e.HasIP(e.IPv6s[0]) || !e.HasIP(e.IPv6Prefixes[0].Addr().Next()) {
		t.Errorf("HasIP misses the ENI's IPv6")
	}
	subnet := func(state types.SubnetCidrBlockStateCode) cloud.Subnet {
		return subnetFrom(types.Subnet{CidrBlock: aws.String("10.0.0.0/24"), Ipv6CidrBlockAssociationSet: []types.SubnetIpv6CidrBlockAssociation{
			{Ipv6CidrBlock: aws.String("2600:1f18:0:1::/64"), Ipv6CidrBlockState: &types.SubnetCidrBlockState{State: state}},
		}})
	}
	if s := subnet(types.SubnetCidrBlockStateCodeAssociated); s.IPv6CIDR.String() != "2600:1f18:0:1::/64" {
		t.Errorf("associated: %v", s.IPv6CIDR)
	}
	for _, st := range []types.SubnetCidrBlockStateCode{types.SubnetCidrBlockStateCodeAssociating, types.SubnetCidrBlockStateCodeDisassociated} {
		if s := subnet(st); s.IPv6CIDR.IsValid() {
			t.Errorf("%s: %v", st, s.IPv6CIDR)
		}
	}
}
