package cloudfake_test

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
	"github.com/enipam/enipam/test/ec2sim/state"
)

func newFake(t *testing.T) *cloudfake.Cloud {
	t.Helper()
	sc, err := state.ParseScenario([]byte(scenarioYAML))
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.NewState(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cloudfake.New(st)
}

// TestHooksRefuseOrLoseTheNthCall: a table test's tools. A Before hook on
// the first Unassign answers EC2's throttling (as a *cloud.Error, the
// address stays); an After hook on the next one "crashes" right after EC2
// unassigned (the address is gone, the caller sees the crash); a hook for
// the second call lets the first through; a hook for every call fires
// every time; calls are counted per EC2 action.
func TestHooksRefuseOrLoseTheNthCall(t *testing.T) {
	ctx := context.Background()
	c := newFake(t)
	eni, err := c.CreateENI(ctx, cloud.CreateENIRequest{SubnetID: big, SecondaryIPs: 3})
	if err != nil {
		t.Fatal(err)
	}
	holds := func(ip netip.Addr) bool {
		t.Helper()
		got, err := c.GetENIs(ctx, []string{eni.ID})
		if err != nil || len(got) != 1 {
			t.Fatalf("GetENIs: %v %v", got, err)
		}
		return slices.Contains(got[0].IPs, ip)
	}

	c.Before(cloudfake.UnassignPrivateIpAddresses, 1, cloudfake.Fail(state.NewAPIError("RequestLimitExceeded", "Request limit exceeded.")))
	err = c.UnassignIPs(ctx, eni.ID, eni.IPs[:1])
	var ce *cloud.Error
	if !errors.As(err, &ce) || !errors.Is(err, cloud.ErrThrottled) || ce.Action != "UnassignPrivateIpAddresses" || ce.Code != "RequestLimitExceeded" {
		t.Errorf("refused call: %#v", err)
	}
	if !holds(eni.IPs[0]) {
		t.Error("a refused Unassign took the address")
	}

	crash := errors.New("operator died")
	c.After(cloudfake.UnassignPrivateIpAddresses, 1, cloudfake.Fail(crash))
	if err := c.UnassignIPs(ctx, eni.ID, eni.IPs[:1]); !errors.Is(err, crash) {
		t.Errorf("crash after Unassign: %v", err)
	}
	if holds(eni.IPs[0]) {
		t.Error("the Unassign before the crash did not happen")
	}

	fired := 0
	c.Before(cloudfake.AssignPrivateIpAddresses, 2, func() error { fired++; return nil })
	c.After(cloudfake.AssignPrivateIpAddresses, 0, func() error { fired += 10; return nil })
	for range 3 {
		if _, err := c.AssignIPs(ctx, eni.ID, 1); err != nil {
			t.Fatal(err)
		}
	}
	if fired != 31 {
		t.Errorf("hooks fired %d, want the 2nd-call hook once and the every-call hook thrice (31)", fired)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.AssignIPs(canceled, eni.ID, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}

	want := map[cloudfake.Action]int{
		cloudfake.CreateNetworkInterface:     1,
		cloudfake.UnassignPrivateIpAddresses: 2,
		cloudfake.DescribeNetworkInterfaces:  2,
		cloudfake.AssignPrivateIpAddresses:   3,
	}
	if got := c.Calls(); !maps.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	c.ResetCalls()
	if got := c.Calls(); len(got) != 0 {
		t.Errorf("calls after reset: %v", got)
	}
}
