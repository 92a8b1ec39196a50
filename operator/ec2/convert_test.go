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
