package state

import (
	"net/netip"
	"slices"
)

// AllocateAddressRequest is AllocateAddress' input.
type AllocateAddressRequest struct {
	// Domain must be "vpc" or empty.
	Domain string
	// Address asks for a specific public address of the pool.
	Address           string
	TagSpecifications []TagSpecification
}

// AllocateAddressResponse is AllocateAddress' output.
type AllocateAddressResponse struct {
	PublicIP           string `xml:"publicIp"`
	AllocationID       string `xml:"allocationId"`
	Domain             string `xml:"domain"`
	PublicIPv4Pool     string `xml:"publicIpv4Pool"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
}

// AllocateAddress takes an Elastic IP from the emulator's public pool
// (198.51.100.0/24), up to the account's limit (AddressLimitExceeded).
func (s *State) AllocateAddress(req AllocateAddressRequest) (*AllocateAddressResponse, error) {
	s.lock()
	defer s.unlock()
	if req.Domain != "" && req.Domain != "vpc" {
		return nil, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for domain.", req.Domain)
	}
	tags, err := tagsFor("elastic-ip", req.TagSpecifications)
	if err != nil {
		return nil, err
	}
	if s.addresses.len() >= s.eipLimit {
		return nil, Errorf(CodeAddressLimitExceeded, "The maximum number of addresses has been reached.")
	}
	var off uint32
	if req.Address != "" {
		ip, err := netip.ParseAddr(req.Address)
		o, in := s.eipPool.offset(ip)
		if err != nil || !in || s.eipPool.taken(o) {
			return nil, Errorf(CodeAddressNotFound, "Address %s not found.", req.Address)
		}
		s.eipPool.take(o, nil)
		off = o
	} else {
		offs, ok := s.eipPool.allocate(1, nil)
		if !ok {
			return nil, Errorf(CodeAddressLimitExceeded, "The public address pool is exhausted.")
		}
		off = offs[0]
	}
	a := &address{meta: s.newMeta("eipalloc", ""), publicIP: s.eipPool.addr(off)}
	a.tags = tags
	s.addresses.add(a)
	return &AllocateAddressResponse{PublicIP: a.publicIP.String(), AllocationID: a.id, Domain: "vpc", PublicIPv4Pool: "amazon", NetworkBorderGroup: s.region}, nil
}

// addressByRef finds an Elastic IP by allocation ID, else by public IP.
func (s *State) addressByRef(allocationID, publicIP string) (*address, error) {
	if allocationID != "" {
		a, found := s.addresses.get(allocationID)
		if !found {
			return nil, Errorf(CodeAllocationNotFound, "The allocation ID '%s' does not exist", allocationID)
		}
		return a, nil
	}
	if publicIP == "" {
		return nil, Errorf(CodeMissingParameter, "Either AllocationId or PublicIp must be specified")
	}
	for _, a := range s.addresses.list {
		if !a.removed && a.publicIP.String() == publicIP {
			return a, nil
		}
	}
	return nil, Errorf(CodeAddressNotFound, "Address '%s' not found.", publicIP)
}

// AssociateAddressRequest is AssociateAddress' input: the address by
// allocation ID (or public IP), the target by ENI or instance (its primary
// ENI), and optionally which private address.
type AssociateAddressRequest struct {
	AllocationID       string
	PublicIP           string
	NetworkInterfaceID string
	InstanceID         string
	PrivateIPAddress   string
	AllowReassociation bool
}

// AssociateAddressResponse is AssociateAddress' output.
type AssociateAddressResponse struct {
	AssociationID string `xml:"associationId"`
}

// AssociateAddress maps an Elastic IP to a private address of an ENI (its
// primary by default). An address already associated elsewhere needs
// AllowReassociation (else Resource.AlreadyAssociated); associated with
// the same address already, the call answers its association.
func (s *State) AssociateAddress(req AssociateAddressRequest) (*AssociateAddressResponse, error) {
	s.lock()
	defer s.unlock()
	a, err := s.addressByRef(req.AllocationID, req.PublicIP)
	if err != nil {
		return nil, err
	}
	var e *eni
	switch {
	case req.NetworkInterfaceID != "":
		if e, err = s.eniToChange(req.NetworkInterfaceID); err != nil {
			return nil, err
		}
	case req.InstanceID != "":
		in, err := s.instanceByID(req.InstanceID)
		if err != nil {
			return nil, err
		}
		if e = in.slots[primarySlot]; e == nil {
			return nil, Errorf(CodeIncorrectInstanceState, "The instance '%s' is not running.", in.id)
		}
	default:
		return nil, Errorf(CodeMissingParameter, "Either NetworkInterfaceId or InstanceId must be specified")
	}
	private := e.ips[0]
	if req.PrivateIPAddress != "" {
		ip, err := parseIP(req.PrivateIPAddress)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(e.ips, ip) {
			return nil, Errorf(CodeInvalidParameterValue, "The private IP address %s is not assigned to %s", ip, e.id)
		}
		private = ip
	}
	switch {
	case a.eni == e && a.privateIP == private:
		// Associating again with the same address changes nothing and
		// answers the association, as EC2 does.
		return &AssociateAddressResponse{AssociationID: a.associationID}, nil
	case a.eni != nil && !req.AllowReassociation:
		return nil, Errorf(CodeAlreadyAssociated, "Resource %s is already associated with %s", a.id, a.associationID)
	}
	commit := s.changing(s.timing.Lag.Associate, []*eni{e, a.eni}, append([]*address{a}, e.eips...))
	defer commit()
	if a.eni != nil {
		s.disassociate(a)
	}
	for _, other := range e.eips {
		if other.privateIP == private {
			s.disassociate(other)
			break
		}
	}
	a.eni, a.privateIP, a.associationID = e, private, s.ids.newID("eipassoc")
	e.eips = append(e.eips, a)
	s.assocs[a.associationID] = a
	return &AssociateAddressResponse{AssociationID: a.associationID}, nil
}

func (s *State) associationByID(id string) (*address, error) {
	a := s.assocs[id]
	if a == nil {
		return nil, Errorf(CodeAssociationNotFound, "The association ID '%s' does not exist", id)
	}
	return a, nil
}

// DisassociateAddress breaks an association, named by ID (or public IP).
func (s *State) DisassociateAddress(associationID, publicIP string) (*ReturnResponse, error) {
	s.lock()
	defer s.unlock()
	var a *address
	var err error
	if associationID != "" {
		if a, err = s.associationByID(associationID); err != nil {
			return nil, err
		}
	} else {
		if a, err = s.addressByRef("", publicIP); err != nil {
			return nil, err
		}
		if a.eni == nil {
			return nil, Errorf(CodeAssociationNotFound, "Address %s is not associated", publicIP)
		}
	}
	commit := s.changing(s.timing.Lag.Disassociate, []*eni{a.eni}, []*address{a})
	s.disassociate(a)
	commit()
	return returnTrue(), nil
}

// ReleaseAddress returns an unassociated Elastic IP to the pool; an
// associated one is InvalidIPAddress.InUse.
func (s *State) ReleaseAddress(allocationID, publicIP string) (*ReturnResponse, error) {
	s.lock()
	defer s.unlock()
	a, err := s.addressByRef(allocationID, publicIP)
	if err != nil {
		return nil, err
	}
	if a.eni != nil {
		return nil, Errorf(CodeAddressInUse, "Address %s is in use.", a.publicIP)
	}
	off, _ := s.eipPool.offset(a.publicIP)
	s.eipPool.release(off)
	s.addresses.remove(a)
	return returnTrue(), nil
}

// DescribeAddressesResponse is DescribeAddresses' output.
type DescribeAddressesResponse struct {
	Addresses []Address `xml:"addressesSet>item"`
}

var addressFields = map[string]field[*address]{
	"allocation-id":  one(func(a *address) string { return a.id }),
	"public-ip":      one(func(a *address) string { return a.publicIP.String() }),
	"domain":         one(func(a *address) string { return "vpc" }),
	"association-id": one(func(a *address) string { return a.associationID }),
	"network-interface-id": func(a *address, match func(string) bool) bool {
		return a.eni != nil && match(a.eni.id)
	},
	"private-ip-address": func(a *address, match func(string) bool) bool {
		return a.eni != nil && match(a.privateIP.String())
	},
	"instance-id": func(a *address, match func(string) bool) bool {
		return a.eni != nil && a.eni.attachment != nil && match(a.eni.attachment.instance.id)
	},
}

// DescribeAddresses lists Elastic IPs by allocation ID (IDs), public IP
// (Names) or filter; it has no pages.
func (s *State) DescribeAddresses(req DescribeRequest) (*DescribeAddressesResponse, error) {
	s.lock()
	defer s.unlock()
	if req.paginated() {
		return nil, Errorf(CodeUnknownParameter, "DescribeAddresses does not paginate")
	}
	for _, ip := range req.Names {
		if _, err := s.addressByRef("", ip); err != nil {
			return nil, err
		}
	}
	if len(req.Names) > 0 {
		req.Filters = append(req.Filters, Filter{Name: "public-ip", Values: req.Names})
	}
	lookup := func(id string) (*address, error) { return s.addressByRef(id, "") }
	out, _, err := describe(s, describeSpec[*address]{kind: "address", reg: &s.addresses, lookup: lookup, fields: s.addressFieldsOf(), shown: (*address).shown}, req)
	if err != nil {
		return nil, err
	}
	resp := &DescribeAddressesResponse{}
	for _, a := range out {
		resp.Addresses = append(resp.Addresses, s.addressView(a.shown()))
	}
	return resp, nil
}
