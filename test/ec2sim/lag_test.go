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

// enisWhere lists the IDs DescribeNetworkInterfaces answers for one filter.
func (e *env) enisWhere(name string, values ...string) []string {
	e.t.Helper()
	out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{{Name: aws.String(name), Values: values}}})
	noErr(e.t, err)
	var ids []string
	for _, ni := range out.NetworkInterfaces {
		ids = append(ids, aws.ToString(ni.NetworkInterfaceId))
	}
	return ids
}

// instanceENIs lists the ENI IDs DescribeInstances shows on an instance.
func (e *env) instanceENIs(id string) []string {
	e.t.Helper()
	out, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	noErr(e.t, err)
	var ids []string
	for _, ni := range out.Reservations[0].Instances[0].NetworkInterfaces {
		ids = append(ids, aws.ToString(ni.NetworkInterfaceId))
	}
	return ids
}

// TestAssignAndUnassignReachDescribesLate: with a 2 s assign window and a
// 3 s unassign window, the addresses of an Assign are missing from
// DescribeNetworkInterfaces (by ID and by address filter) and from
// DescribeInstances for 2 s while IMDS has them at once; an Unassign
// leaves them shown for 3 s; then describes are current.
func TestAssignAndUnassignReachDescribesLate(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	lag := ec2sim.LagConfig{Assign: fixed(2 * time.Second), Unassign: fixed(3 * time.Second)}
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{Lag: lag}))
	node := e.instanceByName("node-m5")
	id := aws.ToString(node.InstanceId)
	primary := node.NetworkInterfaces[0]
	eniID := aws.ToString(primary.NetworkInterfaceId)
	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &eniID, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	noErr(t, err)
	ip := aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress)

	shown := func() (byID, byFilter, inInstance, inIMDS bool) {
		t.Helper()
		byID = slices.Contains(addresses(e.eni(eniID)), ip)
		byFilter = len(e.enisWhere("private-ip-address", ip)) == 1
		inst := e.instanceByName("node-m5")
		inInstance = slices.Contains(addresses(types.NetworkInterface{PrivateIpAddresses: instancePrivateIPs(inst.NetworkInterfaces[0])}), ip)
		inIMDS = slices.Contains(macAddresses(t, e, id, aws.ToString(primary.MacAddress)), ip)
		return
	}
	if byID, byFilter, inInstance, inIMDS := shown(); byID || byFilter || inInstance || !inIMDS {
		t.Errorf("right after Assign: by ID %v, by filter %v, in instance %v, in IMDS %v; want only IMDS", byID, byFilter, inInstance, inIMDS)
	}
	e.clock.Advance(2 * time.Second)
	if byID, byFilter, inInstance, _ := shown(); !byID || !byFilter || !inInstance {
		t.Errorf("2 s after Assign: by ID %v, by filter %v, in instance %v; want everywhere", byID, byFilter, inInstance)
	}

	_, err = e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: &eniID, PrivateIpAddresses: []string{ip}})
	noErr(t, err)
	e.clock.Advance(2 * time.Second)
	if byID, byFilter, inInstance, inIMDS := shown(); !byID || !byFilter || !inInstance || inIMDS {
		t.Errorf("2 s after Unassign: by ID %v, by filter %v, in instance %v, in IMDS %v; want all but IMDS", byID, byFilter, inInstance, inIMDS)
	}
	e.clock.Advance(time.Second)
	if byID, byFilter, inInstance, _ := shown(); byID || byFilter || inInstance {
		t.Errorf("3 s after Unassign: by ID %v, by filter %v, in instance %v; want gone", byID, byFilter, inInstance)
	}
}

func instancePrivateIPs(ni types.InstanceNetworkInterface) []types.NetworkInterfacePrivateIpAddress {
	var out []types.NetworkInterfacePrivateIpAddress
	for _, a := range ni.PrivateIpAddresses {
		out = append(out, types.NetworkInterfacePrivateIpAddress{PrivateIpAddress: a.PrivateIpAddress})
	}
	return out
}

// TestAttachAndDetachReachDescribesLate: an attach is not in describes
// for its window (the ENI still available, not on the instance); a
// detach leaves the ENI attached in describes, in the instance's
// networkInterfaceSet and under attachment.instance-id, for its window,
// though EC2 itself has it available (no detach delay here): deleting it
// then works.
func TestAttachAndDetachReachDescribesLate(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	lag := ec2sim.LagConfig{Attach: fixed(time.Second), Detach: fixed(4 * time.Second)}
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{Lag: lag}))
	id := aws.ToString(e.instanceByName("node-m5").InstanceId)
	ni := e.createENI("big", 0)
	eniID := aws.ToString(ni.NetworkInterfaceId)
	att, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: &eniID, InstanceId: &id, DeviceIndex: aws.Int32(1)})
	noErr(t, err)
	if got := e.eni(eniID); got.Status != types.NetworkInterfaceStatusAvailable || slices.Contains(e.instanceENIs(id), eniID) {
		t.Errorf("right after Attach: status %s, instance ENIs %v; want available, not on the instance", got.Status, e.instanceENIs(id))
	}
	e.clock.Advance(time.Second)
	if got := e.eni(eniID); got.Status != types.NetworkInterfaceStatusInUse || !slices.Contains(e.instanceENIs(id), eniID) {
		t.Errorf("1 s after Attach: status %s, instance ENIs %v; want in use, on the instance", got.Status, e.instanceENIs(id))
	}

	_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
	noErr(t, err)
	e.clock.Advance(3 * time.Second)
	if got := e.eni(eniID); got.Attachment == nil || got.Attachment.Status != types.AttachmentStatusAttached ||
		!slices.Contains(e.instanceENIs(id), eniID) || !slices.Contains(e.enisWhere("attachment.instance-id", id), eniID) {
		t.Errorf("3 s after Detach: attachment %+v, on instance %v, by instance filter %v; want attached everywhere",
			got.Attachment, e.instanceENIs(id), e.enisWhere("attachment.instance-id", id))
	}
	e.clock.Advance(time.Second)
	if got := e.eni(eniID); got.Attachment != nil || slices.Contains(e.instanceENIs(id), eniID) || slices.Contains(e.enisWhere("attachment.instance-id", id), eniID) {
		t.Errorf("4 s after Detach: attachment %+v, still on the instance or under its filter", got.Attachment)
	}
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: &eniID})
	noErr(t, err)
}

// TestLaggedChangesShowInOrder: a tag change with a 1 s window made
// after an unassign with a 3 s window waits for it: describes never show
// the tag without the unassign.
func TestLaggedChangesShowInOrder(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{Lag: ec2sim.LagConfig{Unassign: fixed(3 * time.Second), Tags: fixed(time.Second)}}))
	ni := e.createENI("big", 1)
	id := aws.ToString(ni.NetworkInterfaceId)
	_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: &id, PrivateIpAddresses: addresses(ni)[1:]})
	noErr(t, err)
	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	noErr(t, err)
	for _, step := range []time.Duration{time.Second, time.Second} {
		e.clock.Advance(step)
		if got := e.eni(id); len(got.TagSet) != 0 || len(got.PrivateIpAddresses) != 2 || len(e.enisWhere("tag:k", "v")) != 0 {
			t.Errorf("before the unassign is shown: tags %v, addresses %v", got.TagSet, addresses(got))
		}
	}
	e.clock.Advance(time.Second)
	if got := e.eni(id); len(got.TagSet) != 1 || len(got.PrivateIpAddresses) != 1 || len(e.enisWhere("tag:k", "v")) != 1 {
		t.Errorf("3 s on: tags %v, addresses %v; want both changes", got.TagSet, addresses(got))
	}
}

// TestElasticIPChangesReachDescribesLate: an association is missing from
// DescribeAddresses and from the ENI for its window, a disassociation
// leaves both showing it for its window; associating again with the
// same address answers the same association.
func TestElasticIPChangesReachDescribesLate(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{Lag: ec2sim.LagConfig{Associate: fixed(2 * time.Second), Disassociate: fixed(time.Second)}}))
	ni := e.createENI("big", 0)
	id := aws.ToString(ni.NetworkInterfaceId)
	alloc, err := e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
	noErr(t, err)
	assoc, err := e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: alloc.AllocationId, NetworkInterfaceId: &id})
	noErr(t, err)
	again, err := e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: alloc.AllocationId, NetworkInterfaceId: &id})
	noErr(t, err)
	if aws.ToString(again.AssociationId) != aws.ToString(assoc.AssociationId) {
		t.Errorf("associating again answered %s, want %s", aws.ToString(again.AssociationId), aws.ToString(assoc.AssociationId))
	}
	shown := func() (onAddress, onENI bool) {
		t.Helper()
		out, err := e.ec2.DescribeAddresses(e.ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{*alloc.AllocationId}})
		noErr(t, err)
		return out.Addresses[0].AssociationId != nil, e.eni(id).Association != nil
	}
	if a, n := shown(); a || n {
		t.Errorf("right after Associate: on address %v, on ENI %v; want neither", a, n)
	}
	e.clock.Advance(2 * time.Second)
	if a, n := shown(); !a || !n {
		t.Errorf("2 s after Associate: on address %v, on ENI %v; want both", a, n)
	}
	_, err = e.ec2.DisassociateAddress(e.ctx, &ec2.DisassociateAddressInput{AssociationId: assoc.AssociationId})
	noErr(t, err)
	if a, n := shown(); !a || !n {
		t.Errorf("right after Disassociate: on address %v, on ENI %v; want both still", a, n)
	}
	e.clock.Advance(time.Second)
	if a, n := shown(); a || n {
		t.Errorf("1 s after Disassociate: on address %v, on ENI %v; want neither", a, n)
	}
}

// TestLagShareIsSeeded: with a share of one half, about half of forty
// tag changes lag, the same ones in two runs of one seed.
func TestLagShareIsSeeded(t *testing.T) {
	lagged := func() []int {
		e := newEnv(t, scenario(t, smallScenario))
		noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{Lag: ec2sim.LagConfig{Tags: fixed(time.Second), Share: 0.5}}))
		id := aws.ToString(e.createENI("big", 0).NetworkInterfaceId)
		var out []int
		for i := range 40 {
			_, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{{Key: aws.String("n"), Value: aws.String(string(rune('a' + i%26)))}}})
			noErr(t, err)
			if len(e.eni(id).TagSet) == 0 || aws.ToString(e.eni(id).TagSet[0].Value) != string(rune('a'+i%26)) {
				out = append(out, i)
			}
			e.clock.Advance(time.Second)
		}
		return out
	}
	a, b := lagged(), lagged()
	if len(a) < 10 || len(a) > 30 || !slices.Equal(a, b) {
		t.Errorf("lagged changes %v and %v: want 10 to 30 of 40, the same in both runs", a, b)
	}
}

// TestRealisticProfileLagsEveryMutation: the realistic profile gives
// every kind of change a window; the default none.
func TestRealisticProfileLagsEveryMutation(t *testing.T) {
	def, err := ec2sim.NewState(scenario(t, smallScenario), nil)
	noErr(t, err)
	if got := def.Timing().Lag; got != (ec2sim.LagConfig{}) {
		t.Errorf("default profile lags %+v", got)
	}
	sc := scenario(t, smallScenario)
	sc.Profile = ec2sim.ProfileRealistic
	real, err := ec2sim.NewState(sc, nil)
	noErr(t, err)
	lag := real.Timing().Lag
	for name, r := range map[string]ec2sim.Range{"assign": lag.Assign, "unassign": lag.Unassign, "reassign": lag.Reassign,
		"attach": lag.Attach, "detach": lag.Detach, "tags": lag.Tags, "associate": lag.Associate, "disassociate": lag.Disassociate} {
		if r.Max <= 0 {
			t.Errorf("realistic profile: no %s window", name)
		}
	}
	if _, err := ec2sim.ParseScenario([]byte(smallScenario + "timing: {lag: {share: 2}}\n")); err == nil {
		t.Error("a lag share of 2 was accepted")
	}
}
