package state

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The functions below copy model objects into their views; they run under
// the State's lock.

// timestamp is EC2's time format.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func groupViews(gs []*securityGroup) []GroupIdentifier {
	out := make([]GroupIdentifier, len(gs))
	for i, g := range gs {
		out[i] = GroupIdentifier{GroupID: g.id, GroupName: g.name}
	}
	return out
}

func cloneTags(tags []Tag) []Tag { return append([]Tag(nil), tags...) }

func (s *State) associationView(a *address) *Association {
	return &Association{AllocationID: a.id, AssociationID: a.associationID, IPOwnerID: s.account,
		PublicIP: a.publicIP.String(), PublicDNSName: s.publicDNSName(a.publicIP)}
}

func (s *State) eniView(e *eni) NetworkInterface {
	v := NetworkInterface{
		NetworkInterfaceID: e.id,
		SubnetID:           e.subnet.id,
		VpcID:              e.subnet.vpc.id,
		AvailabilityZone:   e.subnet.zone.name,
		AvailabilityZoneID: e.subnet.zone.id,
		Description:        e.description,
		OwnerID:            s.account,
		Status:             e.status(),
		MacAddress:         e.mac,
		SourceDestCheck:    e.sourceDestCheck,
		InterfaceType:      e.interfaceType,
		Groups:             groupViews(e.groups),
		Tags:               cloneTags(e.tags),
		PrivateIPAddresses: make([]PrivateIPAddress, len(e.ips)),
	}
	if len(e.ips) > 0 {
		v.PrivateIPAddress = e.ips[0].String()
		v.PrivateDNSName = s.privateDNSName(e.ips[0])
	}
	for i, ip := range e.ips {
		v.PrivateIPAddresses[i] = PrivateIPAddress{PrivateIPAddress: ip.String(), PrivateDNSName: s.privateDNSName(ip), Primary: i == 0}
		for _, a := range e.eips {
			if a.privateIP == ip {
				v.PrivateIPAddresses[i].Association = s.associationView(a)
				if i == 0 {
					v.Association = v.PrivateIPAddresses[i].Association
				}
			}
		}
	}
	for _, p := range e.prefixes {
		v.IPv4Prefixes = append(v.IPv4Prefixes, IPv4Prefix{IPv4Prefix: p.String()})
	}
	for _, ip := range e.ipv6s {
		v.IPv6Addresses = append(v.IPv6Addresses, IPv6Address{IPv6Address: ip.String()})
	}
	if len(e.ipv6s) > 0 {
		v.IPv6Address = e.ipv6s[0].String()
	}
	for _, p := range e.ipv6Prefixes {
		v.IPv6Prefixes = append(v.IPv6Prefixes, IPv6Prefix{IPv6Prefix: p.String()})
	}
	if a := e.attachment; a != nil {
		v.Attachment = &Attachment{
			AttachmentID: a.id, InstanceID: a.instance.id, InstanceOwnerID: s.account,
			DeviceIndex: a.deviceIndex, NetworkCardIndex: a.networkCard, Status: a.status, AttachTime: timestamp(a.since),
			DeleteOnTermination: a.deleteOnTermination,
		}
	}
	return v
}

// instanceStateCodes are EC2's codes for instance states.
var instanceStateCodes = map[string]int{"pending": 0, instanceRunning: 16, "shutting-down": 32, instanceTerminated: 48, "stopping": 64, "stopped": 80}

func (s *State) instanceView(in *instance) Instance {
	v := Instance{
		InstanceID:     in.id,
		ImageID:        in.imageID,
		State:          InstanceState{Code: instanceStateCodes[in.state], Name: in.state},
		InstanceType:   in.typ.Name,
		LaunchTime:     timestamp(in.launched),
		Placement:      Placement{AvailabilityZone: in.subnet.zone.name, AvailabilityZoneID: in.subnet.zone.id, Tenancy: "default"},
		Architecture:   "x86_64",
		Hypervisor:     "xen",
		RootDeviceType: "ebs",
		Virtualization: "hvm",
		Tags:           cloneTags(in.tags),
	}
	if in.state == instanceTerminated {
		return v
	}
	v.SubnetID, v.VpcID = in.subnet.id, in.subnet.vpc.id
	v.PrivateIPAddress = in.primaryIP.String()
	v.PrivateDNSName = s.privateDNSName(in.primaryIP)
	v.SourceDestCheck = true
	v.Groups = groupViews(in.groups)
	for _, e := range s.instanceENIs(in) {
		ni := s.eniView(e)
		// An instance's view of its ENIs carries no zone, tags or
		// requester flag; the SDK ignores them anyway, but keep it lean.
		ni.AvailabilityZone, ni.AvailabilityZoneID, ni.Tags = "", "", nil
		v.NetworkInterfaces = append(v.NetworkInterfaces, ni)
	}
	return v
}

// sortedSlots lists an instance's slots by card, then device index.
func sortedSlots(in *instance) []slot {
	return slices.SortedFunc(maps.Keys(in.slots), func(a, b slot) int {
		return cmp.Or(cmp.Compare(a.card, b.card), cmp.Compare(a.device, b.device))
	})
}

func (s *State) subnetView(sn *subnet) Subnet {
	v := Subnet{
		SubnetID:                sn.id,
		SubnetArn:               fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", s.region, s.account, sn.id),
		State:                   "available",
		VpcID:                   sn.vpc.id,
		OwnerID:                 s.account,
		CidrBlock:               sn.cidr.String(),
		AvailableIPAddressCount: sn.space.available(),
		AvailabilityZone:        sn.zone.name,
		AvailabilityZoneID:      sn.zone.id,
		Tags:                    cloneTags(sn.tags),
	}
	if sn.ipv6 != nil {
		v.IPv6Cidrs = []IPv6CidrBlockAssociation{{AssociationID: sn.ipv6.assocID, IPv6CidrBlock: sn.ipv6.cidr.String(), State: "associated"}}
	}
	return v
}

func (s *State) vpcView(v *vpc) Vpc {
	out := Vpc{VpcID: v.id, OwnerID: s.account, State: "available", CidrBlock: v.cidrs[0].String(),
		DhcpOptionsID: v.dhcpID, InstanceTenancy: "default", Tags: cloneTags(v.tags)}
	for i, c := range v.cidrs {
		out.CidrAssociations = append(out.CidrAssociations, CidrBlockAssociation{AssociationID: v.cidrAssoc[i], CidrBlock: c.String(), State: "associated"})
	}
	if v.ipv6CIDR.IsValid() {
		out.IPv6Cidrs = []IPv6CidrBlockAssociation{{AssociationID: v.ipv6Assoc, IPv6CidrBlock: v.ipv6CIDR.String(), State: "associated",
			IPv6Pool: "Amazon", NetworkBorderGroup: s.region}}
	}
	return out
}

func (s *State) groupView(g *securityGroup) SecurityGroup {
	return SecurityGroup{OwnerID: s.account, GroupID: g.id, GroupName: g.name, Description: g.description, VpcID: g.vpc.id,
		Arn: fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", s.region, s.account, g.id), Tags: cloneTags(g.tags)}
}

func (s *State) routeTableView(rt *routeTable) RouteTable {
	out := RouteTable{RouteTableID: rt.id, VpcID: rt.vpc.id, OwnerID: s.account, Tags: cloneTags(rt.tags),
		Associations: []RouteTableAssociation{{AssociationID: rt.assocID, RouteTableID: rt.id, Main: true, State: "associated"}}}
	for _, c := range rt.vpc.cidrs {
		out.Routes = append(out.Routes, Route{DestinationCidrBlock: c.String(), GatewayID: "local", Origin: "CreateRouteTable", State: "active"})
	}
	return out
}

func (s *State) addressView(a *address) Address {
	out := Address{AllocationID: a.id, PublicIP: a.publicIP.String(), Domain: "vpc", NetworkBorderGroup: s.region,
		PublicIPv4Pool: "amazon", Tags: cloneTags(a.tags)}
	if a.eni != nil {
		out.AssociationID = a.associationID
		out.NetworkInterfaceID = a.eni.id
		out.NetworkInterfaceOwnerID = s.account
		out.PrivateIPAddress = a.privateIP.String()
		if a.eni.attachment != nil {
			out.InstanceID = a.eni.attachment.instance.id
		}
	}
	return out
}

// typeView shows a type as EC2 does: maximumNetworkInterfaces counts every
// card's interfaces, each card lists its own limit.
// architecture is the type's processor architecture; a scenario's type
// without one is x86_64.
func architecture(t *InstanceType) string {
	if t.Architecture == "" {
		return "x86_64"
	}
	return t.Architecture
}

func typeView(t *InstanceType) InstanceTypeInfo {
	v := InstanceTypeInfo{
		InstanceType: t.Name, CurrentGeneration: true, BareMetal: t.BareMetal, Hypervisor: t.Hypervisor,
		DefaultVCPUs: t.VCPUs, MemorySizeInMiB: t.MemoryMiB, SupportedArchitectures: []string{architecture(t)},
		NetworkInfo: NetworkInfo{
			MaximumNetworkInterfaces: t.MaxInterfaces(), IPv4AddressesPerInterface: t.IPv4PerENI,
			IPv6AddressesPerInterface: t.IPv6PerENI, IPv6Supported: t.IPv6PerENI > 0,
			MaximumNetworkCards: t.Cards(), EnaSupport: "required", EfaSupported: t.MaxEFA > 0,
		},
	}
	cardTypes := []string{typeInterface}
	if t.MaxEFA > 0 {
		v.NetworkInfo.EfaInfo = &EfaInfo{MaximumEfaInterfaces: t.MaxEFA}
		cardTypes = append(cardTypes, typeEFA, typeEFAOnly)
	}
	for card := range t.Cards() {
		v.NetworkInfo.NetworkCards = append(v.NetworkInfo.NetworkCards, NetworkCard{
			NetworkCardIndex: card, MaximumNetworkInterfaces: t.MaxENIs, InterfaceTypes: cardTypes,
		})
	}
	return v
}
