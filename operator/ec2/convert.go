package ec2

import (
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/operator/cloud"
)

func tagsFrom(tags []types.Tag) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func subnetFrom(s types.Subnet) cloud.Subnet {
	out := cloud.Subnet{
		ID: aws.ToString(s.SubnetId), VPCID: aws.ToString(s.VpcId), AZ: aws.ToString(s.AvailabilityZone),
		Available: int(aws.ToInt32(s.AvailableIpAddressCount)), Tags: tagsFrom(s.Tags),
	}
	out.CIDR, _ = netip.ParsePrefix(aws.ToString(s.CidrBlock))
	return out
}

func instanceFrom(in types.Instance) cloud.Instance {
	out := cloud.Instance{
		ID: aws.ToString(in.InstanceId), Type: string(in.InstanceType),
		VPCID: aws.ToString(in.VpcId), SubnetID: aws.ToString(in.SubnetId), Tags: tagsFrom(in.Tags),
	}
	if in.Placement != nil {
		out.AZ = aws.ToString(in.Placement.AvailabilityZone)
	}
	if in.State != nil {
		out.State = string(in.State.Name)
	}
	out.PrivateIP, _ = netip.ParseAddr(aws.ToString(in.PrivateIpAddress))
	return out
}

func eniFrom(e types.NetworkInterface) cloud.ENI {
	out := cloud.ENI{
		ID: aws.ToString(e.NetworkInterfaceId), MAC: aws.ToString(e.MacAddress), Description: aws.ToString(e.Description),
		SubnetID: aws.ToString(e.SubnetId), VPCID: aws.ToString(e.VpcId), AZ: aws.ToString(e.AvailabilityZone),
		Status: string(e.Status), Tags: tagsFrom(e.TagSet), RequesterManaged: aws.ToBool(e.RequesterManaged),
		InterfaceType: string(e.InterfaceType),
	}
	out.PrimaryIP, _ = netip.ParseAddr(aws.ToString(e.PrivateIpAddress))
	if a := e.Attachment; a != nil {
		out.InstanceID = aws.ToString(a.InstanceId)
		out.DeviceIndex = int(aws.ToInt32(a.DeviceIndex))
		out.AttachmentID = aws.ToString(a.AttachmentId)
		out.DeleteOnTermination = aws.ToBool(a.DeleteOnTermination)
		out.AttachmentStatus = string(a.Status)
		out.NetworkCard = int(aws.ToInt32(a.NetworkCardIndex))
		if a.Status == types.AttachmentStatusDetached {
			out.InstanceID, out.AttachmentID, out.AttachmentStatus = "", "", ""
		}
	}
	for _, g := range e.Groups {
		out.SecurityGroups = append(out.SecurityGroups, aws.ToString(g.GroupId))
	}
	for _, a := range e.PrivateIpAddresses {
		if aws.ToBool(a.Primary) {
			continue
		}
		if ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress)); err == nil {
			out.IPs = append(out.IPs, ip)
		}
	}
	for _, p := range e.Ipv4Prefixes {
		if pfx, err := netip.ParsePrefix(aws.ToString(p.Ipv4Prefix)); err == nil {
			out.Prefixes = append(out.Prefixes, pfx)
		}
	}
	return out
}
