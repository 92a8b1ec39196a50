package ec2sim_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func tagMap(tags []types.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// TestCreateAndDeleteTags tags an ENI, an instance and a subnet in one call,
// overwrites a value, deletes by key, by key and value, and all; unknown
// and malformed IDs, reserved keys and the 50-tag limit fail.
func TestCreateAndDeleteTags(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	ni := e.createENI("big", 0)
	node := e.instanceByName("node-m5")
	sn := e.subnetByName("big")
	ids := []string{aws.ToString(ni.NetworkInterfaceId), aws.ToString(node.InstanceId), aws.ToString(sn.SubnetId)}
	_, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: ids, Tags: []types.Tag{
		{Key: aws.String("a"), Value: aws.String("1")}, {Key: aws.String("b"), Value: aws.String("2")}, {Key: aws.String("c"), Value: aws.String("")},
	}})
	noErr(t, err)
	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: ids[:1], Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("one")}}})
	noErr(t, err)
	if got := tagMap(e.eni(ids[0]).TagSet); got["a"] != "one" || got["b"] != "2" || len(got) != 3 {
		t.Errorf("eni tags %v", got)
	}
	if got := tagMap(e.instanceByName("node-m5").Tags); got["a"] != "1" || got["Name"] != "node-m5" {
		t.Errorf("instance tags %v", got)
	}
	_, err = e.ec2.DeleteTags(e.ctx, &ec2.DeleteTagsInput{Resources: ids[:1], Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("wrong")}, {Key: aws.String("b")}}})
	noErr(t, err)
	if got := tagMap(e.eni(ids[0]).TagSet); got["a"] != "one" || len(got) != 2 {
		t.Errorf("after delete by value: %v", got)
	}
	_, err = e.ec2.DeleteTags(e.ctx, &ec2.DeleteTagsInput{Resources: ids[:1]})
	noErr(t, err)
	if got := e.eni(ids[0]).TagSet; len(got) != 0 {
		t.Errorf("after delete all: %v", got)
	}

	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{"eni-0123456789abcdef0"}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{"bogus-123"}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	wantCode(t, err, "InvalidID")
	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: ids[:1], Tags: []types.Tag{{Key: aws.String("aws:owner"), Value: aws.String("v")}}})
	wantCode(t, err, "InvalidParameterValue")
	var many []types.Tag
	for i := range 51 {
		many = append(many, types.Tag{Key: aws.String("k" + strings.Repeat("x", i)), Value: aws.String("v")})
	}
	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: ids[:1], Tags: many})
	wantCode(t, err, "TagLimitExceeded")
}

// TestElasticIPLifecycle allocates an Elastic IP, associates it with a
// secondary address of an ENI, sees it on the ENI and in DescribeAddresses,
// refuses to release it while associated, disassociates and releases; the
// sixth allocation past EC2's default limit of five fails.
func TestElasticIPLifecycle(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	ni := e.createENI("big", 1)
	secondary := addresses(ni)[1]
	alloc, err := e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc})
	noErr(t, err)
	if !strings.HasPrefix(aws.ToString(alloc.AllocationId), "eipalloc-") || !strings.HasPrefix(aws.ToString(alloc.PublicIp), "198.51.100.") {
		t.Fatalf("allocation %+v", alloc)
	}
	assoc, err := e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: alloc.AllocationId, NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddress: aws.String(secondary)})
	noErr(t, err)
	got := e.eni(*ni.NetworkInterfaceId)
	if a := got.PrivateIpAddresses[1].Association; a == nil || aws.ToString(a.PublicIp) != aws.ToString(alloc.PublicIp) {
		t.Errorf("ENI address association %+v", a)
	}
	if got.Association != nil {
		t.Errorf("the primary address has no Elastic IP, got %+v", got.Association)
	}
	desc, err := e.ec2.DescribeAddresses(e.ctx, &ec2.DescribeAddressesInput{Filters: []types.Filter{{Name: aws.String("network-interface-id"), Values: []string{*ni.NetworkInterfaceId}}}})
	noErr(t, err)
	if len(desc.Addresses) != 1 || aws.ToString(desc.Addresses[0].AssociationId) != aws.ToString(assoc.AssociationId) || aws.ToString(desc.Addresses[0].PrivateIpAddress) != secondary {
		t.Errorf("addresses %+v", desc.Addresses)
	}
	other, err := e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
	noErr(t, err)
	_, err = e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: alloc.AllocationId, InstanceId: e.instanceByName("node-m5").InstanceId})
	wantCode(t, err, "Resource.AlreadyAssociated")
	_, err = e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: other.AllocationId, NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddress: aws.String("10.1.1.250")})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.ec2.ReleaseAddress(e.ctx, &ec2.ReleaseAddressInput{AllocationId: alloc.AllocationId})
	wantCode(t, err, "InvalidIPAddress.InUse")
	_, err = e.ec2.DisassociateAddress(e.ctx, &ec2.DisassociateAddressInput{AssociationId: assoc.AssociationId})
	noErr(t, err)
	_, err = e.ec2.DisassociateAddress(e.ctx, &ec2.DisassociateAddressInput{AssociationId: assoc.AssociationId})
	wantCode(t, err, "InvalidAssociationID.NotFound")
	_, err = e.ec2.ReleaseAddress(e.ctx, &ec2.ReleaseAddressInput{AllocationId: alloc.AllocationId})
	noErr(t, err)
	_, err = e.ec2.ReleaseAddress(e.ctx, &ec2.ReleaseAddressInput{AllocationId: alloc.AllocationId})
	wantCode(t, err, "InvalidAllocationID.NotFound")

	// Unassigning an address drops its Elastic IP association.
	_, err = e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: other.AllocationId, NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddress: aws.String(secondary)})
	noErr(t, err)
	_, err = e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: []string{secondary}})
	noErr(t, err)
	desc, err = e.ec2.DescribeAddresses(e.ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{*other.AllocationId}})
	noErr(t, err)
	if desc.Addresses[0].AssociationId != nil {
		t.Errorf("association survived the unassign: %+v", desc.Addresses[0])
	}

	for range 4 {
		_, err = e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
		noErr(t, err)
	}
	_, err = e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
	wantCode(t, err, "AddressLimitExceeded")
}
