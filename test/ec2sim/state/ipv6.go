package state

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
)

// IPv6 in a VPC: the VPC has an Amazon-provided /56, a subnet may have a /64
// of it, and an ENI in such a subnet holds IPv6 addresses and delegated /80
// prefixes. Both count against the instance type's
// Ipv6AddressesPerInterface, a prefix as one, as EC2 documents for
// prefixes ("Each prefix that you assign to a network interface counts as
// one IP address"). The IPv4 limit is separate.

// ipv6PrefixLen is the only IPv6 prefix size EC2 delegates to an ENI.
const ipv6PrefixLen = 80

// ipv6Space is the IPv6 address book of one subnet. A /64 holds 2^64
// addresses, so it is a map of what is taken rather than a bitmap. Fresh
// addresses come from the subnet's first /80 and fresh prefixes from the
// /80s after it, each handed out next-fit: an address or prefix given back
// is not handed out again until the walk wraps, as EC2, which picks IPv6
// addresses at random, makes an immediate reuse unlikely.
type ipv6Space struct {
	cidr    netip.Prefix
	assocID string
	addrs   map[netip.Addr]*eni
	// prefixes are the /80s delegated to ENIs.
	prefixes map[netip.Prefix]*eni
	// nextAddr is the offset in the subnet's first /80 the next fresh
	// address is looked for at; nextPrefix the index of the next /80.
	nextAddr   uint64
	nextPrefix uint64
}

// ipv6Offsets: the /64's host part is 64 bits; /80s are 2^16 of them, each
// of 2^48 addresses. EC2 reserves the first four and the last address of
// a subnet's IPv6 CIDR as of its IPv4 one.
const (
	ipv6PrefixSize   = uint64(1) << (128 - ipv6PrefixLen)
	ipv6PrefixCount  = uint64(1) << (ipv6PrefixLen - 64)
	ipv6FirstAddress = 4
)

func newIPv6Space(cidr netip.Prefix, assocID string) *ipv6Space {
	return &ipv6Space{cidr: cidr, assocID: assocID, addrs: map[netip.Addr]*eni{}, prefixes: map[netip.Prefix]*eni{},
		nextAddr: ipv6FirstAddress, nextPrefix: 1}
}

// host is addr's offset in the /64, or false when addr lies outside.
func (v *ipv6Space) host(addr netip.Addr) (uint64, bool) {
	if !addr.Is6() || addr.Is4In6() || !v.cidr.Contains(addr) {
		return 0, false
	}
	b := addr.As16()
	return binary.BigEndian.Uint64(b[8:]), true
}

func (v *ipv6Space) at(host uint64) netip.Addr {
	b := v.cidr.Addr().As16()
	binary.BigEndian.PutUint64(b[8:], host)
	return netip.AddrFrom16(b)
}

func ipv6Reserved(host uint64) bool { return host < ipv6FirstAddress || host == ^uint64(0) }

// prefixOf is the /80 holding addr.
func prefixOf(addr netip.Addr) netip.Prefix { return netip.PrefixFrom(addr, ipv6PrefixLen).Masked() }

// addrTaken reports whether addr is assigned, inside a delegated prefix or
// reserved.
func (v *ipv6Space) addrTaken(addr netip.Addr, host uint64) bool {
	if ipv6Reserved(host) || v.addrs[addr] != nil {
		return true
	}
	return v.prefixes[prefixOf(addr)] != nil
}

// prefixFree reports whether the /80 p holds no assigned and no reserved
// address and is not delegated.
func (v *ipv6Space) prefixFree(p netip.Prefix) bool {
	if v.prefixes[p] != nil {
		return false
	}
	first, _ := v.host(p.Addr())
	if first == 0 || first+ipv6PrefixSize-1 == ^uint64(0) {
		return false // holds reserved addresses
	}
	for a := range v.addrs {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// ipv6Request is what to add to an ENI: explicit addresses, a number of
// fresh ones, explicit /80 prefixes and a number of fresh prefixes.
type ipv6Request struct {
	ips         []netip.Addr
	count       int
	prefixes    []netip.Prefix
	prefixCount int
}

func (r ipv6Request) empty() bool {
	return len(r.ips)+r.count+len(r.prefixes)+r.prefixCount == 0
}

// ipv6Limit is the IPv6 slot limit that applies to e now: its instance
// type's when attached, else the largest any type allows.
func (s *State) ipv6Limit(e *eni) int {
	if e.attachment != nil {
		return e.attachment.instance.typ.IPv6PerENI
	}
	return s.maxIPv6PerENI
}

// ipv6SlotsUsed counts an ENI's IPv6 addresses and prefixes.
func (e *eni) ipv6SlotsUsed() int { return len(e.ipv6s) + len(e.ipv6Prefixes) }

// addIPv6 adds what r asks for to e, all or nothing, and returns the
// addresses and prefixes added. The codes for a subnet without IPv6 and
// for a type without IPv6 support are not documented (see doc.go).
func (s *State) addIPv6(e *eni, r ipv6Request) ([]netip.Addr, []netip.Prefix, error) {
	if r.empty() {
		return nil, nil, nil
	}
	if e.interfaceType == typeEFAOnly {
		return nil, nil, errEFAOnlyAddresses(cmp.Or(e.id, "the new network interface"))
	}
	v := e.subnet.ipv6
	if v == nil {
		return nil, nil, Errorf(CodeInvalidParameterValue, "Subnet %s has no IPv6 CIDR block: IPv6 addresses cannot be assigned to its network interfaces", e.subnet.id)
	}
	limit := s.ipv6Limit(e)
	if e.attachment != nil && limit == 0 {
		return nil, nil, Errorf(CodeInvalidParameterValue, "Instance type %s does not support IPv6 addresses", e.attachment.instance.typ.Name)
	}
	if e.ipv6SlotsUsed()+len(r.ips)+r.count+len(r.prefixes)+r.prefixCount > limit {
		return nil, nil, Errorf(CodePrivateIPLimitExceeded, "Number of IPv6 addresses will exceed limit.")
	}
	// Plan first, change after: the call is all or nothing.
	addrs := map[netip.Addr]bool{}
	prefixes := map[netip.Prefix]bool{}
	var newAddrs []netip.Addr
	var newPrefixes []netip.Prefix
	for _, ip := range r.ips {
		host, ok := v.host(ip)
		switch {
		case !ok:
			return nil, nil, Errorf(CodeInvalidParameterValue, "Address %s does not fall within the subnet's IPv6 address range (%s)", ip, v.cidr)
		case ipv6Reserved(host):
			return nil, nil, Errorf(CodeInvalidParameterValue, "Address %s is in subnet's reserved address range", ip)
		case addrs[ip]:
			return nil, nil, Errorf(CodeInvalidParameterValue, "Address %s is specified more than once", ip)
		case v.addrs[ip] == e:
			return nil, nil, Errorf(CodeInvalidParameterValue, "Address %s is already assigned to %s", ip, e.id)
		case v.addrTaken(ip, host):
			return nil, nil, Errorf(CodeAddressInUse, "Address %s is in use.", ip)
		}
		addrs[ip] = true
		newAddrs = append(newAddrs, ip)
	}
	for _, p := range r.prefixes {
		switch {
		case !v.cidr.Contains(p.Addr()):
			return nil, nil, Errorf(CodeInvalidParameterValue, "Prefix %s is not an aligned /80 of subnet %s", p, v.cidr)
		case prefixes[p]:
			return nil, nil, Errorf(CodeInvalidParameterValue, "Prefix %s is specified more than once", p)
		case !v.prefixFree(p) || slices.ContainsFunc(newAddrs, p.Contains):
			return nil, nil, Errorf(CodeInvalidParameterValue, "Prefix %s overlaps addresses in use", p)
		}
		prefixes[p] = true
		newPrefixes = append(newPrefixes, p)
	}
	// Fresh addresses: next-fit in the first /80 from nextAddr.
	next := v.nextAddr
	for range r.count {
		found := false
		for tries := uint64(0); tries < ipv6PrefixSize && !found; tries++ {
			host := next
			next++
			if next >= ipv6PrefixSize {
				next = ipv6FirstAddress
			}
			ip := v.at(host)
			if !v.addrTaken(ip, host) && !addrs[ip] && !slices.ContainsFunc(newPrefixes, func(p netip.Prefix) bool { return p.Contains(ip) }) {
				addrs[ip] = true
				newAddrs = append(newAddrs, ip)
				found = true
			}
		}
		if !found {
			return nil, nil, Errorf(CodeInsufficientAddresses, "There are not enough free IPv6 addresses in subnet '%s' to satisfy the requested number of instances.", e.subnet.id)
		}
	}
	nextPrefix := v.nextPrefix
	for range r.prefixCount {
		found := false
		for tries := uint64(0); tries < ipv6PrefixCount && !found; tries++ {
			p := netip.PrefixFrom(v.at(nextPrefix*ipv6PrefixSize), ipv6PrefixLen)
			nextPrefix++
			if nextPrefix >= ipv6PrefixCount {
				nextPrefix = 1
			}
			if v.prefixFree(p) && !prefixes[p] && !slices.ContainsFunc(newAddrs, p.Contains) {
				prefixes[p] = true
				newPrefixes = append(newPrefixes, p)
				found = true
			}
		}
		if !found {
			return nil, nil, Errorf(CodeInsufficientCidrBlocks, "There are not enough free cidr blocks in the specified subnet to satisfy the request.")
		}
	}
	v.nextAddr, v.nextPrefix = next, nextPrefix
	for _, ip := range newAddrs {
		v.addrs[ip] = e
	}
	for _, p := range newPrefixes {
		v.prefixes[p] = e
	}
	e.ipv6s = append(e.ipv6s, newAddrs...)
	e.ipv6Prefixes = append(e.ipv6Prefixes, newPrefixes...)
	return newAddrs, newPrefixes, nil
}

// removeIPv6 takes IPv6 addresses and prefixes off e, all or nothing.
func (s *State) removeIPv6(e *eni, ips []netip.Addr, prefixes []netip.Prefix) error {
	for _, ip := range ips {
		if !slices.Contains(e.ipv6s, ip) {
			return Errorf(CodeInvalidParameterValue, "Some of the specified addresses are not assigned to interface %s", e.id)
		}
	}
	for _, p := range prefixes {
		if !slices.Contains(e.ipv6Prefixes, p) {
			return Errorf(CodeInvalidParameterValue, "Some of the specified prefixes are not assigned to interface %s", e.id)
		}
	}
	v := e.subnet.ipv6
	for _, ip := range ips {
		delete(v.addrs, ip)
	}
	for _, p := range prefixes {
		delete(v.prefixes, p)
	}
	e.ipv6s = slices.DeleteFunc(e.ipv6s, func(a netip.Addr) bool { return slices.Contains(ips, a) })
	e.ipv6Prefixes = slices.DeleteFunc(e.ipv6Prefixes, func(p netip.Prefix) bool { return slices.Contains(prefixes, p) })
	return nil
}

// releaseIPv6 gives back everything e holds of IPv6 (its deletion).
func (s *State) releaseIPv6(e *eni) {
	if v := e.subnet.ipv6; v != nil {
		for _, ip := range e.ipv6s {
			delete(v.addrs, ip)
		}
		for _, p := range e.ipv6Prefixes {
			delete(v.prefixes, p)
		}
	}
	e.ipv6s, e.ipv6Prefixes = nil, nil
}

// parseIPv6 parses IPv6 addresses and /80 prefixes as a request names them.
func parseIPv6(ips, prefixes []string) ([]netip.Addr, []netip.Prefix, error) {
	var as []netip.Addr
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
			return nil, nil, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for IPv6 address", s)
		}
		as = append(as, a)
	}
	var ps []netip.Prefix
	for _, s := range prefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() != ipv6PrefixLen || p.Masked() != p {
			return nil, nil, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for IPv6 prefix: expecting an aligned /80", s)
		}
		ps = append(ps, p)
	}
	return as, ps, nil
}

// ipv6Combination holds EC2's rules on one request's IPv6 parameters:
// counts not negative, addresses with their count and prefixes with their
// count exclusive; exclusive says all four exclude each other
// (CreateNetworkInterface).
func ipv6Combination(r ipv6Request, exclusive bool) error {
	switch {
	case r.count < 0 || r.prefixCount < 0:
		return Errorf(CodeInvalidParameterValue, "IPv6 address and prefix counts must not be negative")
	case len(r.ips) > 0 && r.count > 0:
		return Errorf(CodeInvalidParameterCombo, "Ipv6Addresses and Ipv6AddressCount cannot be used together")
	case len(r.prefixes) > 0 && r.prefixCount > 0:
		return Errorf(CodeInvalidParameterCombo, "Ipv6Prefixes and Ipv6PrefixCount cannot be used together")
	case exclusive && (len(r.ips) > 0 || r.count > 0) && (len(r.prefixes) > 0 || r.prefixCount > 0):
		return Errorf(CodeInvalidParameterCombo, "IPv6 addresses and IPv6 prefixes cannot be specified together")
	}
	return nil
}

// AssignIpv6AddressesRequest is AssignIpv6Addresses' input: explicit
// addresses or a count, and/or explicit /80 prefixes or a prefix count.
type AssignIpv6AddressesRequest struct {
	NetworkInterfaceID string
	IPv6Addresses      []string
	IPv6AddressCount   int
	IPv6Prefixes       []string
	IPv6PrefixCount    int
}

// AssignIpv6AddressesResponse lists what this call assigned.
type AssignIpv6AddressesResponse struct {
	NetworkInterfaceID    string   `xml:"networkInterfaceId"`
	AssignedIPv6Addresses []string `xml:"assignedIpv6Addresses>item"`
	AssignedIPv6Prefixes  []string `xml:"assignedIpv6PrefixSet>item"`
}

// AssignIpv6Addresses adds IPv6 addresses or /80 prefixes to an ENI, all
// or nothing, within the instance type's Ipv6AddressesPerInterface.
func (s *State) AssignIpv6Addresses(req AssignIpv6AddressesRequest) (*AssignIpv6AddressesResponse, error) {
	s.lock()
	defer s.unlock()
	e, err := s.eniToChange(req.NetworkInterfaceID)
	if err != nil {
		return nil, err
	}
	ips, prefixes, err := parseIPv6(req.IPv6Addresses, req.IPv6Prefixes)
	if err != nil {
		return nil, err
	}
	r := ipv6Request{ips: ips, count: req.IPv6AddressCount, prefixes: prefixes, prefixCount: req.IPv6PrefixCount}
	if err := ipv6Combination(r, false); err != nil {
		return nil, err
	}
	if r.empty() {
		return nil, Errorf(CodeMissingParameter, "Either Ipv6Addresses, Ipv6AddressCount, Ipv6Prefixes or Ipv6PrefixCount must be specified")
	}
	commit := s.changing(s.timing.Lag.Assign, []*eni{e}, nil)
	added, addedPrefixes, err := s.addIPv6(e, r)
	if err != nil {
		return nil, err
	}
	commit()
	resp := &AssignIpv6AddressesResponse{NetworkInterfaceID: e.id}
	for _, ip := range added {
		resp.AssignedIPv6Addresses = append(resp.AssignedIPv6Addresses, ip.String())
	}
	for _, p := range addedPrefixes {
		resp.AssignedIPv6Prefixes = append(resp.AssignedIPv6Prefixes, p.String())
	}
	return resp, nil
}

// UnassignIpv6AddressesRequest is UnassignIpv6Addresses' input.
type UnassignIpv6AddressesRequest struct {
	NetworkInterfaceID string
	IPv6Addresses      []string
	IPv6Prefixes       []string
}

// UnassignIpv6AddressesResponse lists what the call unassigned.
type UnassignIpv6AddressesResponse struct {
	NetworkInterfaceID      string   `xml:"networkInterfaceId"`
	UnassignedIPv6Addresses []string `xml:"unassignedIpv6Addresses>item"`
	UnassignedIPv6Prefixes  []string `xml:"unassignedIpv6PrefixSet>item"`
}

// UnassignIpv6Addresses takes IPv6 addresses and prefixes off an ENI, all
// or nothing: one the ENI does not hold is InvalidParameterValue.
func (s *State) UnassignIpv6Addresses(req UnassignIpv6AddressesRequest) (*UnassignIpv6AddressesResponse, error) {
	s.lock()
	defer s.unlock()
	e, err := s.eniToChange(req.NetworkInterfaceID)
	if err != nil {
		return nil, err
	}
	if len(req.IPv6Addresses) == 0 && len(req.IPv6Prefixes) == 0 {
		return nil, Errorf(CodeMissingParameter, "Either Ipv6Addresses or Ipv6Prefixes must be specified")
	}
	ips, prefixes, err := parseIPv6(req.IPv6Addresses, req.IPv6Prefixes)
	if err != nil {
		return nil, err
	}
	commit := s.changing(s.timing.Lag.Unassign, []*eni{e}, nil)
	if err := s.removeIPv6(e, ips, prefixes); err != nil {
		return nil, err
	}
	commit()
	resp := &UnassignIpv6AddressesResponse{NetworkInterfaceID: e.id}
	for _, ip := range ips {
		resp.UnassignedIPv6Addresses = append(resp.UnassignedIPv6Addresses, ip.String())
	}
	for _, p := range prefixes {
		resp.UnassignedIPv6Prefixes = append(resp.UnassignedIPv6Prefixes, p.String())
	}
	return resp, nil
}
