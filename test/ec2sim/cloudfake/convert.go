package cloudfake

import (
	"net/netip"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim"
)

// The conversions below turn ec2sim's views into cloud types field by field
// as operator/ec2's convert.go turns the SDK's types; TestFakeMatchesAdapter
// holds the two together.

func tagsFrom(tags []ec2sim.Tag) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[t.Key] = t.Value
	}
	return m
}

func subnetFrom(s ec2sim.Subnet) cloud.Subnet {
	out := cloud.Subnet{ID: s.SubnetID, VPCID: s.VpcID, AZ: s.AvailabilityZone, Available: s.AvailableIPAddressCount, Tags: tagsFrom(s.Tags)}
	out.CIDR, _ = netip.ParsePrefix(s.CidrBlock)
	return out
}

func instanceFrom(in ec2sim.Instance) cloud.Instance {
	out := cloud.Instance{
		ID: in.InstanceID, Type: in.InstanceType, VPCID: in.VpcID, SubnetID: in.SubnetID, Tags: tagsFrom(in.Tags),
		AZ: in.Placement.AvailabilityZone, State: in.State.Name,
	}
	out.PrivateIP, _ = netip.ParseAddr(in.PrivateIPAddress)
	return out
}

func eniFrom(e ec2sim.NetworkInterface) cloud.ENI {
	out := cloud.ENI{
		ID: e.NetworkInterfaceID, MAC: e.MacAddress, Description: e.Description,
		SubnetID: e.SubnetID, VPCID: e.VpcID, AZ: e.AvailabilityZone,
		Status: e.Status, Tags: tagsFrom(e.Tags), RequesterManaged: e.RequesterManaged,
		InterfaceType: e.InterfaceType,
	}
	out.PrimaryIP, _ = netip.ParseAddr(e.PrivateIPAddress)
	if a := e.Attachment; a != nil {
		out.InstanceID = a.InstanceID
		out.DeviceIndex = a.DeviceIndex
		out.AttachmentID = a.AttachmentID
		out.DeleteOnTermination = a.DeleteOnTermination
		out.AttachmentStatus = a.Status
		out.NetworkCard = a.NetworkCardIndex
		if a.Status == "detached" {
			out.InstanceID, out.AttachmentID, out.AttachmentStatus = "", "", ""
		}
	}
	for _, g := range e.Groups {
		out.SecurityGroups = append(out.SecurityGroups, g.GroupID)
	}
	for _, a := range e.PrivateIPAddresses {
		if a.Primary {
			continue
		}
		if ip, err := netip.ParseAddr(a.PrivateIPAddress); err == nil {
			out.IPs = append(out.IPs, ip)
		}
	}
	for _, p := range e.IPv4Prefixes {
		if pfx, err := netip.ParsePrefix(p.IPv4Prefix); err == nil {
			out.Prefixes = append(out.Prefixes, pfx)
		}
	}
	return out
}

func instanceTypeFrom(t ec2sim.InstanceTypeInfo) cloud.InstanceType {
	n := t.NetworkInfo
	out := cloud.InstanceType{
		Name: t.InstanceType, Hypervisor: t.Hypervisor, BareMetal: t.BareMetal, VCPUs: t.DefaultVCPUs,
		MaxENIs: n.MaximumNetworkInterfaces, IPv4PerENI: n.IPv4AddressesPerInterface, IPv6PerENI: n.IPv6AddressesPerInterface,
	}
	// Only network card 0 carries the ENIs enipam manages.
	for _, card := range n.NetworkCards {
		if card.NetworkCardIndex == 0 {
			out.MaxENIs = card.MaximumNetworkInterfaces
		}
	}
	return out
}
