package state

import (
	"fmt"
	"net/netip"
)

// ReturnResponse is the answer of actions that return only success.
type ReturnResponse struct {
	Return bool `xml:"return"`
}

func returnTrue() *ReturnResponse { return &ReturnResponse{Return: true} }

// PrivateIPSpec is one address asked for in CreateNetworkInterface.
type PrivateIPSpec struct {
	Address string
	Primary bool
}

// TagSpecification tags a resource at creation.
type TagSpecification struct {
	ResourceType string
	Tags         []Tag
}

// CreateNetworkInterfaceRequest is CreateNetworkInterface's input.
type CreateNetworkInterfaceRequest struct {
	SubnetID         string
	Description      string
	SecurityGroupIDs []string
	// PrivateIPAddress is the primary address; PrivateIPAddresses may name
	// it too (Primary) and add secondaries.
	PrivateIPAddress               string
	PrivateIPAddresses             []PrivateIPSpec
	SecondaryPrivateIPAddressCount int
	IPv4Prefixes                   []string
	IPv4PrefixCount                int
	// IPv6Addresses, IPv6AddressCount, IPv6Prefixes (/80s) and
	// IPv6PrefixCount exclude each other.
	IPv6Addresses     []string
	IPv6AddressCount  int
	IPv6Prefixes      []string
	IPv6PrefixCount   int
	InterfaceType     string
	TagSpecifications []TagSpecification
	// ClientToken makes the call idempotent: the same token with the same
	// parameters returns the first answer; with others,
	// IdempotentParameterMismatch.
	ClientToken string
}

// CreateNetworkInterfaceResponse is CreateNetworkInterface's output.
type CreateNetworkInterfaceResponse struct {
	NetworkInterface NetworkInterface `xml:"networkInterface"`
	ClientToken      string           `xml:"clientToken,omitempty"`
}

// CreateNetworkInterface creates an available, unattached ENI with its
// addresses; it is synchronous, as on EC2.
func (s *State) CreateNetworkInterface(req CreateNetworkInterfaceRequest) (*CreateNetworkInterfaceResponse, error) {
	s.lock()
	defer s.unlock()
	var fingerprint string
	if req.ClientToken != "" {
		if len(req.ClientToken) > 64 {
			return nil, Errorf(CodeInvalidParameterValue, "ClientToken is longer than 64 characters")
		}
		fp := req
		fp.ClientToken = ""
		fingerprint = fmt.Sprintf("%#v", fp)
		if rec, seen := s.tokens[req.ClientToken]; seen {
			if rec.fingerprint != fingerprint {
				return nil, Errorf(CodeIdempotentMismatch, "Client token %s was used with different parameters.", req.ClientToken)
			}
			resp := rec.response
			return &resp, nil
		}
	}
	sn, err := s.subnetByID(req.SubnetID)
	if err != nil {
		return nil, err
	}
	if req.SecondaryPrivateIPAddressCount < 0 || req.IPv4PrefixCount < 0 {
		return nil, Errorf(CodeInvalidParameterValue, "Address and prefix counts must not be negative")
	}
	if len(req.IPv4Prefixes) > 0 && req.IPv4PrefixCount > 0 {
		return nil, Errorf(CodeInvalidParameterCombo, "Ipv4Prefixes and Ipv4PrefixCount cannot be used together")
	}
	switch req.InterfaceType {
	case "", typeInterface, typeEFA, typeEFAOnly, "trunk", "branch":
	default:
		return nil, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for InterfaceType", req.InterfaceType)
	}
	ips, err := orderedIPs(req.PrivateIPAddress, req.PrivateIPAddresses)
	if err != nil {
		return nil, err
	}
	prefixes, err := parsePrefixes(req.IPv4Prefixes)
	if err != nil {
		return nil, err
	}
	v6ips, v6prefixes, err := parseIPv6(req.IPv6Addresses, req.IPv6Prefixes)
	if err != nil {
		return nil, err
	}
	v6 := ipv6Request{ips: v6ips, count: req.IPv6AddressCount, prefixes: v6prefixes, prefixCount: req.IPv6PrefixCount}
	if err := ipv6Combination(v6, true); err != nil {
		return nil, err
	}
	tags, err := tagsFor("network-interface", req.TagSpecifications)
	if err != nil {
		return nil, err
	}
	e, err := s.createENI(eniSpec{subnet: sn, groupIDs: req.SecurityGroupIDs, description: req.Description, tags: tags,
		ips: ips, secondaries: req.SecondaryPrivateIPAddressCount, prefixes: prefixes, prefixCount: req.IPv4PrefixCount,
		ipv6: v6, interfaceType: req.InterfaceType})
	if err != nil {
		return nil, err
	}
	e.lags = s.drawLag()
	resp := CreateNetworkInterfaceResponse{NetworkInterface: s.eniView(e), ClientToken: req.ClientToken}
	if req.ClientToken != "" {
		s.tokens[req.ClientToken] = clientTokenRecord{fingerprint: fingerprint, response: resp}
	}
	return &resp, nil
}

// orderedIPs parses the addresses of a create request, primary first.
func orderedIPs(primary string, specs []PrivateIPSpec) ([]netip.Addr, error) {
	var out []netip.Addr
	primaries := 0
	if primary != "" {
		ip, err := parseIP(primary)
		if err != nil {
			return nil, err
		}
		out = append(out, ip)
		primaries++
	}
	for _, sp := range specs {
		ip, err := parseIP(sp.Address)
		if err != nil {
			return nil, err
		}
		switch {
		case sp.Primary && primary != "" && ip == out[0]:
			continue // the same primary named twice
		case sp.Primary:
			primaries++
			out = append([]netip.Addr{ip}, out...)
		default:
			out = append(out, ip)
		}
	}
	if primaries > 1 {
		return nil, Errorf(CodeInvalidParameterValue, "Only one primary private IP address can be specified")
	}
	return out, nil
}

func parseIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || !ip.Is4() {
		return netip.Addr{}, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for private IP address", s)
	}
	return ip, nil
}

func parseIPs(ss []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range ss {
		ip, err := parseIP(s)
		if err != nil {
			return nil, err
		}
		out = append(out, ip)
	}
	return out, nil
}

// parseAddresses reads the addresses and prefixes a call names.
func parseAddresses(ips, prefixes []string) ([]netip.Addr, []netip.Prefix, error) {
	as, err := parseIPs(ips)
	if err != nil {
		return nil, nil, err
	}
	ps, err := parsePrefixes(prefixes)
	if err != nil {
		return nil, nil, err
	}
	return as, ps, nil
}

func parsePrefixes(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() || p.Bits() != prefixLen || p.Masked() != p {
			return nil, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for IPv4 prefix: expecting an aligned /28", s)
		}
		out = append(out, p)
	}
	return out, nil
}

// DeleteNetworkInterface deletes an unattached ENI. An ENI attached,
// attaching or still detaching is in use.
func (s *State) DeleteNetworkInterface(id string) (*ReturnResponse, error) {
	s.lock()
	defer s.unlock()
	e, err := s.eniToChange(id)
	if err != nil {
		return nil, err
	}
	if e.attachment != nil {
		return nil, Errorf(CodeInvalidParameterValue, "Network interface '%s' is currently in use.", id)
	}
	s.deleteENI(e)
	return returnTrue(), nil
}

// AttachNetworkInterfaceRequest is AttachNetworkInterface's input.
type AttachNetworkInterfaceRequest struct {
	NetworkInterfaceID string
	InstanceID         string
	DeviceIndex        int
	NetworkCardIndex   int
}

// AttachNetworkInterfaceResponse is AttachNetworkInterface's output.
type AttachNetworkInterfaceResponse struct {
	AttachmentID     string `xml:"attachmentId"`
	NetworkCardIndex int    `xml:"networkCardIndex"`
}

// AttachNetworkInterface starts attaching an available ENI; the attachment
// is "attaching" for the configured attach delay, then "attached".
func (s *State) AttachNetworkInterface(req AttachNetworkInterfaceRequest) (*AttachNetworkInterfaceResponse, error) {
	s.lock()
	defer s.unlock()
	e, err := s.eniToChange(req.NetworkInterfaceID)
	if err != nil {
		return nil, err
	}
	in, err := s.instanceByID(req.InstanceID)
	if err != nil {
		return nil, err
	}
	commit := s.changing(s.timing.Lag.Attach, []*eni{e}, nil)
	a, err := s.attach(e, in, slot{card: req.NetworkCardIndex, device: req.DeviceIndex}, false)
	if err != nil {
		return nil, err
	}
	commit()
	return &AttachNetworkInterfaceResponse{AttachmentID: a.id, NetworkCardIndex: a.networkCard}, nil
}

// DetachNetworkInterface starts detaching; the ENI stays in use for the
// configured detach delay, then is available. The primary ENI cannot be
// detached.
func (s *State) DetachNetworkInterface(attachmentID string, force bool) (*ReturnResponse, error) {
	s.lock()
	defer s.unlock()
	a, err := s.attachmentByID(attachmentID)
	if err != nil {
		return nil, err
	}
	commit := s.changing(s.timing.Lag.Detach, []*eni{a.eni}, nil)
	if err := s.detach(a); err != nil {
		return nil, err
	}
	commit()
	return returnTrue(), nil
}

// ModifyNetworkInterfaceAttributeRequest is
// ModifyNetworkInterfaceAttribute's input; nil fields are left alone. As on
// EC2, one call changes one attribute.
type ModifyNetworkInterfaceAttributeRequest struct {
	NetworkInterfaceID  string
	Description         *string
	SourceDestCheck     *bool
	SecurityGroupIDs    []string
	AttachmentID        string
	DeleteOnTermination *bool
}

// ModifyNetworkInterfaceAttribute changes DeleteOnTermination of an ENI's
// attachment, its groups, description or source/dest check.
func (s *State) ModifyNetworkInterfaceAttribute(req ModifyNetworkInterfaceAttributeRequest) (*ReturnResponse, error) {
	s.lock()
	defer s.unlock()
	e, err := s.eniToChange(req.NetworkInterfaceID)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, set := range []bool{req.Description != nil, req.SourceDestCheck != nil, len(req.SecurityGroupIDs) > 0, req.AttachmentID != "" || req.DeleteOnTermination != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, Errorf(CodeMissingParameter, "No attributes specified.")
	case n > 1:
		return nil, Errorf(CodeInvalidParameterCombo, "Fields for multiple attribute types specified: only one attribute may be modified per call.")
	case req.Description != nil:
		e.description = *req.Description
	case req.SourceDestCheck != nil:
		e.sourceDestCheck = *req.SourceDestCheck
	case len(req.SecurityGroupIDs) > 0:
		groups, err := s.groupsByID(e.subnet.vpc, req.SecurityGroupIDs)
		if err != nil {
			return nil, err
		}
		e.groups = groups
	default:
		if req.AttachmentID == "" || req.DeleteOnTermination == nil {
			return nil, Errorf(CodeMissingParameter, "Attachment.AttachmentId and Attachment.DeleteOnTermination are both required")
		}
		if e.attachment == nil || e.attachment.id != req.AttachmentID {
			return nil, Errorf(CodeAttachmentNotFound, "Interface attachment '%s' does not exist on %s.", req.AttachmentID, e.id)
		}
		e.attachment.deleteOnTermination = *req.DeleteOnTermination
	}
	return returnTrue(), nil
}
