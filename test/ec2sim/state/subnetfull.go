package state

import "fmt"

// EC2 words a subnet without room in three ways. The codes and messages
// below are EC2's as clients have logged them:
//
//   - InsufficientFreeAddressesInSubnet, "The specified subnet does not
//     have enough free addresses to satisfy the request." — the documented
//     code, seen on AssignPrivateIpAddresses;
//   - InvalidParameterValue, "There aren't sufficient free Ipv4 addresses
//     or prefixes" — which AWS support describes as the answer of
//     CreateNetworkInterface, AttachNetworkInterface and
//     AssignPrivateIpAddresses when more addresses are asked for than the
//     subnet has, and which Cilium matches for prefixes;
//   - InsufficientCidrBlocks, "The specified subnet does not have enough
//     free cidr blocks to satisfy the request" — prefixes on a subnet with
//     free addresses but no free aligned /28 (fragmentation).
//
// Which of the first two EC2 picks for addresses is not documented; by
// default ec2sim answers addresses with the documented code, prefixes on a
// subnet short of addresses with InvalidParameterValue, and prefixes on a
// fragmented subnet with InsufficientCidrBlocks. Scenario.SubnetFullError
// (or SetSubnetFullError) forces one form for every case.
const (
	msgInsufficientAddresses  = "The specified subnet does not have enough free addresses to satisfy the request."
	msgSubnetFull             = "There aren't sufficient free Ipv4 addresses or prefixes"
	msgInsufficientCidrBlocks = "The specified subnet does not have enough free cidr blocks to satisfy the request"
)

// subnetFullForms maps each forcible code to its message.
var subnetFullForms = map[string]string{
	CodeInsufficientAddresses:  msgInsufficientAddresses,
	CodeInvalidParameterValue:  msgSubnetFull,
	CodeInsufficientCidrBlocks: msgInsufficientCidrBlocks,
}

func validSubnetFullError(code string) error {
	if _, ok := subnetFullForms[code]; code != "" && !ok {
		return fmt.Errorf("%q is not %s, %s or %s", code, CodeInsufficientAddresses, CodeInvalidParameterValue, CodeInsufficientCidrBlocks)
	}
	return nil
}

// SetSubnetFullError forces the form of "subnet full" answers from now on,
// as Scenario.SubnetFullError does; empty restores EC2's usual answers.
func (s *State) SetSubnetFullError(code string) error {
	if err := validSubnetFullError(code); err != nil {
		return Errorf(CodeInvalidParameterValue, "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subnetFull = code
	return nil
}

// SubnetFullError returns the forced form of "subnet full" answers, empty
// when none is forced.
func (s *State) SubnetFullError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subnetFull
}

// Why a subnet could not give what was asked.
const (
	noAddresses       = iota // fewer free addresses than asked for
	noRoomForPrefixes        // fewer free addresses than the prefixes need
	fragmented               // enough free addresses, no free aligned /28
)

// subnetFullErr is the answer for a subnet without room, in the forced
// form if one is set, else in EC2's usual form for the cause.
func (s *State) subnetFullErr(cause int) *APIError {
	code := s.subnetFull
	if code == "" {
		code = map[int]string{noAddresses: CodeInsufficientAddresses, noRoomForPrefixes: CodeInvalidParameterValue,
			fragmented: CodeInsufficientCidrBlocks}[cause]
	}
	return Errorf(code, "%s", subnetFullForms[code])
}
