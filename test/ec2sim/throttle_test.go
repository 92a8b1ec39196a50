package ec2sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestThrottlingSDKRetryerBacksOff gives AssignPrivateIpAddresses a bucket
// of 2 refilling at 1/s on a frozen clock. Two calls pass; the third is
// refused with RequestLimitExceeded on each of the SDK's three attempts and
// fails; once the clock moves while the SDK backs off, the retry passes.
// Counts come from the emulator's counters.
func TestThrottlingSDKRetryerBacksOff(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetThrottling(e.ctx, ec2sim.ThrottleConfig{Enabled: true, Buckets: map[string]ec2sim.BucketConfig{
		"AssignPrivateIpAddresses": {Size: 2, RefillPerSecond: 1},
	}}))
	eni := e.instanceByName("node-m5").NetworkInterfaces[0].NetworkInterfaceId
	assign := func() error {
		_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(1)})
		return err
	}
	noErr(t, assign())
	noErr(t, assign())
	wantCode(t, assign(), "RequestLimitExceeded")
	c := e.counters()
	if c.Calls["AssignPrivateIpAddresses"] != 5 || c.Throttled["AssignPrivateIpAddresses"] != 3 || c.Succeeded("AssignPrivateIpAddresses") != 2 {
		t.Errorf("counters after exhaustion: calls %d throttled %d", c.Calls["AssignPrivateIpAddresses"], c.Throttled["AssignPrivateIpAddresses"])
	}
	if got := e.backoff.retries.Load(); got != 2 {
		t.Errorf("the SDK backed off %d times, want 2", got)
	}
	// Other actions have buckets of their own.
	_, err := e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{})
	noErr(t, err)

	noErr(t, e.admin.ResetCounters(e.ctx))
	e.backoff.onBackoff = func() { e.clock.Advance(time.Second) }
	noErr(t, assign())
	c = e.counters()
	if c.Calls["AssignPrivateIpAddresses"] != 2 || c.Throttled["AssignPrivateIpAddresses"] != 1 {
		t.Errorf("after a backoff long enough: calls %d throttled %d", c.Calls["AssignPrivateIpAddresses"], c.Throttled["AssignPrivateIpAddresses"])
	}
}

// TestThrottlingDefaultBucketsAndScale checks EC2's default describe bucket
// (100 tokens), its scaling, and the separate, smaller bucket of
// unfiltered, unpaginated DescribeNetworkInterfaces.
func TestThrottlingDefaultBucketsAndScale(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	once := e.newEC2Client(1)
	burst := func(call func() error) (passed int) {
		for range 200 {
			if err := call(); err != nil {
				wantCode(t, err, "RequestLimitExceeded")
				return passed
			}
			passed++
		}
		return passed
	}
	vpcs := func() error { _, err := once.DescribeVpcs(context.Background(), &ec2.DescribeVpcsInput{}); return err }

	noErr(t, e.admin.SetThrottling(e.ctx, ec2sim.ThrottleConfig{Enabled: true}))
	if got := burst(vpcs); got != 100 {
		t.Errorf("default describe bucket let %d calls through, want 100", got)
	}
	noErr(t, e.admin.SetThrottling(e.ctx, ec2sim.ThrottleConfig{Enabled: true, Scale: 0.1}))
	if got := burst(vpcs); got != 10 {
		t.Errorf("scaled bucket let %d calls through, want 10", got)
	}

	noErr(t, e.admin.SetThrottling(e.ctx, ec2sim.ThrottleConfig{Enabled: true}))
	unfiltered := func() error {
		_, err := once.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{})
		return err
	}
	filtered := func() error {
		_, err := once.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{
			Filters: []types.Filter{{Name: aws.String("status"), Values: []string{"in-use"}}},
		})
		return err
	}
	if got := burst(unfiltered); got != 50 {
		t.Errorf("unfiltered bucket let %d calls through, want 50", got)
	}
	if got := burst(filtered); got != 100 {
		t.Errorf("filtered bucket let %d calls through, want 100", got)
	}
	c := e.counters()
	if c.Throttled["DescribeNetworkInterfaces"] != 2 || c.Throttled["DescribeVpcs"] != 2 {
		t.Errorf("throttled %v", c.Throttled)
	}
	noErr(t, e.admin.SetThrottling(e.ctx, ec2sim.ThrottleConfig{}))
	noErr(t, vpcs())
}

// TestFaultInjection fails the next two AssignPrivateIpAddresses with
// InternalError (the SDK retries and succeeds on the third attempt), then
// one call with UnauthorizedOperation (403, not retried), then every call
// at rate 1; clearing the rules restores service. A scenario can carry
// rules from the start.
func TestFaultInjection(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	eni := e.instanceByName("node-m5").NetworkInterfaces[0].NetworkInterfaceId
	assign := func() error {
		_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(1)})
		return err
	}
	noErr(t, e.admin.SetFaults(e.ctx, ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{{Action: "AssignPrivateIpAddresses", Code: "InternalError", Count: 2}}}))
	noErr(t, assign())
	c := e.counters()
	if c.Calls["AssignPrivateIpAddresses"] != 3 || c.ErrorCount("AssignPrivateIpAddresses", "InternalError") != 2 || e.backoff.retries.Load() != 2 {
		t.Errorf("next-2 faults: calls %d errors %v retries %d", c.Calls["AssignPrivateIpAddresses"], c.Errors, e.backoff.retries.Load())
	}

	noErr(t, e.admin.SetFaults(e.ctx, ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{{Action: "AssignPrivateIpAddresses", Code: "UnauthorizedOperation", Count: 1}}}))
	wantCode(t, assign(), "UnauthorizedOperation")
	noErr(t, assign())

	noErr(t, e.admin.SetFaults(e.ctx, ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{{Code: "InvalidParameterValue", Message: "chaos", Rate: 1}}}))
	_, err := e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{})
	wantCode(t, err, "InvalidParameterValue")
	noErr(t, e.admin.SetFaults(e.ctx, ec2sim.FaultConfig{}))
	_, err = e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{})
	noErr(t, err)

	err = e.admin.SetFaults(e.ctx, ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{{Code: "X"}}})
	if err == nil {
		t.Error("a rule that never fires was accepted")
	}

	sc := scenario(t, smallScenario+`
faults:
  rules:
  - {action: DescribeSubnets, code: RequestLimitExceeded, count: 5}
`)
	e2 := newEnv(t, sc)
	_, err = e2.newEC2Client(1).DescribeSubnets(e2.ctx, &ec2.DescribeSubnetsInput{})
	wantCode(t, err, "RequestLimitExceeded")
}

// TestLatencyInjection delays one action by 40 ms and checks the call took
// at least that long, and that other actions are not delayed by default.
func TestLatencyInjection(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	d := 40 * time.Millisecond
	noErr(t, e.admin.SetLatency(e.ctx, ec2sim.LatencyConfig{Actions: map[string]ec2sim.Range{"DescribeVpcs": fixed(d)}}))
	start := time.Now()
	_, err := e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{})
	noErr(t, err)
	if took := time.Since(start); took < d {
		t.Errorf("DescribeVpcs took %v, want at least %v", took, d)
	}
	err = e.admin.SetLatency(e.ctx, ec2sim.LatencyConfig{Default: ec2sim.Range{Min: -1}})
	if err == nil {
		t.Error("negative latency accepted")
	}
	if r := ec2sim.RealisticLatency(); r.Actions["DescribeNetworkInterfaces"].Max == 0 || r.Default.Min == 0 {
		t.Errorf("realistic latency %+v", r)
	}
}
