package ec2

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// sdkOp is one operation of an *ec2.Client as a method value.
type sdkOp[In, Out any] func(context.Context, *In, ...func(*ec2.Options)) (*Out, error)

// sdkMethods is SDK over an *ec2.Client that never converts the client to
// an interface, so the linker keeps only the operations named here. Once
// any linked package calls reflect's Method (Cilium's API types link
// text/template and go-cmp), the linker keeps every exported method of
// every type converted to an interface: an *ec2.Client held in SDK links
// all of EC2's operations with their serializers, 19 MB of the
// operator's 48 MB of code, and the pages the process maps grow with it.
// Method values capture the client without its type reaching an
// interface.
type sdkMethods struct {
	describeVpcs                    sdkOp[ec2.DescribeVpcsInput, ec2.DescribeVpcsOutput]
	describeSubnets                 sdkOp[ec2.DescribeSubnetsInput, ec2.DescribeSubnetsOutput]
	describeSecurityGroups          sdkOp[ec2.DescribeSecurityGroupsInput, ec2.DescribeSecurityGroupsOutput]
	describeInstances               sdkOp[ec2.DescribeInstancesInput, ec2.DescribeInstancesOutput]
	describeNetworkInterfaces       sdkOp[ec2.DescribeNetworkInterfacesInput, ec2.DescribeNetworkInterfacesOutput]
	describeInstanceTypes           sdkOp[ec2.DescribeInstanceTypesInput, ec2.DescribeInstanceTypesOutput]
	createNetworkInterface          sdkOp[ec2.CreateNetworkInterfaceInput, ec2.CreateNetworkInterfaceOutput]
	attachNetworkInterface          sdkOp[ec2.AttachNetworkInterfaceInput, ec2.AttachNetworkInterfaceOutput]
	modifyNetworkInterfaceAttribute sdkOp[ec2.ModifyNetworkInterfaceAttributeInput, ec2.ModifyNetworkInterfaceAttributeOutput]
	deleteNetworkInterface          sdkOp[ec2.DeleteNetworkInterfaceInput, ec2.DeleteNetworkInterfaceOutput]
	detachNetworkInterface          sdkOp[ec2.DetachNetworkInterfaceInput, ec2.DetachNetworkInterfaceOutput]
	assignPrivateIpAddresses        sdkOp[ec2.AssignPrivateIpAddressesInput, ec2.AssignPrivateIpAddressesOutput]
	unassignPrivateIpAddresses      sdkOp[ec2.UnassignPrivateIpAddressesInput, ec2.UnassignPrivateIpAddressesOutput]
	assignIpv6Addresses             sdkOp[ec2.AssignIpv6AddressesInput, ec2.AssignIpv6AddressesOutput]
	unassignIpv6Addresses           sdkOp[ec2.UnassignIpv6AddressesInput, ec2.UnassignIpv6AddressesOutput]
	describeAddresses               sdkOp[ec2.DescribeAddressesInput, ec2.DescribeAddressesOutput]
	associateAddress                sdkOp[ec2.AssociateAddressInput, ec2.AssociateAddressOutput]
	disassociateAddress             sdkOp[ec2.DisassociateAddressInput, ec2.DisassociateAddressOutput]
	allocateAddress                 sdkOp[ec2.AllocateAddressInput, ec2.AllocateAddressOutput]
	releaseAddress                  sdkOp[ec2.ReleaseAddressInput, ec2.ReleaseAddressOutput]
}

// newSDKMethods returns c's operations of SDK.
func newSDKMethods(c *ec2.Client) sdkMethods {
	return sdkMethods{
		describeVpcs:                    c.DescribeVpcs,
		describeSubnets:                 c.DescribeSubnets,
		describeSecurityGroups:          c.DescribeSecurityGroups,
		describeInstances:               c.DescribeInstances,
		describeNetworkInterfaces:       c.DescribeNetworkInterfaces,
		describeInstanceTypes:           c.DescribeInstanceTypes,
		createNetworkInterface:          c.CreateNetworkInterface,
		attachNetworkInterface:          c.AttachNetworkInterface,
		modifyNetworkInterfaceAttribute: c.ModifyNetworkInterfaceAttribute,
		deleteNetworkInterface:          c.DeleteNetworkInterface,
		detachNetworkInterface:          c.DetachNetworkInterface,
		assignPrivateIpAddresses:        c.AssignPrivateIpAddresses,
		unassignPrivateIpAddresses:      c.UnassignPrivateIpAddresses,
		assignIpv6Addresses:             c.AssignIpv6Addresses,
		unassignIpv6Addresses:           c.UnassignIpv6Addresses,
		describeAddresses:               c.DescribeAddresses,
		associateAddress:                c.AssociateAddress,
		disassociateAddress:             c.DisassociateAddress,
		allocateAddress:                 c.AllocateAddress,
		releaseAddress:                  c.ReleaseAddress,
	}
}

// DescribeVpcs calls the client's DescribeVpcs.
func (m sdkMethods) DescribeVpcs(ctx context.Context, in *ec2.DescribeVpcsInput, opts ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error) {
	return m.describeVpcs(ctx, in, opts...)
}

// DescribeSubnets calls the client's DescribeSubnets.
func (m sdkMethods) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	return m.describeSubnets(ctx, in, opts...)
}

// DescribeSecurityGroups calls the client's DescribeSecurityGroups.
func (m sdkMethods) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	return m.describeSecurityGroups(ctx, in, opts...)
}

// DescribeInstances calls the client's DescribeInstances.
func (m sdkMethods) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return m.describeInstances(ctx, in, opts...)
}

// DescribeNetworkInterfaces calls the client's DescribeNetworkInterfaces.
func (m sdkMethods) DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, opts ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	return m.describeNetworkInterfaces(ctx, in, opts...)
}

// DescribeInstanceTypes calls the client's DescribeInstanceTypes.
func (m sdkMethods) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return m.describeInstanceTypes(ctx, in, opts...)
}

// CreateNetworkInterface calls the client's CreateNetworkInterface.
func (m sdkMethods) CreateNetworkInterface(ctx context.Context, in *ec2.CreateNetworkInterfaceInput, opts ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error) {
	return m.createNetworkInterface(ctx, in, opts...)
}

// AttachNetworkInterface calls the client's AttachNetworkInterface.
func (m sdkMethods) AttachNetworkInterface(ctx context.Context, in *ec2.AttachNetworkInterfaceInput, opts ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error) {
	return m.attachNetworkInterface(ctx, in, opts...)
}

// ModifyNetworkInterfaceAttribute calls the client's ModifyNetworkInterfaceAttribute.
func (m sdkMethods) ModifyNetworkInterfaceAttribute(ctx context.Context, in *ec2.ModifyNetworkInterfaceAttributeInput, opts ...func(*ec2.Options)) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
	return m.modifyNetworkInterfaceAttribute(ctx, in, opts...)
}

// DeleteNetworkInterface calls the client's DeleteNetworkInterface.
func (m sdkMethods) DeleteNetworkInterface(ctx context.Context, in *ec2.DeleteNetworkInterfaceInput, opts ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error) {
	return m.deleteNetworkInterface(ctx, in, opts...)
}

// DetachNetworkInterface calls the client's DetachNetworkInterface.
func (m sdkMethods) DetachNetworkInterface(ctx context.Context, in *ec2.DetachNetworkInterfaceInput, opts ...func(*ec2.Options)) (*ec2.DetachNetworkInterfaceOutput, error) {
	return m.detachNetworkInterface(ctx, in, opts...)
}

// AssignPrivateIpAddresses calls the client's AssignPrivateIpAddresses.
func (m sdkMethods) AssignPrivateIpAddresses(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput, opts ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	return m.assignPrivateIpAddresses(ctx, in, opts...)
}

// UnassignPrivateIpAddresses calls the client's UnassignPrivateIpAddresses.
func (m sdkMethods) UnassignPrivateIpAddresses(ctx context.Context, in *ec2.UnassignPrivateIpAddressesInput, opts ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error) {
	return m.unassignPrivateIpAddresses(ctx, in, opts...)
}

// AssignIpv6Addresses calls the client's AssignIpv6Addresses.
func (m sdkMethods) AssignIpv6Addresses(ctx context.Context, in *ec2.AssignIpv6AddressesInput, opts ...func(*ec2.Options)) (*ec2.AssignIpv6AddressesOutput, error) {
	return m.assignIpv6Addresses(ctx, in, opts...)
}

// UnassignIpv6Addresses calls the client's UnassignIpv6Addresses.
func (m sdkMethods) UnassignIpv6Addresses(ctx context.Context, in *ec2.UnassignIpv6AddressesInput, opts ...func(*ec2.Options)) (*ec2.UnassignIpv6AddressesOutput, error) {
	return m.unassignIpv6Addresses(ctx, in, opts...)
}

// DescribeAddresses calls the client's DescribeAddresses.
func (m sdkMethods) DescribeAddresses(ctx context.Context, in *ec2.DescribeAddressesInput, opts ...func(*ec2.Options)) (*ec2.DescribeAddressesOutput, error) {
	return m.describeAddresses(ctx, in, opts...)
}

// AssociateAddress calls the client's AssociateAddress.
func (m sdkMethods) AssociateAddress(ctx context.Context, in *ec2.AssociateAddressInput, opts ...func(*ec2.Options)) (*ec2.AssociateAddressOutput, error) {
	return m.associateAddress(ctx, in, opts...)
}

// DisassociateAddress calls the client's DisassociateAddress.
func (m sdkMethods) DisassociateAddress(ctx context.Context, in *ec2.DisassociateAddressInput, opts ...func(*ec2.Options)) (*ec2.DisassociateAddressOutput, error) {
	return m.disassociateAddress(ctx, in, opts...)
}

// AllocateAddress calls the client's AllocateAddress.
func (m sdkMethods) AllocateAddress(ctx context.Context, in *ec2.AllocateAddressInput, opts ...func(*ec2.Options)) (*ec2.AllocateAddressOutput, error) {
	return m.allocateAddress(ctx, in, opts...)
}

// ReleaseAddress calls the client's ReleaseAddress.
func (m sdkMethods) ReleaseAddress(ctx context.Context, in *ec2.ReleaseAddressInput, opts ...func(*ec2.Options)) (*ec2.ReleaseAddressOutput, error) {
	return m.releaseAddress(ctx, in, opts...)
}

var _ SDK = sdkMethods{}
