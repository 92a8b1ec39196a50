package ec2sim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestMutationConsistencyHidesNewENIsFromChanges turns on a 2 s mutation
// window alone: within it every call that changes a new ENI answers
// InvalidNetworkInterfaceID.NotFound while describes already show it; an
// ENI from the scenario is not affected; once the window has passed the
// same calls succeed.
func TestMutationConsistencyHidesNewENIsFromChanges(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{MutationConsistency: ec2sim.Duration(2 * time.Second)}))
	node := e.instanceByName("node-m5")
	ni := e.createENI("big", 2)
	id := ni.NetworkInterfaceId
	secondary := addresses(ni)[1]

	calls := []struct {
		action string
		call   func() error
	}{
		{"AttachNetworkInterface", func() error {
			_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: id, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1)})
			return err
		}},
		{"AssignPrivateIpAddresses", func() error {
			_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: id, SecondaryPrivateIpAddressCount: aws.Int32(1)})
			return err
		}},
		{"UnassignPrivateIpAddresses", func() error {
			_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: id, PrivateIpAddresses: []string{secondary}})
			return err
		}},
		{"ModifyNetworkInterfaceAttribute", func() error {
			_, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id, Description: &types.AttributeValue{Value: aws.String("pods")}})
			return err
		}},
		{"CreateTags", func() error {
			_, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{*id}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
			return err
		}},
		{"DeleteNetworkInterface", func() error {
			_, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id})
			return err
		}},
	}
	for _, c := range calls {
		if err := c.call(); !isCode(err, "InvalidNetworkInterfaceID.NotFound") {
			t.Errorf("%s inside the window: %v, want InvalidNetworkInterfaceID.NotFound", c.action, err)
		}
	}
	if got := e.eni(*id); len(got.PrivateIpAddresses) != 3 || got.Attachment != nil || len(got.TagSet) != 0 {
		t.Errorf("refused calls changed the ENI: %+v", got)
	}
	// The instance's own ENI is old: changing it works.
	_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: node.NetworkInterfaces[0].NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	noErr(t, err)

	e.clock.Advance(2 * time.Second)
	for _, c := range calls {
		if c.action == "DeleteNetworkInterface" {
			// Attached by now: detach first, as an operator would.
			got := e.eni(*id)
			_, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: got.Attachment.AttachmentId})
			noErr(t, err)
		}
		if err := c.call(); err != nil {
			t.Errorf("%s after the window: %v", c.action, err)
		}
	}
}

// TestEventualConsistencyHidesNewENIsFromEveryDescribe turns on a 2 s
// describe window alone: a new tagged ENI is absent from a describe by tag
// and, once attached (the mutation window is off), from its instance's
// networkInterfaceSet; both show it after the window.
func TestEventualConsistencyHidesNewENIsFromEveryDescribe(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{EventualConsistency: ec2sim.Duration(2 * time.Second)}))
	node := e.instanceByName("node-m5")
	out, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: e.subnetByName("big").SubnetId,
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface,
			Tags: []types.Tag{{Key: aws.String("enipam.io/cluster"), Value: aws.String("c1")}}}},
	})
	noErr(t, err)
	id := aws.ToString(out.NetworkInterface.NetworkInterfaceId)
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: &id, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1)})
	noErr(t, err)

	byTag := types.Filter{Name: aws.String("tag:enipam.io/cluster"), Values: []string{"c1"}}
	byInstance := types.Filter{Name: aws.String("attachment.instance-id"), Values: []string{aws.ToString(node.InstanceId)}}
	if got := describeIDs(t, e, byTag); len(got) != 0 {
		t.Errorf("describe by tag inside the window: %v", got)
	}
	if got := describeIDs(t, e, byInstance); slices.Contains(got, id) {
		t.Errorf("describe by instance inside the window: %v", got)
	}
	if n := len(e.instanceByName("node-m5").NetworkInterfaces); n != 1 {
		t.Errorf("instance shows %d ENIs inside the window, want its primary alone", n)
	}

	e.clock.Advance(2 * time.Second)
	if got := describeIDs(t, e, byTag); !slices.Equal(got, []string{id}) {
		t.Errorf("describe by tag after the window: %v", got)
	}
	if n := len(e.instanceByName("node-m5").NetworkInterfaces); n != 2 {
		t.Errorf("instance shows %d ENIs after the window, want 2", n)
	}
}

// TestConsistencyShareIsDeterministicPerSeed lets half of the new ENIs lag:
// which of twenty ENIs refuse a CreateTags is the same in two runs of the
// same scenario, and some do while others do not.
func TestConsistencyShareIsDeterministicPerSeed(t *testing.T) {
	lagging := func() []bool {
		e := newEnv(t, scenario(t, smallScenario))
		noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{MutationConsistency: ec2sim.Duration(time.Second), ConsistencyShare: 0.5}))
		var out []bool
		for range 20 {
			ni := e.createENI("big", 0)
			_, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{*ni.NetworkInterfaceId}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
			if err != nil {
				wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
			}
			out = append(out, err != nil)
		}
		return out
	}
	first, second := lagging(), lagging()
	if !slices.Equal(first, second) {
		t.Errorf("runs differ:\n%v\n%v", first, second)
	}
	if n := count(first); n == 0 || n == len(first) {
		t.Errorf("%d of %d ENIs lagged, want some", n, len(first))
	}
}

// TestRealisticProfileLagsSomeNewENIs: the realistic profile turns both
// windows on for a share of new ENIs, and a launched instance's primary
// ENI never lags.
func TestRealisticProfileLagsSomeNewENIs(t *testing.T) {
	sc := scenario(t, smallScenario)
	sc.Profile = ec2sim.ProfileRealistic
	st, err := ec2sim.NewState(sc, nil)
	noErr(t, err)
	tc := st.Timing()
	if tc.EventualConsistency <= 0 || tc.MutationConsistency <= 0 || tc.ConsistencyShare <= 0 || tc.ConsistencyShare >= 1 {
		t.Errorf("realistic timing %+v", tc)
	}

	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{EventualConsistency: ec2sim.Duration(time.Minute), MutationConsistency: ec2sim.Duration(time.Minute)}))
	info, err := e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{InstanceType: "m5.large", SubnetID: "big"})
	noErr(t, err)
	e.eni(info.PrimaryENI)
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &info.PrimaryENI, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	noErr(t, err)
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
