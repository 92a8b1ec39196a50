package ec2sim_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestDryRunChecksTheResourcesFirst: a DryRun naming an ENI, instance,
// subnet or attachment that does not exist answers that NotFound, as EC2
// does; one naming existing resources answers DryRunOperation and changes
// nothing; a new ENI inside the mutation window is NotFound to a dry run
// too.
func TestDryRunChecksTheResourcesFirst(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-m5")
	ni := e.createENI("big", 1)
	missing := aws.String("eni-0123456789abcdef0")
	dry := aws.Bool(true)
	before := e.counters().Calls["CreateNetworkInterface"]

	cases := []struct {
		name string
		call func() error
		code string
	}{
		{"delete missing ENI", func() error {
			_, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: missing, DryRun: dry})
			return err
		}, "InvalidNetworkInterfaceID.NotFound"},
		{"modify missing ENI", func() error {
			_, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: missing, SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)}, DryRun: dry})
			return err
		}, "InvalidNetworkInterfaceID.NotFound"},
		{"attach to missing instance", func() error {
			_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: aws.String("i-0123456789abcdef0"), DeviceIndex: aws.Int32(1), DryRun: dry})
			return err
		}, "InvalidInstanceID.NotFound"},
		{"create in missing subnet", func() error {
			_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0123456789abcdef0"), DryRun: dry})
			return err
		}, "InvalidSubnetID.NotFound"},
		{"detach missing attachment", func() error {
			_, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String("eni-attach-0123456789abcdef0"), DryRun: dry})
			return err
		}, "InvalidAttachmentID.NotFound"},
		{"tag missing ENI", func() error {
			_, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{*missing}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}, DryRun: dry})
			return err
		}, "InvalidNetworkInterfaceID.NotFound"},
		{"describe missing ENI", func() error {
			_, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*missing}, DryRun: dry})
			return err
		}, "InvalidNetworkInterfaceID.NotFound"},
		{"malformed ID", func() error {
			_, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String("eni-nope"), DryRun: dry})
			return err
		}, "InvalidNetworkInterfaceID.Malformed"},
		{"delete existing ENI", func() error {
			_, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, DryRun: dry})
			return err
		}, "DryRunOperation"},
		{"modify existing ENI", func() error {
			_, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: ni.NetworkInterfaceId, SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)}, DryRun: dry})
			return err
		}, "DryRunOperation"},
		{"attach existing", func() error {
			_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1), DryRun: dry})
			return err
		}, "DryRunOperation"},
		{"create in existing subnet", func() error {
			_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: e.subnetByName("big").SubnetId, DryRun: dry})
			return err
		}, "DryRunOperation"},
	}
	for _, c := range cases {
		if err := c.call(); !isCode(err, c.code) {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	got := e.eni(*ni.NetworkInterfaceId)
	if !aws.ToBool(got.SourceDestCheck) || got.Attachment != nil {
		t.Errorf("dry runs changed the ENI: source/dest check %v, attachment %+v", aws.ToBool(got.SourceDestCheck), got.Attachment)
	}
	// AssignPrivateIpAddresses and UnassignPrivateIpAddresses take no
	// DryRun on EC2: the parameter is unknown to them.
	for _, action := range []string{"AssignPrivateIpAddresses&SecondaryPrivateIpAddressCount=1", "UnassignPrivateIpAddresses&PrivateIpAddress.1=" + addresses(ni)[1]} {
		if _, got := e.post("Action=" + action + "&NetworkInterfaceId=" + *ni.NetworkInterfaceId + "&DryRun=true&Version=2016-11-15"); got.Code != "UnknownParameter" {
			t.Errorf("%s with DryRun: %s", action, got.Code)
		}
	}
	all, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{})
	noErr(t, err)
	if len(all.NetworkInterfaces) != 3 {
		t.Errorf("%d ENIs after dry runs, want 3", len(all.NetworkInterfaces))
	}
	if n := e.counters().Calls["CreateNetworkInterface"] - before; n != 2 {
		t.Errorf("%d CreateNetworkInterface calls counted, want 2", n)
	}

	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{MutationConsistency: ec2sim.Duration(time.Second)}))
	young := e.createENI("big", 0)
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: young.NetworkInterfaceId, DryRun: dry})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
}

// TestDetachWhileAttachingIsIncorrectState: with a 3 s attach delay, a
// detach during "attaching" is refused (IncorrectState) and leaves the
// attachment to complete; once attached the detach goes through.
func TestDetachWhileAttachingIsIncorrectState(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{AttachDelay: fixed(3 * time.Second)}))
	node := e.instanceByName("node-m5")
	ni := e.createENI("big", 0)
	att, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1)})
	noErr(t, err)
	_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
	wantCode(t, err, "IncorrectState")
	_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId, Force: aws.Bool(true)})
	wantCode(t, err, "IncorrectState")
	e.clock.Advance(3 * time.Second)
	if s := e.eni(*ni.NetworkInterfaceId).Attachment.Status; s != types.AttachmentStatusAttached {
		t.Fatalf("attachment %s after the delay", s)
	}
	_, err = e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
	noErr(t, err)
}

// TestAttachBeyondTheTypesDeviceIndexes: a t3.medium has device indexes 0
// to 2; index 5 is refused (InvalidParameterValue) although a slot is free,
// while a full instance answers AttachmentLimitExceeded whatever the index.
func TestAttachBeyondTheTypesDeviceIndexes(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-t3")
	attach := func(ni types.NetworkInterface, idx int32) error {
		_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(idx)})
		return err
	}
	a, b, c := e.createENI("big", 0), e.createENI("big", 0), e.createENI("big", 0)
	wantCode(t, attach(a, 5), "InvalidParameterValue")
	wantCode(t, attach(a, 3), "InvalidParameterValue")
	noErr(t, attach(a, 2))
	noErr(t, attach(b, 1))
	err := attach(c, 5)
	wantCode(t, err, "AttachmentLimitExceeded")
	if msg := apiMessage(err); msg != "Interface count 4 exceeds the limit for t3.medium" {
		t.Errorf("message %q", msg)
	}
}

// TestFailedCreateNamesAndConsumesNoENIID: a create refused for too many
// addresses names no ENI in its message, and the next create gets the ID
// it would have got without the refusal.
func TestFailedCreateNamesAndConsumesNoENIID(t *testing.T) {
	nextID := func(fail bool) string {
		e := newEnv(t, scenario(t, smallScenario))
		if fail {
			_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: e.subnetByName("big").SubnetId, SecondaryPrivateIpAddressCount: aws.Int32(64)})
			wantCode(t, err, "PrivateIpAddressLimitExceeded")
			if msg := apiMessage(err); strings.Contains(msg, "eni-") || msg != "Number of private addresses will exceed limit." {
				t.Errorf("message %q", msg)
			}
			_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: e.subnetByName("tiny").SubnetId, SecondaryPrivateIpAddressCount: aws.Int32(11)})
			wantCode(t, err, "InsufficientFreeAddressesInSubnet")
		}
		return aws.ToString(e.createENI("big", 0).NetworkInterfaceId)
	}
	if clean, after := nextID(false), nextID(true); clean != after {
		t.Errorf("a refused create moved the IDs: %s, then %s", clean, after)
	}
}

// TestSubnetFullForms: by default a full subnet answers addresses with
// InsufficientFreeAddressesInSubnet, prefixes it has too few addresses
// for with InvalidParameterValue "There aren't sufficient free Ipv4
// addresses or prefixes" (EC2's words, which clients match); a forced
// form (scenario key subnetFullError or SetSubnetFullError) answers every
// case alike.
func TestSubnetFullForms(t *testing.T) {
	const (
		insufficient = "The specified subnet does not have enough free addresses to satisfy the request."
		noRoom       = "There aren't sufficient free Ipv4 addresses or prefixes"
		cidrBlocks   = "The specified subnet does not have enough free cidr blocks to satisfy the request"
	)
	type answer struct{ code, message string }
	try := func(e *env) (addrs, prefixes answer) {
		tiny := e.subnetByName("tiny").SubnetId // 11 free
		ask := func(in *ec2.CreateNetworkInterfaceInput) answer {
			in.SubnetId = tiny
			_, err := e.ec2.CreateNetworkInterface(e.ctx, in)
			var ae smithy.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("want an API error, got %v", err)
			}
			return answer{ae.ErrorCode(), ae.ErrorMessage()}
		}
		return ask(&ec2.CreateNetworkInterfaceInput{SecondaryPrivateIpAddressCount: aws.Int32(11)}),
			ask(&ec2.CreateNetworkInterfaceInput{Ipv4PrefixCount: aws.Int32(1)})
	}

	e := newEnv(t, scenario(t, smallScenario))
	addrs, prefixes := try(e)
	if addrs != (answer{"InsufficientFreeAddressesInSubnet", insufficient}) || prefixes != (answer{"InvalidParameterValue", noRoom}) {
		t.Errorf("default forms: addresses %v, prefixes %v", addrs, prefixes)
	}
	for code, msg := range map[string]string{"InsufficientFreeAddressesInSubnet": insufficient, "InvalidParameterValue": noRoom, "InsufficientCidrBlocks": cidrBlocks} {
		noErr(t, e.sim.State().SetSubnetFullError(code))
		if a, p := try(e); a != (answer{code, msg}) || p != a {
			t.Errorf("forced %s: addresses %v, prefixes %v", code, a, p)
		}
		sc := scenario(t, smallScenario+"subnetFullError: "+code+"\n")
		if a, _ := try(newEnv(t, sc)); a.code != code {
			t.Errorf("scenario key %s: %v", code, a)
		}
	}
	if err := e.sim.State().SetSubnetFullError("SubnetFull"); err == nil {
		t.Error("an unknown form was accepted")
	}
	_, err := ec2sim.ParseScenario([]byte(smallScenario + "subnetFullError: Full\n"))
	var se *ec2sim.ScenarioError
	if !errors.As(err, &se) || se.Path != "subnetFullError" {
		t.Errorf("bad subnetFullError: %v", err)
	}
}

func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return ""
}
