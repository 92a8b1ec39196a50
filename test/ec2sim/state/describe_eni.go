package state

import (
	"net/netip"
	"slices"
)

// DescribeNetworkInterfacesRequest is DescribeNetworkInterfaces' input.
type DescribeNetworkInterfacesRequest struct {
	NetworkInterfaceIDs []string
	Filters             []Filter
	Page
}

// DescribeNetworkInterfacesResponse is DescribeNetworkInterfaces' output.
type DescribeNetworkInterfacesResponse struct {
	NetworkInterfaces []NetworkInterface `xml:"networkInterfaceSet>item"`
	NextToken         string             `xml:"nextToken,omitempty"`
}

// DescribeNetworkInterfaces lists ENIs by ID or by filters, in creation
// order, as describes show them (lag.go). Filters on IDs, instance, subnet and exact addresses are answered
// from indexes, so a page costs the same in a VPC of 40,000 ENIs as in one
// of ten, and its pages hold what matches; other filters page as EC2
// does, short or empty pages with a token (scanPage). Pages hold 5 to
// 1000 ENIs; IDs and MaxResults exclude each other; tokens are bound to
// the filters and expire (resume).
func (s *State) DescribeNetworkInterfaces(req DescribeNetworkInterfacesRequest) (*DescribeNetworkInterfacesResponse, error) {
	s.lock()
	defer s.unlock()
	if len(req.NetworkInterfaceIDs) > 0 && req.MaxResults != 0 {
		return nil, Errorf(CodeInvalidParameterCombo, "The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults")
	}
	after, err := s.resume(req.Page, "eni", 5, 1000, req.Filters)
	if err != nil {
		return nil, err
	}
	preds, err := compileFilters(req.Filters, s.eniFieldsOf())
	if err != nil {
		return nil, err
	}
	visible := s.eniVisible()
	candidates := s.enis.list
	indexed := false
	if len(req.NetworkInterfaceIDs) > 0 {
		candidates = nil
		for _, id := range req.NetworkInterfaceIDs {
			e, err := s.eniByID(id)
			if err == nil && !visible(e) {
				err = eniNotFound(id)
			}
			if err != nil {
				return nil, err
			}
			if !slices.Contains(candidates, e) {
				candidates = append(candidates, e)
			}
		}
		bySeq(candidates)
	} else if c, ok := s.eniCandidates(req.Filters); ok {
		// The indexes know ENIs as they are; those whose describes lag
		// a change may match as they are shown.
		if len(s.laggingENIs) > 0 {
			in := make(map[*eni]bool, len(c))
			for _, e := range c {
				in[e] = true
			}
			for e := range s.laggingENIs {
				if !in[e] {
					c = append(c, e)
				}
			}
		}
		candidates, indexed = bySeq(c), true
	}
	// Filters an index answers page over their matches; the others scan
	// as EC2 does (scanPage), leaving short and empty pages.
	pager := scanPage[*eni]
	if indexed {
		pager = page[*eni]
	}
	out, next := pager(candidates, after, req.MaxResults, func(e *eni) bool { return visible(e) && all(preds, e.shown()) })
	resp := &DescribeNetworkInterfacesResponse{NetworkInterfaces: make([]NetworkInterface, len(out)), NextToken: s.pageToken("eni", next, req.Filters)}
	for i, e := range out {
		resp.NetworkInterfaces[i] = s.eniView(e.shown())
	}
	return resp, nil
}

// eniCandidates narrows the ENIs to scan with an index when a filter names
// exact IDs, instances, subnets or addresses. The full filters still apply
// to the candidates.
func (s *State) eniCandidates(fs []Filter) ([]*eni, bool) {
	var set []*eni
	add := func(e *eni) {
		if e != nil && !slices.Contains(set, e) {
			set = append(set, e)
		}
	}
	if ids, ok := exactValues(fs, "network-interface-id"); ok {
		for _, id := range ids {
			e, _ := s.enis.get(id)
			add(e)
		}
		return bySeq(set), true
	}
	if ids, ok := exactValues(fs, "attachment.instance-id"); ok {
		for _, id := range ids {
			if in, found := s.instances.get(id); found {
				for _, e := range in.slots {
					add(e)
				}
			}
		}
		return bySeq(set), true
	}
	for _, name := range []string{"private-ip-address", "addresses.private-ip-address"} {
		if ips, ok := exactValues(fs, name); ok {
			for _, v := range ips {
				if ip, err := netip.ParseAddr(v); err == nil {
					add(s.eniHolding(ip))
				}
			}
			return bySeq(set), true
		}
	}
	if ids, ok := exactValues(fs, "subnet-id"); ok {
		for _, id := range ids {
			if sn, found := s.subnets.get(id); found {
				for e := range sn.enis {
					set = append(set, e)
				}
			}
		}
		return bySeq(set), true
	}
	return nil, false
}

// eniHolding returns the ENI holding ip as an address (not inside a
// prefix), or nil.
func (s *State) eniHolding(ip netip.Addr) *eni {
	for _, sn := range s.subnets.list {
		if off, ok := sn.space.offset(ip); ok {
			if e := sn.space.owner(off); e != nil && slices.Contains(e.ips, ip) {
				return e
			}
			return nil
		}
	}
	return nil
}
