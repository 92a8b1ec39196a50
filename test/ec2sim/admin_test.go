package ec2sim_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestAdminAddInstanceJoinsANode adds a c5.large by subnet name: it gets the
// subnet's next free address, a primary ENI at device index 0 with
// DeleteOnTermination, a providerID for its Node, and shows up in
// DescribeInstances and its IMDS. Unknown types and subnets are refused.
func TestAdminAddInstanceJoinsANode(t *testing.T) {
	e := newEnv(t, nil)
	info, err := e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{
		InstanceType: "c5.large", SubnetID: "demo-nodes-b",
		Tags: []ec2sim.Tag{{Key: "Name", Value: "joined"}},
	})
	noErr(t, err)
	// demo-node-b1 holds 10.0.16.4.
	if info.PrivateIP != "10.0.16.5" || info.State != "running" || info.AvailabilityZone != "us-east-1b" ||
		info.ProviderID != "aws:///us-east-1b/"+info.InstanceID || !strings.HasPrefix(info.PrimaryENI, "eni-") {
		t.Errorf("info %+v", info)
	}
	in := e.instanceByName("joined")
	if aws.ToString(in.InstanceId) != info.InstanceID || in.InstanceType != types.InstanceTypeC5Large {
		t.Errorf("described %+v", in)
	}
	ni := in.NetworkInterfaces[0]
	if aws.ToString(ni.NetworkInterfaceId) != info.PrimaryENI || aws.ToInt32(ni.Attachment.DeviceIndex) != 0 || !aws.ToBool(ni.Attachment.DeleteOnTermination) {
		t.Errorf("primary ENI %+v", ni)
	}
	if got := metadata(t, e, e.imdsClient(info.InstanceID), "local-ipv4"); got != "10.0.16.5" {
		t.Errorf("IMDS local-ipv4 %q", got)
	}

	explicit, err := e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{InstanceType: "m5.large", SubnetID: aws.ToString(e.subnetByName("demo-nodes-a").SubnetId), PrivateIP: "10.0.1.1"})
	noErr(t, err)
	if explicit.PrivateIP != "10.0.1.1" {
		t.Errorf("explicit address %q", explicit.PrivateIP)
	}

	_, err = e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{InstanceType: "m5.gigantic", SubnetID: "demo-nodes-a"})
	var ae *ec2sim.APIError
	if !errors.As(err, &ae) || ae.Code != "InvalidParameterValue" || ae.HTTPStatus != http.StatusBadRequest {
		t.Errorf("unknown type: %v", err)
	}
	_, err = e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{InstanceType: "m5.large", SubnetID: "subnet-0123456789abcdef0"})
	if !errors.As(err, &ae) || ae.Code != "InvalidSubnetID.NotFound" || ae.HTTPStatus != http.StatusNotFound {
		t.Errorf("unknown subnet: %v", err)
	}
	err = e.admin.TerminateInstance(e.ctx, "i-0123456789abcdef0")
	if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusNotFound {
		t.Errorf("terminate unknown: %v", err)
	}
}

// TestAdminCountersDumpAndReset counts a few calls, including an unknown
// action, reads the dump, and resets the counters.
func TestAdminCountersDumpAndReset(t *testing.T) {
	e := newEnv(t, nil)
	noErr(t, e.admin.ResetCounters(e.ctx))
	_, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{})
	noErr(t, err)
	_, err = e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0123456789abcdef0"}})
	wantCode(t, err, "InvalidSubnetID.NotFound")
	e.post("Action=RunInstances&Version=2016-11-15")
	c := e.counters()
	want := ec2sim.Counters{
		Calls:     map[string]int64{"DescribeSubnets": 2, "Unknown": 1},
		Throttled: map[string]int64{},
		Errors:    map[string]map[string]int64{"DescribeSubnets": {"InvalidSubnetID.NotFound": 1}, "Unknown": {"InvalidAction": 1}},
	}
	if !countersEqual(c, want) {
		t.Errorf("counters %+v, want %+v", c, want)
	}
	d, err := e.admin.Dump(e.ctx)
	noErr(t, err)
	if d.Account != "123456789012" || len(d.Vpcs) != 1 || len(d.Subnets) != 4 || len(d.Instances) != 3 || len(d.NetworkInterfaces) != 3 || len(d.SecurityGroups) != 3 {
		t.Errorf("dump: %d vpcs %d subnets %d instances %d enis %d groups", len(d.Vpcs), len(d.Subnets), len(d.Instances), len(d.NetworkInterfaces), len(d.SecurityGroups))
	}
	noErr(t, e.admin.ResetCounters(e.ctx))
	if c := e.counters(); len(c.Calls) != 0 || len(c.Errors) != 0 {
		t.Errorf("after reset %+v", c)
	}
}

func countersEqual(a, b ec2sim.Counters) bool {
	eq := func(x, y map[string]int64) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if y[k] != v {
				return false
			}
		}
		return true
	}
	if !eq(a.Calls, b.Calls) || !eq(a.Throttled, b.Throttled) || len(a.Errors) != len(b.Errors) {
		return false
	}
	for k, v := range a.Errors {
		if !eq(v, b.Errors[k]) {
			return false
		}
	}
	return true
}
