package ec2sim_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

func (e *env) instanceState(id string) types.InstanceStateName {
	e.t.Helper()
	out, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	noErr(e.t, err)
	return out.Reservations[0].Instances[0].State.Name
}

// eniGone reports whether DescribeNetworkInterfaces no longer knows id.
func (e *env) eniGone(id string) bool {
	e.t.Helper()
	_, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	if isCode(err, "InvalidNetworkInterfaceID.NotFound") {
		return true
	}
	noErr(e.t, err)
	return false
}

// TestTerminationTakesTime terminates an m5.large with two secondary
// ENIs under a 30 s shutting-down and a 5 s detach: the instance is
// shutting-down, both ENIs detaching and no attach is taken; the ENI
// kept on termination is available after 5 s; at 30 s the instance is
// terminated, its primary and its DeleteOnTermination ENI deleted, and
// IMDS, up until then, answers no more.
func TestTerminationTakesTime(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{TerminateDelay: fixed(30 * time.Second), DetachDelay: fixed(5 * time.Second)}))
	node := e.instanceByName("node-m5")
	id := aws.ToString(node.InstanceId)
	primary := aws.ToString(node.NetworkInterfaces[0].NetworkInterfaceId)
	kept := aws.ToString(e.attachedENI(id, 1, 0).NetworkInterfaceId)
	doomed := e.attachedENI(id, 2, 0)
	_, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: doomed.NetworkInterfaceId,
		Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: doomed.Attachment.AttachmentId, DeleteOnTermination: aws.Bool(true)}})
	noErr(t, err)
	c := e.imdsClient(id)

	noErr(t, e.admin.TerminateInstance(e.ctx, id))
	if got := e.instanceState(id); got != types.InstanceStateNameShuttingDown {
		t.Errorf("state right after terminate %s, want shutting-down", got)
	}
	for _, eni := range []string{kept, aws.ToString(doomed.NetworkInterfaceId)} {
		if got := e.eni(eni); got.Attachment == nil || got.Attachment.Status != types.AttachmentStatusDetaching {
			t.Errorf("ENI %s right after terminate: attachment %+v, want detaching", eni, got.Attachment)
		}
	}
	spare := e.createENI("big", 0)
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: spare.NetworkInterfaceId, InstanceId: &id, DeviceIndex: aws.Int32(3)})
	wantCode(t, err, "IncorrectInstanceState")
	if got := metadata(t, e, c, "instance-id"); got != id {
		t.Errorf("IMDS while shutting down: %q", got)
	}

	e.clock.Advance(5 * time.Second)
	if got := e.eni(kept); got.Status != types.NetworkInterfaceStatusAvailable {
		t.Errorf("kept ENI after its detach: %s, want available", got.Status)
	}
	if got := e.eni(aws.ToString(doomed.NetworkInterfaceId)); got.Attachment == nil || got.Attachment.Status != types.AttachmentStatusDetaching {
		t.Errorf("DeleteOnTermination ENI before the end: %+v, want still detaching", got.Attachment)
	}
	e.clock.Advance(25 * time.Second)
	if got := e.instanceState(id); got != types.InstanceStateNameTerminated {
		t.Errorf("state at 30 s %s, want terminated", got)
	}
	if !e.eniGone(primary) || !e.eniGone(aws.ToString(doomed.NetworkInterfaceId)) || e.eniGone(kept) {
		t.Errorf("at the end: primary gone %v, DeleteOnTermination ENI gone %v, kept ENI gone %v; want gone, gone, kept",
			e.eniGone(primary), e.eniGone(aws.ToString(doomed.NetworkInterfaceId)), e.eniGone(kept))
	}
	_, err = c.GetMetadata(e.ctx, &imds.GetMetadataInput{Path: "instance-id"})
	if err == nil {
		t.Error("IMDS of a terminated instance answered")
	}
}

// TestStopTakesTime stops an instance under a 20 s stopping: stopping,
// refusing attachments; then stopped, its ENIs still attached, taking
// an attachment again, IMDS silent.
func TestStopTakesTime(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{StopDelay: fixed(20 * time.Second)}))
	id := aws.ToString(e.instanceByName("node-m5").InstanceId)
	sec := aws.ToString(e.attachedENI(id, 1, 0).NetworkInterfaceId)
	c := e.imdsClient(id)
	noErr(t, e.admin.StopInstance(e.ctx, id))
	spare := e.createENI("big", 0)
	attach := func() error {
		_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: spare.NetworkInterfaceId, InstanceId: &id, DeviceIndex: aws.Int32(2)})
		return err
	}
	if got := e.instanceState(id); got != types.InstanceStateNameStopping {
		t.Errorf("state right after stop %s, want stopping", got)
	}
	wantCode(t, attach(), "IncorrectInstanceState")
	e.clock.Advance(20 * time.Second)
	if got := e.instanceState(id); got != types.InstanceStateNameStopped {
		t.Errorf("state at 20 s %s, want stopped", got)
	}
	if got := e.eni(sec); got.Status != types.NetworkInterfaceStatusInUse {
		t.Errorf("secondary ENI of a stopped instance: %s, want in-use", got.Status)
	}
	noErr(t, attach())
	if _, err := c.GetMetadata(e.ctx, &imds.GetMetadataInput{Path: "instance-id"}); err == nil {
		t.Error("IMDS of a stopped instance answered")
	}
	noErr(t, e.admin.StopInstance(e.ctx, id)) // again: no-op
	noErr(t, e.admin.TerminateInstance(e.ctx, id))
	if err := e.admin.StopInstance(e.ctx, id); err == nil {
		t.Error("stopped a terminated instance")
	}
}

// TestIMDSShowsElasticIPs: an Elastic IP on the primary address gives
// public-ipv4 and public-hostname (eu-west-1's form); per MAC,
// public-ipv4s and ipv4-associations/ list every Elastic IP of the
// interface; without one the keys are absent.
func TestIMDSShowsElasticIPs(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-m5")
	id := aws.ToString(node.InstanceId)
	c := e.imdsClient(id)
	if _, err := c.GetMetadata(e.ctx, &imds.GetMetadataInput{Path: "public-ipv4"}); err == nil {
		t.Error("public-ipv4 without an Elastic IP")
	}
	sec := e.attachedENI(id, 1, 1)
	var pubs []string
	for _, target := range []struct{ eni, ip string }{
		{aws.ToString(node.NetworkInterfaces[0].NetworkInterfaceId), aws.ToString(node.PrivateIpAddress)},
		{aws.ToString(sec.NetworkInterfaceId), addresses(sec)[1]},
	} {
		alloc, err := e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
		noErr(t, err)
		_, err = e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: alloc.AllocationId, NetworkInterfaceId: &target.eni, PrivateIpAddress: &target.ip})
		noErr(t, err)
		pubs = append(pubs, aws.ToString(alloc.PublicIp))
	}
	if got := metadata(t, e, c, "public-ipv4"); got != pubs[0] {
		t.Errorf("public-ipv4 %q, want %s", got, pubs[0])
	}
	if got, want := metadata(t, e, c, "public-hostname"), "ec2-"+dashedIP(pubs[0])+".eu-west-1.compute.amazonaws.com"; got != want {
		t.Errorf("public-hostname %q, want %q", got, want)
	}
	primaryMAC := "network/interfaces/macs/" + aws.ToString(node.NetworkInterfaces[0].MacAddress) + "/"
	secMAC := "network/interfaces/macs/" + aws.ToString(sec.MacAddress) + "/"
	for path, want := range map[string]string{
		primaryMAC + "public-ipv4s":                 pubs[0],
		primaryMAC + "ipv4-associations/" + pubs[0]: aws.ToString(node.PrivateIpAddress),
		secMAC + "public-ipv4s":                     pubs[1],
		secMAC + "ipv4-associations":                pubs[1],
		secMAC + "ipv4-associations/" + pubs[1]:     addresses(sec)[1],
	} {
		if got := metadata(t, e, c, path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	var notFound interface{ HTTPStatusCode() int }
	_, err := c.GetMetadata(e.ctx, &imds.GetMetadataInput{Path: secMAC + "public-hostname"})
	if err == nil || !errors.As(err, &notFound) || notFound.HTTPStatusCode() != 404 {
		t.Errorf("public-hostname of an interface whose primary address has no Elastic IP: %v, want 404", err)
	}
}

// TestRealisticProfileEndsInstancesOverTime: the realistic profile sets
// shutting-down and stopping times and a token lifetime; the default
// none.
func TestRealisticProfileEndsInstancesOverTime(t *testing.T) {
	sc := scenario(t, smallScenario)
	sc.Profile = ec2sim.ProfileRealistic
	real, err := ec2sim.NewState(sc, nil)
	noErr(t, err)
	if tm := real.Timing(); tm.TerminateDelay.Min <= 0 || tm.StopDelay.Min <= 0 || tm.TokenTTL <= 0 {
		t.Errorf("realistic timing %+v: want terminate and stop delays and a token lifetime", tm)
	}
	def, err := ec2sim.NewState(scenario(t, smallScenario), nil)
	noErr(t, err)
	if tm := def.Timing(); tm.TerminateDelay.Max != 0 || tm.StopDelay.Max != 0 || tm.TokenTTL != 0 {
		t.Errorf("default timing %+v: want none", tm)
	}
}
