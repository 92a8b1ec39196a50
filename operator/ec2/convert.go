package ec2

import (
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/internal/intern"
	"github.com/enipam/enipam/operator/cloud"
)

// str is s as one shared copy (package intern): the inventory keeps every
// ENI of the VPC (20 000 at 10 000 nodes), whose subnets, zones, VPC,
// states, security groups and tag keys repeat; each describe would
// otherwise store them afresh.
func str(s *string) string {
	if s == nil {
		return ""
	}
	return intern.String(*s)
}

// strOf is str for the SDK's string enums.
func strOf[T ~string](v T) string {
	return intern.String(string(v))
}

func tagsFrom(tags []types.Tag) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		v := aws.ToString(t.Value)
		if k := aws.ToString(t.Key); k != cloud.TagCreatedAt && k != cloud.TagInstance {
			v = str(t.Value) // not the resource's own: its creation time, its instance
		}
		m[str(t.Key)] = v
	}
	return m
}

func subnetFrom(s types.Subnet) cloud.Subnet {
	out := cloud.Subnet{
		ID: aws.ToString(s.SubnetId), VPCID: aws.ToString(s.VpcId), AZ: aws.ToString(s.AvailabilityZone),
		Available: int(aws.ToInt32(s.AvailableIpAddressCount)), Tags: tagsFrom(s.Tags),
	}
	out.CIDR, _ = netip.ParsePrefix(aws.ToString(s.CidrBlock))
	if cidrs := ipv6CIDRs(s.Ipv6CidrBlockAssociationSet, func(a types.SubnetIpv6CidrBlockAssociation) (*string, string) {
		if a.Ipv6CidrBlockState == nil {
			return a.Ipv6CidrBlock, ""
		}
		return a.Ipv6CidrBlock, string(a.Ipv6CidrBlockState.State)
	}); len(cidrs) > 0 {
		out.IPv6CIDR = cidrs[0] // EC2 associates at most one /64 with a subnet
	}
	return out
}

// ipv6CIDRs returns the IPv6 CIDR blocks of a subnet's or a VPC's
// associations that are associated: one being associated or
// disassociated carries no addresses.
func ipv6CIDRs[A any](assocs []A, get func(A) (cidr *string, state string)) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range assocs {
		cidr, state := get(a)
		if state != "associated" {
			continue
		}
		if p, err := netip.ParsePrefix(aws.ToString(cidr)); err == nil && p.Addr().Is6() {
			out = append(out, p)
		}
	}
	return out
}

func instanceFrom(in types.Instance) cloud.Instance {
	out := cloud.Instance{
		ID: aws.ToString(in.InstanceId), Type: strOf(in.InstanceType),
		VPCID: str(in.VpcId), SubnetID: str(in.SubnetId), Tags: tagsFrom(in.Tags),
	}
	if in.Placement != nil {
		out.AZ = str(in.Placement.AvailabilityZone)
	}
	if in.State != nil {
		out.State = strOf(in.State.Name)
	}
	out.PrivateIP, _ = netip.ParseAddr(aws.ToString(in.PrivateIpAddress))
	return out
}

func eniFrom(e types.NetworkInterface) cloud.ENI {
	out := cloud.ENI{
		ID: aws.ToString(e.NetworkInterfaceId), MAC: aws.ToString(e.MacAddress), Description: str(e.Description),
		SubnetID: str(e.SubnetId), VPCID: str(e.VpcId), AZ: str(e.AvailabilityZone),
		Status: strOf(e.Status), Tags: tagsFrom(e.TagSet), RequesterManaged: aws.ToBool(e.RequesterManaged),
		InterfaceType: strOf(e.InterfaceType),
	}
	out.PrimaryIP, _ = netip.ParseAddr(aws.ToString(e.PrivateIpAddress))
	if a := e.Attachment; a != nil {
		out.InstanceID = aws.ToString(a.InstanceId)
		out.DeviceIndex = int(aws.ToInt32(a.DeviceIndex))
		out.AttachmentID = aws.ToString(a.AttachmentId)
		out.DeleteOnTermination = aws.ToBool(a.DeleteOnTermination)
		out.AttachmentStatus = strOf(a.Status)
		out.NetworkCard = int(aws.ToInt32(a.NetworkCardIndex))
		if a.Status == types.AttachmentStatusDetached {
			out.InstanceID, out.AttachmentID, out.AttachmentStatus = "", "", ""
		}
	}
	for _, g := range e.Groups {
		out.SecurityGroups = append(out.SecurityGroups, str(g.GroupId))
	}
	if n := len(e.PrivateIpAddresses) - 1; n > 0 {
		// Sized once: grown by append, nine addresses took a slice of 16.
		out.IPs = make([]netip.Addr, 0, n)
	}
	for _, a := range e.PrivateIpAddresses {
		if aws.ToBool(a.Primary) {
			continue
		}
		if ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress)); err == nil {
			out.IPs = append(out.IPs, ip)
		}
	}
	out.Prefixes = parsePrefixes(e.Ipv4Prefixes, func(p types.Ipv4PrefixSpecification) string { return ptr(p.Ipv4Prefix) }, nil)
	out.IPv6s = parseAddrs(e.Ipv6Addresses, func(a types.NetworkInterfaceIpv6Address) string { return ptr(a.Ipv6Address) }, is6)
	out.IPv6Prefixes = parsePrefixes(e.Ipv6Prefixes, func(p types.Ipv6PrefixSpecification) string { return ptr(p.Ipv6Prefix) }, prefix6)
	return out
}
