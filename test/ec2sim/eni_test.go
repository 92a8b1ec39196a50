package ec2sim_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestCreateNetworkInterfaceWithCountGroupsAndTags creates an ENI the way an
// operator does: a subnet, security groups, a secondary-address count and
// tags. It is available at once, unattached, its addresses the subnet's
// lowest free ones, primary first.
func TestCreateNetworkInterfaceWithCountGroupsAndTags(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	sn := e.subnetByName("big")
	groups, err := e.ec2.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{
		Filters: []types.Filter{{Name: aws.String("tag:role"), Values: []string{"pods"}}},
	})
	noErr(t, err)
	sg := aws.ToString(groups.SecurityGroups[0].GroupId)
	out, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:                       sn.SubnetId,
		Groups:                         []string{sg},
		Description:                    aws.String("enipam pods"),
		SecondaryPrivateIpAddressCount: aws.Int32(3),
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags:         []types.Tag{{Key: aws.String("enipam.io/cluster"), Value: aws.String("c1")}},
		}},
	})
	noErr(t, err)
	ni := out.NetworkInterface
	// Two instances hold 10.1.1.4 and 10.1.1.5.
	if got := addresses(*ni); !slices.Equal(got, []string{"10.1.1.6", "10.1.1.7", "10.1.1.8", "10.1.1.9"}) {
		t.Errorf("addresses %v", got)
	}
	if ni.Status != types.NetworkInterfaceStatusAvailable || ni.Attachment != nil {
		t.Errorf("status %s attachment %+v", ni.Status, ni.Attachment)
	}
	if !aws.ToBool(ni.PrivateIpAddresses[0].Primary) || aws.ToBool(ni.PrivateIpAddresses[1].Primary) {
		t.Errorf("primary flags wrong: %+v", ni.PrivateIpAddresses)
	}
	if len(ni.Groups) != 1 || aws.ToString(ni.Groups[0].GroupId) != sg || aws.ToString(ni.Groups[0].GroupName) != "pods" {
		t.Errorf("groups %+v", ni.Groups)
	}
	if len(ni.TagSet) != 1 || aws.ToString(ni.TagSet[0].Key) != "enipam.io/cluster" {
		t.Errorf("tags %+v", ni.TagSet)
	}
	if mac := aws.ToString(ni.MacAddress); len(mac) != 17 || mac[:3] != "02:" {
		t.Errorf("mac %q", mac)
	}
	if id := aws.ToString(ni.NetworkInterfaceId); len(id) != len("eni-")+17 {
		t.Errorf("id %q is not eni- and 17 hex digits", id)
	}
	if aws.ToString(ni.Description) != "enipam pods" || aws.ToString(ni.OwnerId) != "111122223333" {
		t.Errorf("description %q owner %q", aws.ToString(ni.Description), aws.ToString(ni.OwnerId))
	}
	after := e.subnetByName("big")
	if got := aws.ToInt32(after.AvailableIpAddressCount); got != aws.ToInt32(sn.AvailableIpAddressCount)-4 {
		t.Errorf("available %d, want %d", got, aws.ToInt32(sn.AvailableIpAddressCount)-4)
	}
	// Without groups the VPC's default group applies.
	plain := e.createENI("big", 0)
	if len(plain.Groups) != 1 || aws.ToString(plain.Groups[0].GroupName) != "default" {
		t.Errorf("default groups %+v", plain.Groups)
	}
}

// TestCreateNetworkInterfaceWithExplicitAddresses names the primary and
// secondary addresses; conflicts and bad addresses fail with EC2's codes
// and leave the subnet untouched.
func TestCreateNetworkInterfaceWithExplicitAddresses(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	sn := e.subnetByName("big")
	out, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:         sn.SubnetId,
		PrivateIpAddress: aws.String("10.1.1.50"),
		PrivateIpAddresses: []types.PrivateIpAddressSpecification{
			{PrivateIpAddress: aws.String("10.1.1.51")},
			{PrivateIpAddress: aws.String("10.1.1.50"), Primary: aws.Bool(true)},
		},
		SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	noErr(t, err)
	if got := addresses(*out.NetworkInterface); !slices.Equal(got, []string{"10.1.1.50", "10.1.1.51", "10.1.1.6"}) {
		t.Errorf("addresses %v", got)
	}
	for _, c := range []struct {
		ip, code string
	}{
		{"10.1.1.50", "InvalidIPAddress.InUse"},
		{"10.1.2.10", "InvalidParameterValue"},  // another subnet
		{"10.1.1.255", "InvalidParameterValue"}, // broadcast, reserved
		{"10.1.1.2", "InvalidParameterValue"},   // DNS, reserved
		{"not-an-ip", "InvalidParameterValue"},
	} {
		_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: sn.SubnetId, PrivateIpAddress: aws.String(c.ip)})
		wantCode(t, err, c.code)
	}
	if got := aws.ToInt32(e.subnetByName("big").AvailableIpAddressCount); got != 251-2-3 {
		t.Errorf("failed creates leaked addresses: available %d", got)
	}
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0123456789abcdef0")})
	wantCode(t, err, "InvalidSubnetID.NotFound")
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: sn.SubnetId, Groups: []string{"sg-0123456789abcdef0"}})
	wantCode(t, err, "InvalidGroup.NotFound")
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: sn.SubnetId, SecondaryPrivateIpAddressCount: aws.Int32(64)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: e.subnetByName("tiny").SubnetId, SecondaryPrivateIpAddressCount: aws.Int32(11)})
	wantCode(t, err, "InsufficientFreeAddressesInSubnet")
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: sn.SubnetId,
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}})
	wantCode(t, err, "InvalidParameterValue")
}

// TestCreateNetworkInterfaceClientTokenIsIdempotent retries a create with
// the same ClientToken (what the SDK does after a lost answer): one ENI,
// the same answer; the token with other parameters is a mismatch.
func TestCreateNetworkInterfaceClientTokenIsIdempotent(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	in := &ec2.CreateNetworkInterfaceInput{
		SubnetId:                       e.subnetByName("big").SubnetId,
		SecondaryPrivateIpAddressCount: aws.Int32(2),
		ClientToken:                    aws.String("3f1c2d9e-token"),
	}
	first, err := e.ec2.CreateNetworkInterface(e.ctx, in)
	noErr(t, err)
	second, err := e.ec2.CreateNetworkInterface(e.ctx, in)
	noErr(t, err)
	if aws.ToString(first.NetworkInterface.NetworkInterfaceId) != aws.ToString(second.NetworkInterface.NetworkInterfaceId) {
		t.Errorf("retry created a second ENI: %s vs %s", aws.ToString(first.NetworkInterface.NetworkInterfaceId), aws.ToString(second.NetworkInterface.NetworkInterfaceId))
	}
	if aws.ToString(second.ClientToken) != "3f1c2d9e-token" {
		t.Errorf("client token %q", aws.ToString(second.ClientToken))
	}
	all, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("status"), Values: []string{"available"}}},
	})
	noErr(t, err)
	if len(all.NetworkInterfaces) != 1 {
		t.Errorf("%d available ENIs, want 1", len(all.NetworkInterfaces))
	}
	in.SecondaryPrivateIpAddressCount = aws.Int32(3)
	_, err = e.ec2.CreateNetworkInterface(e.ctx, in)
	wantCode(t, err, "IdempotentParameterMismatch")
	// The SDK fills in a fresh token when none is given (into the input,
	// so a reused input is a retry): two ENIs.
	in.ClientToken = nil
	a, err := e.ec2.CreateNetworkInterface(e.ctx, in)
	noErr(t, err)
	in.ClientToken = nil
	b, err := e.ec2.CreateNetworkInterface(e.ctx, in)
	noErr(t, err)
	if aws.ToString(a.NetworkInterface.NetworkInterfaceId) == aws.ToString(b.NetworkInterface.NetworkInterfaceId) {
		t.Error("generated tokens collided")
	}
}

// TestModifyNetworkInterfaceAttribute changes DeleteOnTermination of an
// attachment, the security groups and the description, one per call.
func TestModifyNetworkInterfaceAttribute(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-m5")
	ni := e.createENI("big", 0)
	id := ni.NetworkInterfaceId
	att, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: id, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1)})
	noErr(t, err)
	if aws.ToBool(e.eni(*id).Attachment.DeleteOnTermination) {
		t.Fatal("a new attachment must not delete on termination")
	}
	_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: id,
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId, DeleteOnTermination: aws.Bool(true)},
	})
	noErr(t, err)
	if !aws.ToBool(e.eni(*id).Attachment.DeleteOnTermination) {
		t.Error("DeleteOnTermination not set")
	}
	groups, err := e.ec2.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{GroupNames: []string{"nodes", "pods"}})
	noErr(t, err)
	ids := []string{aws.ToString(groups.SecurityGroups[0].GroupId), aws.ToString(groups.SecurityGroups[1].GroupId)}
	_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id, Groups: ids})
	noErr(t, err)
	if got := e.eni(*id).Groups; len(got) != 2 {
		t.Errorf("groups %+v", got)
	}
	_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id, Description: &types.AttributeValue{Value: aws.String("renamed")}})
	noErr(t, err)
	if got := aws.ToString(e.eni(*id).Description); got != "renamed" {
		t.Errorf("description %q", got)
	}

	_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id})
	wantCode(t, err, "MissingParameter")
	_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id,
		Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String("eni-attach-0123456789abcdef0"), DeleteOnTermination: aws.Bool(false)}})
	wantCode(t, err, "InvalidAttachmentID.NotFound")
	_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id, Groups: []string{"sg-0123456789abcdef0"}})
	wantCode(t, err, "InvalidGroup.NotFound")
	_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String("eni-0123456789abcdef0"), Groups: ids})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
}
