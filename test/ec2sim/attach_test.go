package ec2sim_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

func fixed(d time.Duration) ec2sim.Range {
	return ec2sim.Range{Min: ec2sim.Duration(d), Max: ec2sim.Duration(d)}
}

// TestAttachAndDetachStateMachines walks one secondary ENI of an m5.large
// through attaching -> attached -> detaching -> available with a 3 s attach
// and 2 s detach delay on a manual clock: deleting fails while attached and
// while detaching, and succeeds once available.
func TestAttachAndDetachStateMachines(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{AttachDelay: fixed(3 * time.Second), DetachDelay: fixed(2 * time.Second)}))
	node := e.instanceByName("node-m5")
	ni := e.createENI("big", 2)
	id := ni.NetworkInterfaceId

	att, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: id, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1)})
	noErr(t, err)
	if len(aws.ToString(att.AttachmentId)) != len("eni-attach-")+17 || aws.ToInt32(att.NetworkCardIndex) != 0 {
		t.Errorf("attachment id %q card %d", aws.ToString(att.AttachmentId), aws.ToInt32(att.NetworkCardIndex))
	}
	got := e.eni(*id)
	if got.Status != types.NetworkInterfaceStatusInUse || got.Attachment.Status != types.AttachmentStatusAttaching ||
		aws.ToString(got.Attachment.InstanceId) != aws.ToString(node.InstanceId) || aws.ToInt32(got.Attachment.DeviceIndex) != 1 {
		t.Fatalf("right after attach: status %s attachment %+v", got.Status, got.Attachment)
	}
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id})
	wantCode(t, err, "InvalidParameterValue")

	e.clock.Advance(2999 * time.Millisecond)
	if s := e.eni(*id).Attachment.Status; s != types.AttachmentStatusAttaching {
		t.Fatalf("before the delay: %s", s)
	}
	e.clock.Advance(time.Millisecond)
	if s := e.eni(*id).Attachment.Status; s != types.AttachmentStatusAttached {
		t.Fatalf("after the delay: %s", s)
	}
	if n := len(e.instanceByName("node-m5").NetworkInterfaces); n != 2 {
		t.Errorf("instance shows %d ENIs, want 2", n)
	}

	_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
	noErr(t, err)
	got = e.eni(*id)
	if got.Status != types.NetworkInterfaceStatusInUse || got.Attachment.Status != types.AttachmentStatusDetaching {
		t.Fatalf("right after detach: status %s attachment %+v", got.Status, got.Attachment)
	}
	_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
	wantCode(t, err, "IncorrectState")
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id})
	wantCode(t, err, "InvalidParameterValue")

	e.clock.Advance(2 * time.Second)
	got = e.eni(*id)
	if got.Status != types.NetworkInterfaceStatusAvailable || got.Attachment != nil {
		t.Fatalf("after detach delay: status %s attachment %+v", got.Status, got.Attachment)
	}
	_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
	wantCode(t, err, "InvalidAttachmentID.NotFound")
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id})
	noErr(t, err)
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	// Its three addresses went back to the subnet.
	if got := aws.ToInt32(e.subnetByName("big").AvailableIpAddressCount); got != 251-2 {
		t.Errorf("available %d after delete, want 249", got)
	}
}

// TestAttachLimitsAndErrors covers what AttachNetworkInterface refuses: a
// busy device index, more ENIs than the type allows (t3.medium: 3), an ENI
// in another zone, an ENI already in use, unknown IDs and a second network
// card; and that the primary ENI cannot be
// detached.
func TestAttachLimitsAndErrors(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-t3")
	attach := func(eni *string, idx int32) (*ec2.AttachNetworkInterfaceOutput, error) {
		return e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: eni, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(idx)})
	}
	a, b, c := e.createENI("big", 0), e.createENI("big", 0), e.createENI("big", 0)
	_, err := attach(a.NetworkInterfaceId, 0)
	wantCode(t, err, "InvalidParameterValue") // index 0 holds the primary ENI
	_, err = attach(a.NetworkInterfaceId, 1)
	noErr(t, err)
	_, err = attach(b.NetworkInterfaceId, 1)
	wantCode(t, err, "InvalidParameterValue")
	_, err = attach(a.NetworkInterfaceId, 2)
	wantCode(t, err, "InvalidNetworkInterface.InUse")
	_, err = attach(b.NetworkInterfaceId, 2)
	noErr(t, err)
	_, err = attach(c.NetworkInterfaceId, 3)
	wantCode(t, err, "AttachmentLimitExceeded")

	far := e.createENI("other-zone", 0)
	_, err = attach(far.NetworkInterfaceId, 3)
	wantCode(t, err, "InvalidParameterCombination")
	_, err = attach(aws.String("eni-0123456789abcdef0"), 3)
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: c.NetworkInterfaceId, InstanceId: aws.String("i-0123456789abcdef0"), DeviceIndex: aws.Int32(1)})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: c.NetworkInterfaceId, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1), NetworkCardIndex: aws.Int32(1)})
	wantCode(t, err, "InvalidParameterValue")

	primary := node.NetworkInterfaces[0].Attachment.AttachmentId
	_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: primary})
	wantCode(t, err, "OperationNotPermitted")
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: node.NetworkInterfaces[0].NetworkInterfaceId})
	wantCode(t, err, "InvalidParameterValue")

	// An ENI holding more addresses than t3.medium allows (6) cannot attach.
	fat := e.createENI("big", 9)
	noErr(t, e.admin.TerminateInstance(e.ctx, aws.ToString(node.InstanceId)))
	m5 := e.instanceByName("node-m5")
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: fat.NetworkInterfaceId, InstanceId: m5.InstanceId, DeviceIndex: aws.Int32(1)})
	noErr(t, err) // m5.large allows 10
	_, err = attach(c.NetworkInterfaceId, 1)
	wantCode(t, err, "IncorrectInstanceState")
}

// TestTerminateInstanceDeletesOnlyDeleteOnTerminationENIs terminates a node
// with its primary ENI (DeleteOnTermination), one secondary ENI marked
// DeleteOnTermination and one not: the first two are gone, the third is
// available with its addresses, and the instance shows as terminated.
func TestTerminateInstanceDeletesOnlyDeleteOnTerminationENIs(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-m5")
	keep, drop := e.createENI("big", 1), e.createENI("big", 1)
	for i, ni := range []types.NetworkInterface{keep, drop} {
		att, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(int32(i + 1))})
		noErr(t, err)
		if i == 1 {
			_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: ni.NetworkInterfaceId,
				Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId, DeleteOnTermination: aws.Bool(true)}})
			noErr(t, err)
		}
	}
	before := aws.ToInt32(e.subnetByName("big").AvailableIpAddressCount)
	noErr(t, e.admin.TerminateInstance(e.ctx, aws.ToString(node.InstanceId)))

	left, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*keep.NetworkInterfaceId}})
	noErr(t, err)
	if ni := left.NetworkInterfaces[0]; ni.Status != types.NetworkInterfaceStatusAvailable || ni.Attachment != nil || len(ni.PrivateIpAddresses) != 2 {
		t.Errorf("kept ENI: %+v", ni)
	}
	for _, gone := range []*string{drop.NetworkInterfaceId, node.NetworkInterfaces[0].NetworkInterfaceId} {
		_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*gone}})
		wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	}
	// The primary (1) and the dropped ENI (2) freed three addresses.
	if got := aws.ToInt32(e.subnetByName("big").AvailableIpAddressCount); got != before+3 {
		t.Errorf("available %d, want %d", got, before+3)
	}
	after := e.instanceByName("node-m5")
	if after.State.Name != types.InstanceStateNameTerminated || aws.ToInt32(after.State.Code) != 48 || len(after.NetworkInterfaces) != 0 {
		t.Errorf("terminated instance: %+v", after.State)
	}
	noErr(t, e.admin.TerminateInstance(e.ctx, aws.ToString(node.InstanceId))) // again: no-op
}
