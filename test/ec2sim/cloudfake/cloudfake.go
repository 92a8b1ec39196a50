// Package cloudfake is an in-memory cloud.API for the operator's tests: the
// emulator's own [ec2sim.State] called directly, without HTTP or XML, so a
// controller test runs in milliseconds and sees exactly the EC2 that the
// wire tests see (one model of EC2, no drift).
//
// Each method makes the EC2 calls the SDK adapter (operator/ec2) makes, on
// the same request values, and converts the answers to cloud types as the
// adapter converts SDK types; EC2 errors become *cloud.Error with their
// Kind from ec2.Kind, the adapter's one mapping of EC2 codes. The adapter's
// client-side buckets and retries are not reproduced: every call is made
// once and its answer, throttling included, reaches the caller.
//
// For table tests the fake counts its EC2 calls per action and runs hooks
// around the n-th call of an action: return an error instead of calling
// EC2 (a refusal), or after EC2 acted (a lost answer, a crash right after
// Unassign).
//
//	st, _ := ec2sim.NewState(sc, clock.Now)
//	c := cloudfake.New(st)
//	c.After(cloudfake.UnassignPrivateIpAddresses, 1, func() error { cancel(); return context.Canceled })
//	err := reconcile(ctx, c)                     // dies right after EC2 unassigned
//	n := c.Calls()[cloudfake.CreateNetworkInterface]
package cloudfake

import (
	"context"
	"errors"
	"maps"
	"sync"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/test/ec2sim"
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
	DescribeAddresses               = ec2.DescribeAddresses
	AssociateAddress                = ec2.AssociateAddress
	DisassociateAddress             = ec2.DisassociateAddress
	AllocateAddress                 = ec2.AllocateAddress
	ReleaseAddress                  = ec2.ReleaseAddress
)

// Cloud implements cloud.API on an ec2sim.State. It is safe for concurrent
// use.
type Cloud struct {
	state *ec2sim.State

	mu    sync.Mutex
	calls map[Action]int
	// seq counts every call of each action, never reset: hooks count
	// their n from it.
	seq   map[Action]int
	hooks []hook
}

var _ cloud.API = (*Cloud)(nil)

// hook runs fn around the n-th call of action after the hook was added
// (every call when n is 0).
type hook struct {
	action Action
	n      int
	base   int
	after  bool
	fn     func() error
}

// New returns a fake cloud over state; it starts nothing. Tests reach
// state directly too (ec2sim's admin methods: AddInstance,
// TerminateInstance, SetTiming, Dump).
func New(state *ec2sim.State) *Cloud {
	return &Cloud{state: state, calls: map[Action]int{}, seq: map[Action]int{}}
}

// State returns the EC2 state behind the fake.
func (c *Cloud) State() *ec2sim.State { return c.state }

// Calls returns how many times each EC2 action was called: one per EC2
// request, so a describe of three pages counts three, like ec2sim's
// counters. Calls a Before hook refused count too.
func (c *Cloud) Calls() map[Action]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// ResetCalls zeroes the call counts; hooks are not affected.
func (c *Cloud) ResetCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = map[Action]int{}
}

// Before runs fn before the n-th call of action from now on (1 is the
// next; 0 is every call). If fn returns an error, EC2 is not called and
// the caller gets that error: an *ec2sim.APIError (ec2sim.NewAPIError)
// converted as EC2's answer would be, anything else unchanged.
func (c *Cloud) Before(action Action, n int, fn func() error) {
	c.add(hook{action: action, n: n, fn: fn})
}

// After runs fn after EC2 answered the n-th call of action from now on (1
// is the next; 0 is every call). Whatever EC2 did stays done; if fn
// returns an error, the caller gets it (converted as for Before) instead
// of EC2's answer, as when the answer is lost or the operator dies right
// after the call.
func (c *Cloud) After(action Action, n int, fn func() error) {
	c.add(hook{action: action, n: n, after: true, fn: fn})
}

// Fail is a hook that answers err.
func Fail(err error) func() error { return func() error { return err } }

func (c *Cloud) add(h hook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.base = c.seq[h.action]
	c.hooks = append(c.hooks, h)
}

// seen counts one call of action and returns the hooks due around it;
// hooks for one n are dropped once due.
func (c *Cloud) seen(action Action) (before, after []func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[action]++
	c.seq[action]++
	kept := c.hooks[:0]
	for _, h := range c.hooks {
		due := h.action == action && (h.n == 0 || c.seq[action]-h.base == h.n)
		switch {
		case due && h.after:
			after = append(after, h.fn)
		case due:
			before = append(before, h.fn)
		}
		if !due || h.n == 0 {
			kept = append(kept, h)
		}
	}
	c.hooks = kept
	return before, after
}

// call is the fake's one chokepoint, in the adapter's order: context,
// count, Before hooks, the State's action, After hooks, the mapping of
// EC2's error onto a cloud sentinel.
func call[T any](ctx context.Context, c *Cloud, action Action, fn func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	before, after := c.seen(action)
	for _, h := range before {
		if err := h(); err != nil {
			return zero, classify(action, err)
		}
	}
	out, err := fn()
	for _, h := range after {
		if herr := h(); herr != nil {
			return zero, classify(action, herr)
		}
	}
	if err != nil {
		return zero, classify(action, err)
	}
	return out, nil
}

// classify turns EC2's answer into a *cloud.Error as the adapter does;
// other errors pass unchanged.
func classify(action Action, err error) error {
	var ae *ec2sim.APIError
	if !errors.As(err, &ae) {
		return err
	}
	return &cloud.Error{Action: string(action), Code: ae.Code, Message: ae.Message, Kind: ec2.Kind(ae.Code, ae.Message, ae.HTTPStatus)}
}
