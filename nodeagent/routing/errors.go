package routing

import (
	"errors"
	"fmt"
)

// Errors a Host wraps so the Converger can tell harmless races from
// failures without matching strings.
var (
	// ErrExist: the object to add is already there (someone, or a
	// previous run, was faster). The Converger counts it as done.
	ErrExist = errors.New("already exists")
	// ErrNotFound: the object to delete is already gone (the kernel drops
	// a link's routes with the link). The Converger counts it as done.
	ErrNotFound = errors.New("not found")
)

// Reasons an ENI of the Node cannot be routed; Desired reports them as
// *ENIError wrapping one of these.
var (
	// ErrENINumber: the ENI's device number is outside [0, MaxENINumber].
	ErrENINumber = errors.New("device number out of range")
	// ErrENINumberConflict: another managed ENI has the same device number
	// (instances with several network cards reuse device indexes), so both
	// would need the same route table.
	ErrENINumberConflict = errors.New("device number already used by another ENI")
	// ErrNoGateway: the ENI's gateway is not a valid IPv4 address.
	ErrNoGateway = errors.New("no IPv4 gateway")
	// ErrNoVPCCIDR: in EgressVPC mode, the ENI's VPC has no IPv4 CIDR to
	// route to.
	ErrNoVPCCIDR = errors.New("no IPv4 VPC CIDR for egress mode vpc")
)

// ENIError says why one ENI is left unrouted.
type ENIError struct {
	ENI string
	Err error
}

func (e *ENIError) Error() string { return fmt.Sprintf("ENI %s: %v", e.ENI, e.Err) }

// Unwrap lets errors.Is see the reason.
func (e *ENIError) Unwrap() error { return e.Err }

// OpError is one kernel change that failed.
type OpError struct {
	// Op is the operation, one of the Op* names.
	Op string
	// Object is the rule, route or link it was applied to.
	Object string
	Err    error
}

func (e *OpError) Error() string { return fmt.Sprintf("%s %s, %v", e.Op, e.Object, e.Err) }

// Unwrap lets errors.Is see the kernel's error.
func (e *OpError) Unwrap() error { return e.Err }
