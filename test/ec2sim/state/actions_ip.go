package state

// AssignPrivateIpAddressesRequest is AssignPrivateIpAddresses' input: explicit
// addresses or a count, and/or explicit /28 prefixes or a prefix count.
type AssignPrivateIpAddressesRequest struct {
	NetworkInterfaceID             string
	PrivateIPAddresses             []string
	SecondaryPrivateIPAddressCount int
	IPv4Prefixes                   []string
	IPv4PrefixCount                int
	// AllowReassignment lets explicit addresses move from other ENIs.
	AllowReassignment bool
}

// AssignedPrivateIP is one address an AssignPrivateIpAddresses call added.
type AssignedPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
}

// AssignPrivateIpAddressesResponse lists only what this call assigned, never
// the ENI's earlier addresses.
type AssignPrivateIpAddressesResponse struct {
	NetworkInterfaceID   string              `xml:"networkInterfaceId"`
	AssignedPrivateIPs   []AssignedPrivateIP `xml:"assignedPrivateIpAddressesSet>item"`
	AssignedIPv4Prefixes []IPv4Prefix        `xml:"assignedIpv4PrefixSet>item"`
}

// AssignPrivateIpAddresses adds secondary addresses or /28 prefixes to an
// ENI, all or nothing. Each address and each prefix takes one of the ENI's
// IPv4 slots (PrivateIpAddressLimitExceeded past the instance type's
// limit); fresh addresses are the subnet's lowest free ones, fresh
// prefixes the lowest wholly free aligned /28s (a subnet without room
// answers in one of EC2's forms: see subnetfull.go). Within the mutation
// window a new ENI is NotFound.
func (s *State) AssignPrivateIpAddresses(req AssignPrivateIpAddressesRequest) (*AssignPrivateIpAddressesResponse, error) {
	s.lock()
	defer s.unlock()
	e, err := s.eniToChange(req.NetworkInterfaceID)
	if err != nil {
		return nil, err
	}
	switch {
	case req.SecondaryPrivateIPAddressCount < 0 || req.IPv4PrefixCount < 0:
		return nil, Errorf(CodeInvalidParameterValue, "Address and prefix counts must not be negative")
	case len(req.PrivateIPAddresses) > 0 && req.SecondaryPrivateIPAddressCount > 0:
		return nil, Errorf(CodeInvalidParameterCombo, "PrivateIpAddresses and SecondaryPrivateIpAddressCount cannot be used together")
	case len(req.IPv4Prefixes) > 0 && req.IPv4PrefixCount > 0:
		return nil, Errorf(CodeInvalidParameterCombo, "Ipv4Prefixes and Ipv4PrefixCount cannot be used together")
	case len(req.PrivateIPAddresses) == 0 && req.SecondaryPrivateIPAddressCount == 0 && len(req.IPv4Prefixes) == 0 && req.IPv4PrefixCount == 0:
		return nil, Errorf(CodeMissingParameter, "Either PrivateIpAddresses, SecondaryPrivateIpAddressCount, Ipv4Prefixes or Ipv4PrefixCount must be specified")
	}
	ips, prefixes, err := parseAddresses(req.PrivateIPAddresses, req.IPv4Prefixes)
	if err != nil {
		return nil, err
	}
	// A reassignment within the call changes the ENIs giving addresses
	// up as well.
	touched := []*eni{e}
	var eips []*address
	if req.AllowReassignment {
		for _, ip := range ips {
			if old := s.eniHolding(ip); old != nil && old != e {
				touched = append(touched, old)
				eips = append(eips, old.eips...)
			}
		}
	}
	commit := s.changing(s.timing.Lag.Assign, touched, eips)
	added, addedPrefixes, err := s.addAddresses(e, addressRequest{
		ips: ips, count: req.SecondaryPrivateIPAddressCount, prefixes: prefixes, prefixCount: req.IPv4PrefixCount,
		allowReassign: req.AllowReassignment, inUseCode: CodePrivateIPInUse,
		reassignDelay: s.timing.ReassignDelay,
	})
	if err != nil {
		return nil, err
	}
	commit()
	resp := &AssignPrivateIpAddressesResponse{NetworkInterfaceID: e.id}
	for _, ip := range added {
		resp.AssignedPrivateIPs = append(resp.AssignedPrivateIPs, AssignedPrivateIP{PrivateIPAddress: ip.String()})
	}
	for _, p := range addedPrefixes {
		resp.AssignedIPv4Prefixes = append(resp.AssignedIPv4Prefixes, IPv4Prefix{IPv4Prefix: p.String()})
	}
	return resp, nil
}

// UnassignPrivateIpAddressesRequest is UnassignPrivateIpAddresses' input.
type UnassignPrivateIpAddressesRequest struct {
	NetworkInterfaceID string
	PrivateIPAddresses []string
	IPv4Prefixes       []string
}

// UnassignPrivateIpAddresses returns secondary addresses and prefixes to the
// subnet, all or nothing. An address the ENI does not hold, or its primary,
// is InvalidParameterValue.
func (s *State) UnassignPrivateIpAddresses(req UnassignPrivateIpAddressesRequest) (*ReturnResponse, error) {
	s.lock()
	defer s.unlock()
	e, err := s.eniToChange(req.NetworkInterfaceID)
	if err != nil {
		return nil, err
	}
	if len(req.PrivateIPAddresses) == 0 && len(req.IPv4Prefixes) == 0 {
		return nil, Errorf(CodeMissingParameter, "Either PrivateIpAddresses or Ipv4Prefixes must be specified")
	}
	ips, prefixes, err := parseAddresses(req.PrivateIPAddresses, req.IPv4Prefixes)
	if err != nil {
		return nil, err
	}
	commit := s.changing(s.timing.Lag.Unassign, []*eni{e}, e.eips)
	if err := s.removeAddresses(e, ips, prefixes); err != nil {
		return nil, err
	}
	commit()
	return returnTrue(), nil
}
