// Package cloudfake is an in-memory EC2 for the operator's tests: the
// emulator's own [state.State] called directly, without HTTP or XML,
// behind the operator's real adapter (operator/ec2), so a controller test
// runs in milliseconds, sees exactly the EC2 that the wire tests see (one
// model of EC2, no drift) and exercises the adapter's own describe,
// address and mutate logic.
//
// [EC2] implements the adapter's narrow SDK interface ([ec2.SDK]) on a
// State: each SDK operation becomes the State's action on the same
// values, and EC2's errors come back as the SDK reports them, so the
// adapter maps them onto cloud sentinels as it maps EC2's. [Cloud] is the
// adapter over it, with the client-side buckets wide open and one attempt
// a call: every call is made once and its answer, throttling included,
// reaches the caller.
//
// For table tests the in-memory EC2 counts its calls per action and runs
// hooks around the n-th call of an action: return an error instead of
// calling EC2 (a refusal), or after EC2 acted (a lost answer, a crash
// right after Unassign).
//
//	st, _ := state.NewState(sc, clock.Now)
//	c := cloudfake.New(st)
//	c.After(cloudfake.UnassignPrivateIpAddresses, 1, func() error { cancel(); return context.Canceled })
//	err := reconcile(ctx, c)                     // dies right after EC2 unassigned
//	n := c.Calls()[cloudfake.CreateNetworkInterface]
package cloudfake

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/test/ec2sim/state"
)

// Action is an EC2 action the fake calls: the adapter's own constants.
type Action = ec2.Action

// The EC2 actions behind cloud.API, as the adapter names them.
const (
	DescribeVpcs                    = ec2.DescribeVpcs
	DescribeSubnets                 = ec2.DescribeSubnets
	DescribeSecurityGroups          = ec2.DescribeSecurityGroups
	DescribeInstances               = ec2.DescribeInstances
	DescribeNetworkInterfaces       = ec2.DescribeNetworkInterfaces
	DescribeInstanceTypes           = ec2.DescribeInstanceTypes
	CreateNetworkInterface          = ec2.CreateNetworkInterface
	AttachNetworkInterface          = ec2.AttachNetworkInterface
	ModifyNetworkInterfaceAttribute = ec2.ModifyNetworkInterfaceAttribute
	DeleteNetworkInterface          = ec2.DeleteNetworkInterface
	DetachNetworkInterface          = ec2.DetachNetworkInterface
	AssignPrivateIpAddresses        = ec2.AssignPrivateIpAddresses
	UnassignPrivateIpAddresses      = ec2.UnassignPrivateIpAddresses
	AssignIpv6Addresses             = ec2.AssignIpv6Addresses
	UnassignIpv6Addresses           = ec2.UnassignIpv6Addresses
	DescribeAddresses               = ec2.DescribeAddresses
	AssociateAddress                = ec2.AssociateAddress
	DisassociateAddress             = ec2.DisassociateAddress
	AllocateAddress                 = ec2.AllocateAddress
	ReleaseAddress                  = ec2.ReleaseAddress
)

// Cloud implements cloud.API: the operator's EC2 adapter over an
// in-memory EC2. It is safe for concurrent use.
type Cloud struct {
	*ec2.Client
	ec2 *EC2
}

var _ cloud.API = (*Cloud)(nil)

// New returns the adapter over an in-memory EC2 on st; it starts
// nothing. Tests reach state directly too (ec2sim's admin methods:
// AddInstance, TerminateInstance, SetTiming, Dump).
func New(st *state.State) *Cloud {
	sdk := NewEC2(st)
	client, err := ec2.NewFromSDK(sdk, Options(), prometheus.NewRegistry())
	if err != nil {
		panic(fmt.Sprintf("cloudfake: the adapter refuses its options: %v", err)) // Options are valid
	}
	return &Cloud{Client: client, ec2: sdk}
}

// Options are the adapter's options for an in-memory EC2: buckets so wide
// that no call waits for them, and a single attempt, so that a hook's
// refusal or EC2's throttling reaches the caller as it was answered.
func Options() ec2.Options {
	opts := ec2.DefaultOptions()
	opts.RateScale, opts.InitialBucketFill, opts.MaxAttempts = 1e6, 1, 1
	return opts
}

// EC2 returns the in-memory EC2 behind the adapter.
func (c *Cloud) EC2() *EC2 { return c.ec2 }

// State returns the EC2 state behind the fake.
func (c *Cloud) State() *state.State { return c.ec2.State() }

// Calls returns how many times each EC2 action was called (see EC2.Calls).
func (c *Cloud) Calls() map[Action]int { return c.ec2.Calls() }

// ResetCalls zeroes the call counts; hooks are not affected.
func (c *Cloud) ResetCalls() { c.ec2.ResetCalls() }

// Before runs fn before the n-th call of action (see EC2.Before).
func (c *Cloud) Before(action Action, n int, fn func() error) { c.ec2.Before(action, n, fn) }

// After runs fn after EC2 answered the n-th call of action (see
// EC2.After).
func (c *Cloud) After(action Action, n int, fn func() error) { c.ec2.After(action, n, fn) }
