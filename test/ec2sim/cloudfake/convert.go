package cloudfake

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim/state"
)

// The conversions below turn the SDK's request values into ec2sim's and
// ec2sim's views into the SDK's types, field for field, as the SDK would
// read ec2sim's XML; TestFakeMatchesAdapter holds the two paths together.

func filters(in []types.Filter) []state.Filter {
	out := make([]state.Filter, 0, len(in))
	for _, f := range in {
		out = append(out, state.Filter{Name: aws.ToString(f.Name), Values: f.Values})
	}
	return out
}

func page(maxResults *int32, nextToken *string) state.Page {
	return state.Page{MaxResults: int(aws.ToInt32(maxResults)), NextToken: aws.ToString(nextToken)}
}

// token is a NextToken as the SDK reads it: absent when empty.
func token(t string) *string {
	if t == "" {
		return nil
	}
	return aws.String(t)
}

func each[In, Out any](in []In, f func(In) Out) []Out {
	if len(in) == 0 {
		return nil
	}
	out := make([]Out, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

func tagSpecs(in []types.TagSpecification) []state.TagSpecification {
	var out []state.TagSpecification
	for _, s := range in {
		spec := state.TagSpecification{ResourceType: string(s.ResourceType)}
		for _, t := range s.Tags {
			spec.Tags = append(spec.Tags, state.Tag{Key: aws.ToString(t.Key), Value: aws.ToString(t.Value)})
		}
		out = append(out, spec)
	}
	return out
}

func tagTo(t state.Tag) types.Tag {
	return types.Tag{Key: aws.String(t.Key), Value: aws.String(t.Value)}
}

func vpcTo(v state.Vpc) types.Vpc {
	out := types.Vpc{
		VpcId: aws.String(v.VpcID), OwnerId: aws.String(v.OwnerID), State: types.VpcState(v.State), CidrBlock: aws.String(v.CidrBlock),
		DhcpOptionsId: aws.String(v.DhcpOptionsID), InstanceTenancy: types.Tenancy(v.InstanceTenancy), IsDefault: aws.Bool(v.IsDefault),
		Tags: each(v.Tags, tagTo),
	}
	for _, a := range v.CidrAssociations {
		out.CidrBlockAssociationSet = append(out.CidrBlockAssociationSet, types.VpcCidrBlockAssociation{
			AssociationId: aws.String(a.AssociationID), CidrBlock: aws.String(a.CidrBlock),
			CidrBlockState: &types.VpcCidrBlockState{State: types.VpcCidrBlockStateCode(a.State)},
		})
	}
	for _, a := range v.IPv6Cidrs {
		out.Ipv6CidrBlockAssociationSet = append(out.Ipv6CidrBlockAssociationSet, types.VpcIpv6CidrBlockAssociation{
			AssociationId: aws.String(a.AssociationID), Ipv6CidrBlock: aws.String(a.IPv6CidrBlock),
			Ipv6CidrBlockState: &types.VpcCidrBlockState{State: types.VpcCidrBlockStateCode(a.State)},
			Ipv6Pool:           aws.String(a.IPv6Pool), NetworkBorderGroup: aws.String(a.NetworkBorderGroup),
		})
	}
	return out
}

func subnetTo(s state.Subnet) types.Subnet {
	out := types.Subnet{
		SubnetId: aws.String(s.SubnetID), SubnetArn: aws.String(s.SubnetArn), State: types.SubnetState(s.State),
		VpcId: aws.String(s.VpcID), OwnerId: aws.String(s.OwnerID), CidrBlock: aws.String(s.CidrBlock),
		AvailableIpAddressCount: aws.Int32(int32(s.AvailableIPAddressCount)),
		AvailabilityZone:        aws.String(s.AvailabilityZone), AvailabilityZoneId: aws.String(s.AvailabilityZoneID),
		DefaultForAz: aws.Bool(s.DefaultForAz), MapPublicIpOnLaunch: aws.Bool(s.MapPublicIPOnLaunch), Tags: each(s.Tags, tagTo),
		AssignIpv6AddressOnCreation: aws.Bool(s.AssignIPv6AddressOnCreation),
	}
	for _, a := range s.IPv6Cidrs {
		out.Ipv6CidrBlockAssociationSet = append(out.Ipv6CidrBlockAssociationSet, types.SubnetIpv6CidrBlockAssociation{
			AssociationId: aws.String(a.AssociationID), Ipv6CidrBlock: aws.String(a.IPv6CidrBlock),
			Ipv6CidrBlockState: &types.SubnetCidrBlockState{State: types.SubnetCidrBlockStateCode(a.State)},
		})
	}
	return out
}

func groupTo(g state.SecurityGroup) types.SecurityGroup {
	return types.SecurityGroup{
		OwnerId: aws.String(g.OwnerID), GroupId: aws.String(g.GroupID), GroupName: aws.String(g.GroupName),
		Description: aws.String(g.Description), VpcId: aws.String(g.VpcID), SecurityGroupArn: aws.String(g.Arn), Tags: each(g.Tags, tagTo),
	}
}

func groupIdentifierTo(g state.GroupIdentifier) types.GroupIdentifier {
	return types.GroupIdentifier{GroupId: aws.String(g.GroupID), GroupName: aws.String(g.GroupName)}
}

func reservationTo(r state.Reservation) types.Reservation {
	return types.Reservation{ReservationId: aws.String(r.ReservationID), OwnerId: aws.String(r.OwnerID), Instances: each(r.Instances, instanceTo)}
}

func instanceTo(in state.Instance) types.Instance {
	out := types.Instance{
		InstanceId: aws.String(in.InstanceID), ImageId: aws.String(in.ImageID), InstanceType: types.InstanceType(in.InstanceType),
		State:          &types.InstanceState{Code: aws.Int32(int32(in.State.Code)), Name: types.InstanceStateName(in.State.Name)},
		PrivateDnsName: aws.String(in.PrivateDNSName),
		Placement: &types.Placement{
			AvailabilityZone: aws.String(in.Placement.AvailabilityZone), AvailabilityZoneId: aws.String(in.Placement.AvailabilityZoneID),
			Tenancy: types.Tenancy(in.Placement.Tenancy),
		},
		SourceDestCheck: aws.Bool(in.SourceDestCheck), SecurityGroups: each(in.Groups, groupIdentifierTo),
		Architecture: types.ArchitectureValues(in.Architecture), Hypervisor: types.HypervisorType(in.Hypervisor),
		RootDeviceType: types.DeviceType(in.RootDeviceType), VirtualizationType: types.VirtualizationType(in.Virtualization),
		Tags: each(in.Tags, tagTo),
	}
	// Omitted on the wire when empty, so absent for the SDK.
	if in.SubnetID != "" {
		out.SubnetId = aws.String(in.SubnetID)
	}
	if in.VpcID != "" {
		out.VpcId = aws.String(in.VpcID)
	}
	if in.PrivateIPAddress != "" {
		out.PrivateIpAddress = aws.String(in.PrivateIPAddress)
	}
	for _, e := range in.NetworkInterfaces {
		out.NetworkInterfaces = append(out.NetworkInterfaces, types.InstanceNetworkInterface{
			NetworkInterfaceId: aws.String(e.NetworkInterfaceID), SubnetId: aws.String(e.SubnetID), VpcId: aws.String(e.VpcID),
			MacAddress: aws.String(e.MacAddress), PrivateIpAddress: aws.String(e.PrivateIPAddress), Status: types.NetworkInterfaceStatus(e.Status),
		})
	}
	return out
}

func associationTo(a *state.Association) *types.NetworkInterfaceAssociation {
	if a == nil {
		return nil
	}
	return &types.NetworkInterfaceAssociation{
		AllocationId: aws.String(a.AllocationID), AssociationId: aws.String(a.AssociationID), IpOwnerId: aws.String(a.IPOwnerID),
		PublicIp: aws.String(a.PublicIP), PublicDnsName: aws.String(a.PublicDNSName),
	}
}

func eniTo(e state.NetworkInterface) types.NetworkInterface {
	out := types.NetworkInterface{
		NetworkInterfaceId: aws.String(e.NetworkInterfaceID), SubnetId: aws.String(e.SubnetID), VpcId: aws.String(e.VpcID),
		AvailabilityZone: aws.String(e.AvailabilityZone), AvailabilityZoneId: aws.String(e.AvailabilityZoneID),
		Description: aws.String(e.Description), OwnerId: aws.String(e.OwnerID), RequesterManaged: aws.Bool(e.RequesterManaged),
		Status: types.NetworkInterfaceStatus(e.Status), MacAddress: aws.String(e.MacAddress),
		PrivateIpAddress: aws.String(e.PrivateIPAddress), PrivateDnsName: aws.String(e.PrivateDNSName),
		SourceDestCheck: aws.Bool(e.SourceDestCheck), InterfaceType: types.NetworkInterfaceType(e.InterfaceType),
		Groups: each(e.Groups, groupIdentifierTo), Association: associationTo(e.Association), TagSet: each(e.Tags, tagTo),
	}
	if a := e.Attachment; a != nil {
		out.Attachment = &types.NetworkInterfaceAttachment{
			AttachmentId: aws.String(a.AttachmentID), InstanceId: aws.String(a.InstanceID), InstanceOwnerId: aws.String(a.InstanceOwnerID),
			DeviceIndex: aws.Int32(int32(a.DeviceIndex)), NetworkCardIndex: aws.Int32(int32(a.NetworkCardIndex)),
			Status: types.AttachmentStatus(a.Status), DeleteOnTermination: aws.Bool(a.DeleteOnTermination),
		}
	}
	for _, a := range e.PrivateIPAddresses {
		out.PrivateIpAddresses = append(out.PrivateIpAddresses, types.NetworkInterfacePrivateIpAddress{
			PrivateIpAddress: aws.String(a.PrivateIPAddress), PrivateDnsName: aws.String(a.PrivateDNSName),
			Primary: aws.Bool(a.Primary), Association: associationTo(a.Association),
		})
	}
	for _, p := range e.IPv4Prefixes {
		out.Ipv4Prefixes = append(out.Ipv4Prefixes, types.Ipv4PrefixSpecification{Ipv4Prefix: aws.String(p.IPv4Prefix)})
	}
	if e.IPv6Address != "" {
		out.Ipv6Address = aws.String(e.IPv6Address)
	}
	for _, a := range e.IPv6Addresses {
		out.Ipv6Addresses = append(out.Ipv6Addresses, types.NetworkInterfaceIpv6Address{
			Ipv6Address: aws.String(a.IPv6Address), IsPrimaryIpv6: aws.Bool(a.IsPrimaryIPv6),
		})
	}
	for _, p := range e.IPv6Prefixes {
		out.Ipv6Prefixes = append(out.Ipv6Prefixes, types.Ipv6PrefixSpecification{Ipv6Prefix: aws.String(p.IPv6Prefix)})
	}
	return out
}

func instanceTypeTo(t state.InstanceTypeInfo) types.InstanceTypeInfo {
	n := t.NetworkInfo
	out := types.InstanceTypeInfo{
		InstanceType: types.InstanceType(t.InstanceType), CurrentGeneration: aws.Bool(t.CurrentGeneration), BareMetal: aws.Bool(t.BareMetal),
		Hypervisor: types.InstanceTypeHypervisor(t.Hypervisor),
		VCpuInfo:   &types.VCpuInfo{DefaultVCpus: aws.Int32(int32(t.DefaultVCPUs))},
		MemoryInfo: &types.MemoryInfo{SizeInMiB: aws.Int64(int64(t.MemorySizeInMiB))},
		NetworkInfo: &types.NetworkInfo{
			MaximumNetworkInterfaces:  aws.Int32(int32(n.MaximumNetworkInterfaces)),
			Ipv4AddressesPerInterface: aws.Int32(int32(n.IPv4AddressesPerInterface)),
			Ipv6AddressesPerInterface: aws.Int32(int32(n.IPv6AddressesPerInterface)),
			Ipv6Supported:             aws.Bool(n.IPv6Supported),
			MaximumNetworkCards:       aws.Int32(int32(n.MaximumNetworkCards)),
			DefaultNetworkCardIndex:   aws.Int32(int32(n.DefaultNetworkCardIndex)),
			EnaSupport:                types.EnaSupport(n.EnaSupport),
			EfaSupported:              aws.Bool(n.EfaSupported),
		},
	}
	if len(t.SupportedArchitectures) > 0 {
		out.ProcessorInfo = &types.ProcessorInfo{}
		for _, a := range t.SupportedArchitectures {
			out.ProcessorInfo.SupportedArchitectures = append(out.ProcessorInfo.SupportedArchitectures, types.ArchitectureType(a))
		}
	}
	for _, c := range n.NetworkCards {
		out.NetworkInfo.NetworkCards = append(out.NetworkInfo.NetworkCards, types.NetworkCardInfo{
			NetworkCardIndex: aws.Int32(int32(c.NetworkCardIndex)), MaximumNetworkInterfaces: aws.Int32(int32(c.MaximumNetworkInterfaces)),
		})
	}
	if n.EfaInfo != nil {
		out.NetworkInfo.EfaInfo = &types.EfaInfo{MaximumEfaInterfaces: aws.Int32(int32(n.EfaInfo.MaximumEfaInterfaces))}
	}
	return out
}

func addressTo(a state.Address) types.Address {
	out := types.Address{
		AllocationId: aws.String(a.AllocationID), PublicIp: aws.String(a.PublicIP), Domain: types.DomainType(a.Domain),
		NetworkBorderGroup: aws.String(a.NetworkBorderGroup), PublicIpv4Pool: aws.String(a.PublicIPv4Pool), Tags: each(a.Tags, tagTo),
	}
	// Omitted on the wire when empty, so absent for the SDK.
	for field, v := range map[**string]string{
		&out.AssociationId: a.AssociationID, &out.InstanceId: a.InstanceID, &out.NetworkInterfaceId: a.NetworkInterfaceID,
		&out.NetworkInterfaceOwnerId: a.NetworkInterfaceOwnerID, &out.PrivateIpAddress: a.PrivateIPAddress,
	} {
		if v != "" {
			*field = aws.String(v)
		}
	}
	return out
}
