package cloud

import (
	"errors"
	"fmt"
)

// Sentinel errors classify what the cloud refused; match them with
// errors.Is. The adapter maps EC2's error codes onto them in one place.
var (
	// ErrNotFound: the instance, ENI, subnet or attachment does not exist
	// (or not yet, under eventual consistency).
	ErrNotFound = errors.New("not found")
	// ErrSubnetFull: the subnet has no free address (or no free aligned
	// /28 for a prefix).
	ErrSubnetFull = errors.New("subnet has no free addresses")
	// ErrNoPrefixRoom: the subnet has free addresses but no free aligned
	// /28 (EC2's InsufficientCidrBlocks); single addresses may still fit.
	// It is also an ErrSubnetFull.
	ErrNoPrefixRoom = fmt.Errorf("%w: no free aligned /28 prefix", ErrSubnetFull)
	// ErrENILimit: the instance has as many ENIs as its type allows.
	ErrENILimit = errors.New("instance ENI limit reached")
	// ErrIPLimit: the ENI holds as many addresses as its type allows.
	ErrIPLimit = errors.New("ENI address limit reached")
	// ErrAddressLimit: the account holds as many Elastic IPs as its
	// quota allows (AddressLimitExceeded).
	ErrAddressLimit = errors.New("account's Elastic IP quota reached")
	// ErrThrottled: EC2 throttled the call (RequestLimitExceeded).
	ErrThrottled = errors.New("throttled")
	// ErrUnauthorized: the credentials may not make the call.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrInUse: the resource is attached or otherwise busy.
	ErrInUse = errors.New("in use")
	// ErrInvalid: EC2 rejected the request's parameters.
	ErrInvalid = errors.New("invalid request")
	// ErrUnavailable: EC2 failed on its side (5xx) or could not be reached.
	ErrUnavailable = errors.New("service unavailable")
)

// Error is a refusal from the cloud: the action, EC2's code and message,
// and the sentinel it maps to.
type Error struct {
	Action    string
	Code      string
	Message   string
	RequestID string
	// Kind is one of the sentinel errors above.
	Kind error
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s: %v: %s", e.Action, e.Kind, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", e.Action, e.Code, e.Message)
}

// Unwrap returns the sentinel, so errors.Is(err, cloud.ErrSubnetFull) works.
func (e *Error) Unwrap() error { return e.Kind }

// Retryable reports whether trying the same call again later can succeed
// without anything else changing: throttling and server-side failures.
func Retryable(err error) bool {
	return errors.Is(err, ErrThrottled) || errors.Is(err, ErrUnavailable)
}
