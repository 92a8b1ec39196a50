package cloudfake

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"sync"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/test/ec2sim/state"
)

// EC2 implements the adapter's SDK interface on an state.State: each
// operation is the State's action on the request's values, with no HTTP
// or XML in between. It is safe for concurrent use.
type EC2 struct {
	state *state.State
	mu    sync.Mutex
	calls map[Action]int
	// seq counts every call of each action, never reset: hooks count
	// their n from it.
	seq   map[Action]int
	hooks []hook
}

var _ ec2.SDK = (*EC2)(nil)

// hook runs fn around the n-th call of action after the hook was added
// (every call when n is 0).
type hook struct {
	action Action
	n      int
	base   int
	after  bool
	fn     func() error
}

// NewEC2 returns an in-memory EC2 on st.
func NewEC2(st *state.State) *EC2 {
	return &EC2{state: st, calls: map[Action]int{}, seq: map[Action]int{}}
}

// State returns the EC2 state behind the fake.
func (e *EC2) State() *state.State { return e.state }

// Calls returns how many times each EC2 action was called: one per EC2
// request, so a describe of three pages counts three, like ec2sim's
// counters. Calls a Before hook refused count too.
func (e *EC2) Calls() map[Action]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.calls)
}

// ResetCalls zeroes the call counts; hooks are not affected.
func (e *EC2) ResetCalls() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = map[Action]int{}
}

// Before runs fn before the n-th call of action from now on (1 is the
// next; 0 is every call). If fn returns an error, EC2 is not called and
// the caller gets that error: an *state.APIError (state.NewAPIError)
// reported as EC2's answer would be, anything else unchanged.
func (e *EC2) Before(action Action, n int, fn func() error) {
	e.add(hook{action: action, n: n, fn: fn})
}

// After runs fn after EC2 answered the n-th call of action from now on (1
// is the next; 0 is every call). Whatever EC2 did stays done; if fn
// returns an error, the caller gets it (reported as for Before) instead
// of EC2's answer, as when the answer is lost or the operator dies right
// after the call.
func (e *EC2) After(action Action, n int, fn func() error) {
	e.add(hook{action: action, n: n, after: true, fn: fn})
}

// Fail is a hook that answers err.
func Fail(err error) func() error { return func() error { return err } }

func (e *EC2) add(h hook) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h.base = e.seq[h.action]
	e.hooks = append(e.hooks, h)
}

// seen counts one call of action and returns the hooks due around it;
// hooks for one n are dropped once due.
func (e *EC2) seen(action Action) (before, after []func() error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls[action]++
	e.seq[action]++
	kept := e.hooks[:0]
	for _, h := range e.hooks {
		due := h.action == action && (h.n == 0 || e.seq[action]-h.base == h.n)
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
	e.hooks = kept
	return before, after
}

// call is the one chokepoint of the in-memory EC2: the context, the
// count, Before hooks, the State's action, After hooks, and EC2's errors
// reported as the SDK reports them.
func call[Req, Resp, Out any](ctx context.Context, e *EC2, action Action, req Req, fn func(Req) (*Resp, error), out func(*Resp) *Out) (*Out, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	before, after := e.seen(action)
	for _, h := range before {
		if err := h(); err != nil {
			return nil, sdkError(action, err)
		}
	}
	resp, err := fn(req)
	for _, h := range after {
		if herr := h(); herr != nil {
			return nil, sdkError(action, herr)
		}
	}
	if err != nil {
		return nil, sdkError(action, err)
	}
	return out(resp), nil
}

// sdkError reports EC2's answer as aws-sdk-go-v2 does: the code and
// message as a smithy.APIError, under the response's HTTP status, inside
// an OperationError. Other errors pass unchanged.
func sdkError(action Action, err error) error {
	var ae *state.APIError
	if !errors.As(err, &ae) {
		return err
	}
	return &smithy.OperationError{
		ServiceID: "EC2", OperationName: string(action),
		Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: ae.HTTPStatus}},
			Err:      &smithy.GenericAPIError{Code: ae.Code, Message: ae.Message, Fault: fault(ae.HTTPStatus)},
		}},
	}
}

func fault(status int) smithy.ErrorFault {
	if status >= 500 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}
