package state

import (
	"fmt"
	"net/netip"
	"sort"
)

// build creates the scenario's resources in order: zones, VPCs with their
// default group and main route table, subnets, groups, instances.
func (s *State) build(sc *Scenario) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, z := range sc.Zones {
		s.zones[z] = zone{name: z, id: zoneID(sc.Region, z)}
	}
	for i, vs := range sc.VPCs {
		if err := s.buildVPC(fmt.Sprintf("vpcs[%d]", i), vs); err != nil {
			return err
		}
	}
	for i, is := range sc.Instances {
		path := fmt.Sprintf("instances[%d]", i)
		n := max(is.Count, 1)
		for k := 1; k <= n; k++ {
			spec := is
			if is.Count > 1 && is.Name != "" {
				spec.Name = fmt.Sprintf("%s-%d", is.Name, k)
			}
			if err := s.buildInstance(path, spec); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *State) buildVPC(path string, vs VPCSpec) error {
	if _, dup := s.vpcs.get(vs.ID); dup {
		return scenarioErr(path+".id", "%s appears twice", vs.ID)
	}
	v := &vpc{meta: s.newMeta("vpc", vs.ID), dhcpID: s.ids.newID("dopt")}
	v.tags = tagsFromMap(vs.Tags, vs.Name)
	for _, c := range vs.CIDRs {
		v.cidrs = append(v.cidrs, netip.MustParsePrefix(c))
		v.cidrAssoc = append(v.cidrAssoc, s.ids.newID("vpc-cidr-assoc"))
	}
	if vs.IPv6CIDR != "" {
		v.ipv6CIDR = netip.MustParsePrefix(vs.IPv6CIDR)
		v.ipv6Assoc = s.ids.newID("vpc-cidr-assoc")
	}
	s.vpcs.add(v)
	v.defaultSG = &securityGroup{meta: s.newMeta("sg", ""), vpc: v, name: "default", description: "default VPC security group"}
	s.groups.add(v.defaultSG)
	v.routeTable = &routeTable{meta: s.newMeta("rtb", ""), vpc: v, assocID: s.ids.newID("rtbassoc")}
	s.routeTables.add(v.routeTable)
	for j, ss := range vs.Subnets {
		if _, dup := s.subnets.get(ss.ID); dup {
			return scenarioErr(fmt.Sprintf("%s.subnets[%d].id", path, j), "%s appears twice", ss.ID)
		}
		cidr := netip.MustParsePrefix(ss.CIDR)
		sn := &subnet{meta: s.newMeta("subnet", ss.ID), vpc: v, cidr: cidr, zone: s.zones[ss.Zone],
			space: newAddrSpace(cidr), enis: map[*eni]struct{}{}}
		sn.tags = tagsFromMap(ss.Tags, ss.Name)
		if ss.IPv6CIDR != "" {
			sn.ipv6 = newIPv6Space(netip.MustParsePrefix(ss.IPv6CIDR), s.ids.newID("subnet-cidr-assoc"))
		}
		s.subnets.add(sn)
		v.subnets = append(v.subnets, sn)
	}
	for j, gs := range vs.SecurityGroups {
		if _, dup := s.groups.get(gs.ID); dup {
			return scenarioErr(fmt.Sprintf("%s.securityGroups[%d].id", path, j), "%s appears twice", gs.ID)
		}
		g := &securityGroup{meta: s.newMeta("sg", gs.ID), vpc: v, name: gs.Name, description: gs.Description}
		if g.description == "" {
			g.description = gs.Name
		}
		g.tags = tagsFromMap(gs.Tags, "")
		s.groups.add(g)
	}
	return nil
}

// subnetRef finds a subnet by ID or Name tag.
func (s *State) subnetRef(ref string) (*subnet, error) {
	if sn, ok := s.subnets.get(ref); ok {
		return sn, nil
	}
	for _, sn := range s.subnets.list {
		if v, ok := tagValue(sn.tags, "Name"); ok && v == ref {
			return sn, nil
		}
	}
	return nil, fmt.Errorf("subnet %q: %w", ref, errNoSuchRef)
}

// groupRefs finds security groups of v by ID or name.
func (s *State) groupRefs(v *vpc, refs []string) ([]string, error) {
	var ids []string
	for _, ref := range refs {
		found := ""
		for _, g := range s.groups.list {
			if g.vpc == v && (g.id == ref || g.name == ref) {
				found = g.id
			}
		}
		if found == "" {
			return nil, fmt.Errorf("security group %q in %s: %w", ref, v.id, errNoSuchRef)
		}
		ids = append(ids, found)
	}
	return ids, nil
}

func (s *State) buildInstance(path string, is InstanceSpec) error {
	sn, err := s.subnetRef(is.Subnet)
	if err != nil {
		return &ScenarioError{Path: path + ".subnet", Err: err}
	}
	groups, err := s.groupRefs(sn.vpc, is.SecurityGroups)
	if err != nil {
		return &ScenarioError{Path: path + ".securityGroups", Err: err}
	}
	in, err := s.launch(LaunchRequest{
		InstanceID: is.ID, InstanceType: is.Type, SubnetID: sn.id, SecurityGroupIDs: groups,
		PrivateIP: is.PrivateIP, Tags: tagsFromMap(is.Tags, is.Name),
	})
	if err != nil {
		return &ScenarioError{Path: path, Err: err}
	}
	primary := in.slots[primarySlot]
	if is.SecondaryIPs > 0 {
		if _, _, err := s.addAddresses(primary, addressRequest{count: is.SecondaryIPs}); err != nil {
			return &ScenarioError{Path: path + ".secondaryIPs", Err: err}
		}
	}
	if _, _, err := s.addIPv6(primary, ipv6Request{count: is.IPv6Addresses, prefixCount: is.IPv6Prefixes}); err != nil {
		return &ScenarioError{Path: path, Err: err}
	}
	for k, es := range is.ENIs {
		ep := fmt.Sprintf("%s.enis[%d]", path, k)
		esn := sn
		if es.Subnet != "" {
			if esn, err = s.subnetRef(es.Subnet); err != nil {
				return &ScenarioError{Path: ep + ".subnet", Err: err}
			}
		}
		var groupIDs []string
		for _, g := range in.groups {
			groupIDs = append(groupIDs, g.id)
		}
		e, err := s.createENI(eniSpec{subnet: esn, groupIDs: groupIDs, description: es.Description,
			tags: tagsFromMap(es.Tags, ""), secondaries: es.SecondaryIPs, prefixCount: es.Prefixes,
			ipv6: ipv6Request{count: es.IPv6Addresses, prefixCount: es.IPv6Prefixes}, interfaceType: es.InterfaceType})
		if err != nil {
			return &ScenarioError{Path: ep, Err: err}
		}
		a, err := s.attach(e, in, slot{card: es.NetworkCard, device: es.DeviceIndex}, true)
		if err != nil {
			s.deleteENI(e)
			return &ScenarioError{Path: ep, Err: err}
		}
		a.deleteOnTermination = es.DeleteOnTermination
	}
	return nil
}

// tagsFromMap turns a scenario's tag map into a sorted tag list, adding
// Name when given and not already there.
func tagsFromMap(m map[string]string, name string) []Tag {
	var out []Tag
	for k, v := range m {
		out = append(out, Tag{Key: k, Value: v})
	}
	if _, ok := m["Name"]; !ok && name != "" {
		out = append(out, Tag{Key: "Name", Value: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func tagValue(tags []Tag, key string) (string, bool) {
	for _, t := range tags {
		if t.Key == key {
			return t.Value, true
		}
	}
	return "", false
}
