package cloudfake

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim/state"
)

// Each operation below reads the SDK's input as ec2sim's wire layer reads
// the same parameters, calls the State's action, and answers with the
// SDK's output types; convert.go turns ec2sim's views into those.

// DescribeVpcs implements ec2.SDK.
func (e *EC2) DescribeVpcs(ctx context.Context, in *ec2.DescribeVpcsInput, _ ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error) {
	req := state.DescribeRequest{IDs: in.VpcIds, Filters: filters(in.Filters), Page: page(in.MaxResults, in.NextToken)}
	return call(ctx, e, DescribeVpcs, req, e.state.DescribeVpcs, func(r *state.DescribeVpcsResponse) *ec2.DescribeVpcsOutput {
		return &ec2.DescribeVpcsOutput{Vpcs: each(r.Vpcs, vpcTo), NextToken: token(r.NextToken)}
	})
}

// DescribeSubnets implements ec2.SDK.
func (e *EC2) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	req := state.DescribeRequest{IDs: in.SubnetIds, Filters: filters(in.Filters), Page: page(in.MaxResults, in.NextToken)}
	return call(ctx, e, DescribeSubnets, req, e.state.DescribeSubnets, func(r *state.DescribeSubnetsResponse) *ec2.DescribeSubnetsOutput {
		return &ec2.DescribeSubnetsOutput{Subnets: each(r.Subnets, subnetTo), NextToken: token(r.NextToken)}
	})
}

// DescribeSecurityGroups implements ec2.SDK.
func (e *EC2) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	req := state.DescribeRequest{IDs: in.GroupIds, Names: in.GroupNames, Filters: filters(in.Filters), Page: page(in.MaxResults, in.NextToken)}
	return call(ctx, e, DescribeSecurityGroups, req, e.state.DescribeSecurityGroups, func(r *state.DescribeSecurityGroupsResponse) *ec2.DescribeSecurityGroupsOutput {
		return &ec2.DescribeSecurityGroupsOutput{SecurityGroups: each(r.SecurityGroups, groupTo), NextToken: token(r.NextToken)}
	})
}

// DescribeInstances implements ec2.SDK.
func (e *EC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	req := state.DescribeRequest{IDs: in.InstanceIds, Filters: filters(in.Filters), Page: page(in.MaxResults, in.NextToken)}
	return call(ctx, e, DescribeInstances, req, e.state.DescribeInstances, func(r *state.DescribeInstancesResponse) *ec2.DescribeInstancesOutput {
		return &ec2.DescribeInstancesOutput{Reservations: each(r.Reservations, reservationTo), NextToken: token(r.NextToken)}
	})
}

// DescribeNetworkInterfaces implements ec2.SDK.
func (e *EC2) DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, _ ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	req := state.DescribeNetworkInterfacesRequest{NetworkInterfaceIDs: in.NetworkInterfaceIds, Filters: filters(in.Filters), Page: page(in.MaxResults, in.NextToken)}
	return call(ctx, e, DescribeNetworkInterfaces, req, e.state.DescribeNetworkInterfaces, func(r *state.DescribeNetworkInterfacesResponse) *ec2.DescribeNetworkInterfacesOutput {
		return &ec2.DescribeNetworkInterfacesOutput{NetworkInterfaces: each(r.NetworkInterfaces, eniTo), NextToken: token(r.NextToken)}
	})
}

// DescribeInstanceTypes implements ec2.SDK.
func (e *EC2) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	req := state.DescribeInstanceTypesRequest{Filters: filters(in.Filters), Page: page(in.MaxResults, in.NextToken)}
	for _, t := range in.InstanceTypes {
		req.InstanceTypes = append(req.InstanceTypes, string(t))
	}
	return call(ctx, e, DescribeInstanceTypes, req, e.state.DescribeInstanceTypes, func(r *state.DescribeInstanceTypesResponse) *ec2.DescribeInstanceTypesOutput {
		return &ec2.DescribeInstanceTypesOutput{InstanceTypes: each(r.InstanceTypes, instanceTypeTo), NextToken: token(r.NextToken)}
	})
}

// CreateNetworkInterface implements ec2.SDK.
func (e *EC2) CreateNetworkInterface(ctx context.Context, in *ec2.CreateNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error) {
	req := state.CreateNetworkInterfaceRequest{
		SubnetID: aws.ToString(in.SubnetId), Description: aws.ToString(in.Description), SecurityGroupIDs: in.Groups,
		ClientToken: aws.ToString(in.ClientToken), PrivateIPAddress: aws.ToString(in.PrivateIpAddress),
		SecondaryPrivateIPAddressCount: int(aws.ToInt32(in.SecondaryPrivateIpAddressCount)),
		IPv4PrefixCount:                int(aws.ToInt32(in.Ipv4PrefixCount)),
		InterfaceType:                  string(in.InterfaceType),
		TagSpecifications:              tagSpecs(in.TagSpecifications),
	}
	for _, a := range in.PrivateIpAddresses {
		req.PrivateIPAddresses = append(req.PrivateIPAddresses, state.PrivateIPSpec{Address: aws.ToString(a.PrivateIpAddress), Primary: aws.ToBool(a.Primary)})
	}
	for _, p := range in.Ipv4Prefixes {
		req.IPv4Prefixes = append(req.IPv4Prefixes, aws.ToString(p.Ipv4Prefix))
	}
	req.IPv6AddressCount = int(aws.ToInt32(in.Ipv6AddressCount))
	req.IPv6PrefixCount = int(aws.ToInt32(in.Ipv6PrefixCount))
	for _, a := range in.Ipv6Addresses {
		req.IPv6Addresses = append(req.IPv6Addresses, aws.ToString(a.Ipv6Address))
	}
	for _, p := range in.Ipv6Prefixes {
		req.IPv6Prefixes = append(req.IPv6Prefixes, aws.ToString(p.Ipv6Prefix))
	}
	return call(ctx, e, CreateNetworkInterface, req, e.state.CreateNetworkInterface, func(r *state.CreateNetworkInterfaceResponse) *ec2.CreateNetworkInterfaceOutput {
		eni := eniTo(r.NetworkInterface)
		return &ec2.CreateNetworkInterfaceOutput{NetworkInterface: &eni, ClientToken: token(r.ClientToken)}
	})
}

// AttachNetworkInterface implements ec2.SDK.
func (e *EC2) AttachNetworkInterface(ctx context.Context, in *ec2.AttachNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error) {
	req := state.AttachNetworkInterfaceRequest{
		NetworkInterfaceID: aws.ToString(in.NetworkInterfaceId), InstanceID: aws.ToString(in.InstanceId),
		DeviceIndex: int(aws.ToInt32(in.DeviceIndex)), NetworkCardIndex: int(aws.ToInt32(in.NetworkCardIndex)),
	}
	return call(ctx, e, AttachNetworkInterface, req, e.state.AttachNetworkInterface, func(r *state.AttachNetworkInterfaceResponse) *ec2.AttachNetworkInterfaceOutput {
		return &ec2.AttachNetworkInterfaceOutput{AttachmentId: aws.String(r.AttachmentID), NetworkCardIndex: aws.Int32(int32(r.NetworkCardIndex))}
	})
}

// ModifyNetworkInterfaceAttribute implements ec2.SDK.
func (e *EC2) ModifyNetworkInterfaceAttribute(ctx context.Context, in *ec2.ModifyNetworkInterfaceAttributeInput, _ ...func(*ec2.Options)) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
	req := state.ModifyNetworkInterfaceAttributeRequest{NetworkInterfaceID: aws.ToString(in.NetworkInterfaceId), SecurityGroupIDs: in.Groups}
	if in.Description != nil {
		req.Description = in.Description.Value
	}
	if in.SourceDestCheck != nil {
		req.SourceDestCheck = in.SourceDestCheck.Value
	}
	if a := in.Attachment; a != nil {
		req.AttachmentID, req.DeleteOnTermination = aws.ToString(a.AttachmentId), a.DeleteOnTermination
	}
	return call(ctx, e, ModifyNetworkInterfaceAttribute, req, e.state.ModifyNetworkInterfaceAttribute, func(*state.ReturnResponse) *ec2.ModifyNetworkInterfaceAttributeOutput {
		return &ec2.ModifyNetworkInterfaceAttributeOutput{}
	})
}

// DetachNetworkInterface implements ec2.SDK.
func (e *EC2) DetachNetworkInterface(ctx context.Context, in *ec2.DetachNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.DetachNetworkInterfaceOutput, error) {
	detach := func(id string) (*state.ReturnResponse, error) {
		return e.state.DetachNetworkInterface(id, aws.ToBool(in.Force))
	}
	return call(ctx, e, DetachNetworkInterface, aws.ToString(in.AttachmentId), detach, func(*state.ReturnResponse) *ec2.DetachNetworkInterfaceOutput {
		return &ec2.DetachNetworkInterfaceOutput{}
	})
}

// DeleteNetworkInterface implements ec2.SDK.
func (e *EC2) DeleteNetworkInterface(ctx context.Context, in *ec2.DeleteNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error) {
	return call(ctx, e, DeleteNetworkInterface, aws.ToString(in.NetworkInterfaceId), e.state.DeleteNetworkInterface, func(*state.ReturnResponse) *ec2.DeleteNetworkInterfaceOutput {
		return &ec2.DeleteNetworkInterfaceOutput{}
	})
}

// AssignPrivateIpAddresses implements ec2.SDK.
func (e *EC2) AssignPrivateIpAddresses(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput, _ ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	req := state.AssignPrivateIpAddressesRequest{
		NetworkInterfaceID: aws.ToString(in.NetworkInterfaceId), PrivateIPAddresses: in.PrivateIpAddresses,
		SecondaryPrivateIPAddressCount: int(aws.ToInt32(in.SecondaryPrivateIpAddressCount)),
		IPv4Prefixes:                   in.Ipv4Prefixes, IPv4PrefixCount: int(aws.ToInt32(in.Ipv4PrefixCount)),
		AllowReassignment: aws.ToBool(in.AllowReassignment),
	}
	return call(ctx, e, AssignPrivateIpAddresses, req, e.state.AssignPrivateIpAddresses, func(r *state.AssignPrivateIpAddressesResponse) *ec2.AssignPrivateIpAddressesOutput {
		out := &ec2.AssignPrivateIpAddressesOutput{NetworkInterfaceId: aws.String(r.NetworkInterfaceID)}
		for _, a := range r.AssignedPrivateIPs {
			out.AssignedPrivateIpAddresses = append(out.AssignedPrivateIpAddresses, types.AssignedPrivateIpAddress{PrivateIpAddress: aws.String(a.PrivateIPAddress)})
		}
		for _, p := range r.AssignedIPv4Prefixes {
			out.AssignedIpv4Prefixes = append(out.AssignedIpv4Prefixes, types.Ipv4PrefixSpecification{Ipv4Prefix: aws.String(p.IPv4Prefix)})
		}
		return out
	})
}

// UnassignPrivateIpAddresses implements ec2.SDK.
func (e *EC2) UnassignPrivateIpAddresses(ctx context.Context, in *ec2.UnassignPrivateIpAddressesInput, _ ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error) {
	req := state.UnassignPrivateIpAddressesRequest{
		NetworkInterfaceID: aws.ToString(in.NetworkInterfaceId), PrivateIPAddresses: in.PrivateIpAddresses, IPv4Prefixes: in.Ipv4Prefixes,
	}
	return call(ctx, e, UnassignPrivateIpAddresses, req, e.state.UnassignPrivateIpAddresses, func(*state.ReturnResponse) *ec2.UnassignPrivateIpAddressesOutput {
		return &ec2.UnassignPrivateIpAddressesOutput{}
	})
}

// AssignIpv6Addresses implements ec2.SDK.
func (e *EC2) AssignIpv6Addresses(ctx context.Context, in *ec2.AssignIpv6AddressesInput, _ ...func(*ec2.Options)) (*ec2.AssignIpv6AddressesOutput, error) {
	req := state.AssignIpv6AddressesRequest{
		NetworkInterfaceID: aws.ToString(in.NetworkInterfaceId), IPv6Addresses: in.Ipv6Addresses,
		IPv6AddressCount: int(aws.ToInt32(in.Ipv6AddressCount)),
		IPv6Prefixes:     in.Ipv6Prefixes, IPv6PrefixCount: int(aws.ToInt32(in.Ipv6PrefixCount)),
	}
	return call(ctx, e, AssignIpv6Addresses, req, e.state.AssignIpv6Addresses, func(r *state.AssignIpv6AddressesResponse) *ec2.AssignIpv6AddressesOutput {
		return &ec2.AssignIpv6AddressesOutput{
			NetworkInterfaceId: aws.String(r.NetworkInterfaceID), AssignedIpv6Addresses: r.AssignedIPv6Addresses, AssignedIpv6Prefixes: r.AssignedIPv6Prefixes,
		}
	})
}

// UnassignIpv6Addresses implements ec2.SDK.
func (e *EC2) UnassignIpv6Addresses(ctx context.Context, in *ec2.UnassignIpv6AddressesInput, _ ...func(*ec2.Options)) (*ec2.UnassignIpv6AddressesOutput, error) {
	req := state.UnassignIpv6AddressesRequest{
		NetworkInterfaceID: aws.ToString(in.NetworkInterfaceId), IPv6Addresses: in.Ipv6Addresses, IPv6Prefixes: in.Ipv6Prefixes,
	}
	return call(ctx, e, UnassignIpv6Addresses, req, e.state.UnassignIpv6Addresses, func(r *state.UnassignIpv6AddressesResponse) *ec2.UnassignIpv6AddressesOutput {
		return &ec2.UnassignIpv6AddressesOutput{
			NetworkInterfaceId: aws.String(r.NetworkInterfaceID), UnassignedIpv6Addresses: r.UnassignedIPv6Addresses, UnassignedIpv6Prefixes: r.UnassignedIPv6Prefixes,
		}
	})
}

// DescribeAddresses implements ec2.SDK.
func (e *EC2) DescribeAddresses(ctx context.Context, in *ec2.DescribeAddressesInput, _ ...func(*ec2.Options)) (*ec2.DescribeAddressesOutput, error) {
	req := state.DescribeRequest{IDs: in.AllocationIds, Names: in.PublicIps, Filters: filters(in.Filters)}
	return call(ctx, e, DescribeAddresses, req, e.state.DescribeAddresses, func(r *state.DescribeAddressesResponse) *ec2.DescribeAddressesOutput {
		return &ec2.DescribeAddressesOutput{Addresses: each(r.Addresses, addressTo)}
	})
}

// AssociateAddress implements ec2.SDK.
func (e *EC2) AssociateAddress(ctx context.Context, in *ec2.AssociateAddressInput, _ ...func(*ec2.Options)) (*ec2.AssociateAddressOutput, error) {
	req := state.AssociateAddressRequest{
		AllocationID: aws.ToString(in.AllocationId), PublicIP: aws.ToString(in.PublicIp),
		NetworkInterfaceID: aws.ToString(in.NetworkInterfaceId), InstanceID: aws.ToString(in.InstanceId),
		PrivateIPAddress: aws.ToString(in.PrivateIpAddress), AllowReassociation: aws.ToBool(in.AllowReassociation),
	}
	return call(ctx, e, AssociateAddress, req, e.state.AssociateAddress, func(r *state.AssociateAddressResponse) *ec2.AssociateAddressOutput {
		return &ec2.AssociateAddressOutput{AssociationId: aws.String(r.AssociationID)}
	})
}

// DisassociateAddress implements ec2.SDK.
func (e *EC2) DisassociateAddress(ctx context.Context, in *ec2.DisassociateAddressInput, _ ...func(*ec2.Options)) (*ec2.DisassociateAddressOutput, error) {
	publicIP := aws.ToString(in.PublicIp)
	disassociate := func(id string) (*state.ReturnResponse, error) { return e.state.DisassociateAddress(id, publicIP) }
	return call(ctx, e, DisassociateAddress, aws.ToString(in.AssociationId), disassociate, func(*state.ReturnResponse) *ec2.DisassociateAddressOutput {
		return &ec2.DisassociateAddressOutput{}
	})
}

// AllocateAddress implements ec2.SDK.
func (e *EC2) AllocateAddress(ctx context.Context, in *ec2.AllocateAddressInput, _ ...func(*ec2.Options)) (*ec2.AllocateAddressOutput, error) {
	req := state.AllocateAddressRequest{Domain: string(in.Domain), Address: aws.ToString(in.Address), TagSpecifications: tagSpecs(in.TagSpecifications)}
	return call(ctx, e, AllocateAddress, req, e.state.AllocateAddress, func(r *state.AllocateAddressResponse) *ec2.AllocateAddressOutput {
		return &ec2.AllocateAddressOutput{
			AllocationId: aws.String(r.AllocationID), PublicIp: aws.String(r.PublicIP), Domain: types.DomainType(r.Domain),
			PublicIpv4Pool: aws.String(r.PublicIPv4Pool), NetworkBorderGroup: aws.String(r.NetworkBorderGroup),
		}
	})
}

// ReleaseAddress implements ec2.SDK.
func (e *EC2) ReleaseAddress(ctx context.Context, in *ec2.ReleaseAddressInput, _ ...func(*ec2.Options)) (*ec2.ReleaseAddressOutput, error) {
	publicIP := aws.ToString(in.PublicIp)
	release := func(id string) (*state.ReturnResponse, error) { return e.state.ReleaseAddress(id, publicIP) }
	return call(ctx, e, ReleaseAddress, aws.ToString(in.AllocationId), release, func(*state.ReturnResponse) *ec2.ReleaseAddressOutput {
		return &ec2.ReleaseAddressOutput{}
	})
}
