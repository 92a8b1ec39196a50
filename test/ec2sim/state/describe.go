package state

import (
	"slices"
	"strconv"
	"strings"
)

// DescribeRequest is the input of the describes that take IDs, filters and
// pages: DescribeInstances (instance IDs), DescribeSubnets, DescribeVpcs,
// DescribeRouteTables, DescribeSecurityGroups (group IDs; Names are group
// names) and DescribeAddresses (allocation IDs; Names are public IPs; no
// pages).
type DescribeRequest struct {
	IDs     []string
	Names   []string
	Filters []Filter
	Page
}

// describeSpec is what differs between the generic describes.
type describeSpec[T resource] struct {
	kind   string
	lo, hi int
	reg    *registry[T]
	lookup func(id string) (T, error)
	fields map[string]field[T]
	// shown is the resource as describes show it (lag.go); nil: as it is.
	shown func(T) T
}

// describe answers a DescribeRequest from one registry: resources by ID (all
// must exist), else all, filtered, paged in creation order as EC2 pages
// (scanPage: short and empty pages with a token) with tokens bound to the
// filters (resume).
func describe[T resource](s *State, spec describeSpec[T], req DescribeRequest) ([]T, string, error) {
	if len(req.IDs) > 0 && req.MaxResults != 0 {
		return nil, "", Errorf(CodeInvalidParameterCombo, "The parameter %sIds cannot be used with the parameter maxResults", spec.kind)
	}
	after, err := s.resume(req.Page, spec.kind, spec.lo, spec.hi, req.Filters)
	if err != nil {
		return nil, "", err
	}
	preds, err := compileFilters(req.Filters, spec.fields)
	if err != nil {
		return nil, "", err
	}
	candidates := spec.reg.list
	if len(req.IDs) > 0 {
		candidates = nil
		for _, id := range req.IDs {
			r, err := spec.lookup(id)
			if err != nil {
				return nil, "", err
			}
			if !slices.Contains(candidates, r) {
				candidates = append(candidates, r)
			}
		}
		bySeq(candidates)
	}
	match := func(r T) bool { return all(preds, r) }
	if spec.shown != nil {
		match = func(r T) bool { return all(preds, spec.shown(r)) }
	}
	out, next := scanPage(candidates, after, req.MaxResults, match)
	return out, s.pageToken(spec.kind, next, req.Filters), nil
}

// DescribeInstancesResponse is DescribeInstances' output.
type DescribeInstancesResponse struct {
	Reservations []Reservation `xml:"reservationSet>item"`
	NextToken    string        `xml:"nextToken,omitempty"`
}

var instanceFields = map[string]field[*instance]{
	"instance-id":         one(func(i *instance) string { return i.id }),
	"instance-type":       one(func(i *instance) string { return i.typ.Name }),
	"instance-state-name": one(func(i *instance) string { return i.state }),
	"instance-state-code": one(func(i *instance) string { return strconv.Itoa(instanceStateCodes[i.state]) }),
	"availability-zone":   one(func(i *instance) string { return i.subnet.zone.name }),
	"subnet-id":           one(func(i *instance) string { return i.subnet.id }),
	"vpc-id":              one(func(i *instance) string { return i.subnet.vpc.id }),
	"image-id":            one(func(i *instance) string { return i.imageID }),
	"reservation-id":      one(func(i *instance) string { return i.reservationID }),
	"private-ip-address":  one(func(i *instance) string { return i.primaryIP.String() }),
	"instance.group-id": func(i *instance, match func(string) bool) bool {
		return slices.ContainsFunc(i.groups, func(g *securityGroup) bool { return match(g.id) })
	},
	"instance.group-name": func(i *instance, match func(string) bool) bool {
		return slices.ContainsFunc(i.groups, func(g *securityGroup) bool { return match(g.name) })
	},
}

// DescribeInstances lists instances, one reservation each, terminated ones
// included. Pages hold 5 to 1000.
func (s *State) DescribeInstances(req DescribeRequest) (*DescribeInstancesResponse, error) {
	s.lock()
	defer s.unlock()
	out, next, err := describe(s, describeSpec[*instance]{kind: "instance", lo: 5, hi: 1000, reg: &s.instances, lookup: s.instanceByID, fields: s.instanceFields()}, req)
	if err != nil {
		return nil, err
	}
	resp := &DescribeInstancesResponse{NextToken: next}
	visible := s.eniVisible()
	for _, in := range out {
		v := s.instanceView(in)
		// A new ENI attached within the eventual-consistency window is
		// not in its instance's description either.
		v.NetworkInterfaces = slices.DeleteFunc(v.NetworkInterfaces, func(ni NetworkInterface) bool {
			e, ok := s.enis.get(ni.NetworkInterfaceID)
			return ok && !visible(e)
		})
		resp.Reservations = append(resp.Reservations, Reservation{ReservationID: in.reservationID, OwnerID: s.account, Instances: []Instance{v}})
	}
	return resp, nil
}

// DescribeSubnetsResponse is DescribeSubnets' output.
type DescribeSubnetsResponse struct {
	Subnets   []Subnet `xml:"subnetSet>item"`
	NextToken string   `xml:"nextToken,omitempty"`
}

var subnetFields = map[string]field[*subnet]{
	"subnet-id":                  one(func(sn *subnet) string { return sn.id }),
	"vpc-id":                     one(func(sn *subnet) string { return sn.vpc.id }),
	"availability-zone":          one(func(sn *subnet) string { return sn.zone.name }),
	"availability-zone-id":       one(func(sn *subnet) string { return sn.zone.id }),
	"cidr-block":                 one(func(sn *subnet) string { return sn.cidr.String() }),
	"cidr":                       one(func(sn *subnet) string { return sn.cidr.String() }),
	"cidrBlock":                  one(func(sn *subnet) string { return sn.cidr.String() }),
	"state":                      one(func(sn *subnet) string { return "available" }),
	"default-for-az":             one(func(sn *subnet) string { return "false" }),
	"available-ip-address-count": one(func(sn *subnet) string { return strconv.Itoa(sn.space.available()) }),
}

// DescribeSubnets lists subnets with their exact availableIpAddressCount.
func (s *State) DescribeSubnets(req DescribeRequest) (*DescribeSubnetsResponse, error) {
	s.lock()
	defer s.unlock()
	out, next, err := describe(s, describeSpec[*subnet]{kind: "subnet", lo: 5, hi: 1000, reg: &s.subnets, lookup: s.subnetByID, fields: s.subnetFieldsOf()}, req)
	if err != nil {
		return nil, err
	}
	resp := &DescribeSubnetsResponse{NextToken: next}
	for _, sn := range out {
		resp.Subnets = append(resp.Subnets, s.subnetView(sn))
	}
	return resp, nil
}

// DescribeVpcsResponse is DescribeVpcs' output.
type DescribeVpcsResponse struct {
	Vpcs      []Vpc  `xml:"vpcSet>item"`
	NextToken string `xml:"nextToken,omitempty"`
}

var vpcFields = map[string]field[*vpc]{
	"vpc-id":          one(func(v *vpc) string { return v.id }),
	"state":           one(func(v *vpc) string { return "available" }),
	"is-default":      one(func(v *vpc) string { return "false" }),
	"dhcp-options-id": one(func(v *vpc) string { return v.dhcpID }),
	"cidr":            one(func(v *vpc) string { return v.cidrs[0].String() }),
	"cidr-block-association.cidr-block": func(v *vpc, match func(string) bool) bool {
		for _, c := range v.cidrs {
			if match(c.String()) {
				return true
			}
		}
		return false
	},
}

func (s *State) vpcByID(id string) (*vpc, error) {
	if !wellFormedID(id, "vpc") {
		return nil, Errorf(CodeVpcMalformed, "Invalid id: %q", id)
	}
	v, ok := s.vpcs.get(id)
	if !ok {
		return nil, Errorf(CodeVpcNotFound, "The vpc ID '%s' does not exist", id)
	}
	return v, nil
}

// DescribeVpcs lists VPCs with all their IPv4 CIDRs.
func (s *State) DescribeVpcs(req DescribeRequest) (*DescribeVpcsResponse, error) {
	s.lock()
	defer s.unlock()
	out, next, err := describe(s, describeSpec[*vpc]{kind: "vpc", lo: 5, hi: 1000, reg: &s.vpcs, lookup: s.vpcByID, fields: s.vpcFieldsOf()}, req)
	if err != nil {
		return nil, err
	}
	resp := &DescribeVpcsResponse{NextToken: next}
	for _, v := range out {
		resp.Vpcs = append(resp.Vpcs, s.vpcView(v))
	}
	return resp, nil
}

// DescribeSecurityGroupsResponse is DescribeSecurityGroups' output.
type DescribeSecurityGroupsResponse struct {
	SecurityGroups []SecurityGroup `xml:"securityGroupInfo>item"`
	NextToken      string          `xml:"nextToken,omitempty"`
}

var groupFields = map[string]field[*securityGroup]{
	"group-id":    one(func(g *securityGroup) string { return g.id }),
	"group-name":  one(func(g *securityGroup) string { return g.name }),
	"vpc-id":      one(func(g *securityGroup) string { return g.vpc.id }),
	"description": one(func(g *securityGroup) string { return g.description }),
}

func (s *State) groupByID(id string) (*securityGroup, error) {
	if !wellFormedID(id, "sg") {
		return nil, Errorf(CodeGroupMalformed, "Invalid id: %q (expecting \"sg-...\")", id)
	}
	g, ok := s.groups.get(id)
	if !ok {
		return nil, Errorf(CodeGroupNotFound, "The security group '%s' does not exist", id)
	}
	return g, nil
}

// DescribeSecurityGroups lists security groups by ID, by name or by filter.
func (s *State) DescribeSecurityGroups(req DescribeRequest) (*DescribeSecurityGroupsResponse, error) {
	s.lock()
	defer s.unlock()
	for _, name := range req.Names {
		found := false
		for _, g := range s.groups.list {
			found = found || (!g.removed && g.name == name)
		}
		if !found {
			return nil, Errorf(CodeGroupNotFound, "The security group '%s' does not exist", name)
		}
	}
	if len(req.Names) > 0 {
		req.Filters = append(req.Filters, Filter{Name: "group-name", Values: req.Names})
	}
	out, next, err := describe(s, describeSpec[*securityGroup]{kind: "securityGroup", lo: 5, hi: 1000, reg: &s.groups, lookup: s.groupByID, fields: s.groupFieldsOf()}, req)
	if err != nil {
		return nil, err
	}
	resp := &DescribeSecurityGroupsResponse{NextToken: next}
	for _, g := range out {
		resp.SecurityGroups = append(resp.SecurityGroups, s.groupView(g))
	}
	return resp, nil
}

// DescribeRouteTablesResponse is DescribeRouteTables' output.
type DescribeRouteTablesResponse struct {
	RouteTables []RouteTable `xml:"routeTableSet>item"`
	NextToken   string       `xml:"nextToken,omitempty"`
}

var routeTableFields = map[string]field[*routeTable]{
	"route-table-id":   one(func(rt *routeTable) string { return rt.id }),
	"vpc-id":           one(func(rt *routeTable) string { return rt.vpc.id }),
	"association.main": one(func(rt *routeTable) string { return "true" }),
	// Subnets use their VPC's main table implicitly; as on EC2, implicit
	// associations match no association.subnet-id filter.
	"association.subnet-id": func(*routeTable, func(string) bool) bool { return false },
}

func (s *State) routeTableByID(id string) (*routeTable, error) {
	rt, ok := s.routeTables.get(id)
	if !ok {
		return nil, Errorf(CodeRouteTableNotFound, "The routeTable ID '%s' does not exist", id)
	}
	return rt, nil
}

// DescribeRouteTables lists the VPCs' main route tables, each with a local
// route per VPC CIDR.
func (s *State) DescribeRouteTables(req DescribeRequest) (*DescribeRouteTablesResponse, error) {
	s.lock()
	defer s.unlock()
	out, next, err := describe(s, describeSpec[*routeTable]{kind: "routeTable", lo: 5, hi: 100, reg: &s.routeTables, lookup: s.routeTableByID, fields: s.routeTableFieldsOf()}, req)
	if err != nil {
		return nil, err
	}
	resp := &DescribeRouteTablesResponse{NextToken: next}
	for _, rt := range out {
		resp.RouteTables = append(resp.RouteTables, s.routeTableView(rt))
	}
	return resp, nil
}

// DescribeInstanceTypesRequest is DescribeInstanceTypes' input.
type DescribeInstanceTypesRequest struct {
	InstanceTypes []string
	Filters       []Filter
	Page
}

// DescribeInstanceTypesResponse is DescribeInstanceTypes' output.
type DescribeInstanceTypesResponse struct {
	InstanceTypes []InstanceTypeInfo `xml:"instanceTypeSet>item"`
	NextToken     string             `xml:"nextToken,omitempty"`
}

var typeFields = map[string]field[*InstanceType]{
	"instance-type":                           one(func(t *InstanceType) string { return t.Name }),
	"hypervisor":                              one(func(t *InstanceType) string { return t.Hypervisor }),
	"bare-metal":                              one(func(t *InstanceType) string { return boolString(t.BareMetal) }),
	"current-generation":                      one(func(t *InstanceType) string { return "true" }),
	"vcpu-info.default-vcpus":                 one(func(t *InstanceType) string { return strconv.Itoa(t.VCPUs) }),
	"memory-info.size-in-mib":                 one(func(t *InstanceType) string { return strconv.Itoa(t.MemoryMiB) }),
	"network-info.maximum-network-interfaces": one(func(t *InstanceType) string { return strconv.Itoa(t.MaxInterfaces()) }),
	"network-info.maximum-network-cards":      one(func(t *InstanceType) string { return strconv.Itoa(t.Cards()) }),
	"network-info.efa-supported":              one(func(t *InstanceType) string { return boolString(t.MaxEFA > 0) }),
	"network-info.efa-info.maximum-efa-interfaces": func(t *InstanceType, match func(string) bool) bool {
		return t.MaxEFA > 0 && match(strconv.Itoa(t.MaxEFA))
	},
	"network-info.ipv4-addresses-per-interface": one(func(t *InstanceType) string { return strconv.Itoa(t.IPv4PerENI) }),
	"network-info.ipv6-addresses-per-interface": one(func(t *InstanceType) string { return strconv.Itoa(t.IPv6PerENI) }),
	"network-info.ipv6-supported":               one(func(t *InstanceType) string { return boolString(t.IPv6PerENI > 0) }),
	"processor-info.supported-architecture":     one(func(t *InstanceType) string { return architecture(t) }),
}

// DescribeInstanceTypes' page bounds: MaxResults 5 to 100, and a request
// without MaxResults is still answered a page at a time, of 100 (EC2
// pages its 1 300 and more types whatever the request says).
const (
	minInstanceTypesPage     = 5
	defaultInstanceTypesPage = 100
)

// DescribeInstanceTypes lists the catalog in name order, a page at a time
// even without MaxResults.
func (s *State) DescribeInstanceTypes(req DescribeInstanceTypesRequest) (*DescribeInstanceTypesResponse, error) {
	s.lock()
	defer s.unlock()
	after, err := req.start("instanceType", minInstanceTypesPage, defaultInstanceTypesPage)
	if err != nil {
		return nil, err
	}
	pageSize := req.MaxResults
	if pageSize == 0 {
		pageSize = defaultInstanceTypesPage
	}
	preds, err := compileFiltersTagged(req.Filters, typeFields, nil)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, name := range req.InstanceTypes {
		if s.types[name] == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, Errorf(CodeInvalidInstanceType, "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
	}
	names := make([]string, 0, len(s.types))
	for name := range s.types {
		if len(req.InstanceTypes) == 0 || slices.Contains(req.InstanceTypes, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	resp := &DescribeInstanceTypesResponse{}
	for i := int(after); i < len(names); i++ {
		t := s.types[names[i]]
		if !all(preds, t) {
			continue
		}
		if len(resp.InstanceTypes) == pageSize {
			resp.NextToken = token("instanceType", uint64(i))
			break
		}
		resp.InstanceTypes = append(resp.InstanceTypes, typeView(t))
	}
	return resp, nil
}
