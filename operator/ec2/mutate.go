package ec2

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/operator/cloud"
)

// CreateENI implements cloud.API.
func (c *Client) CreateENI(ctx context.Context, req cloud.CreateENIRequest) (cloud.ENI, error) {
	in := &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(req.SubnetID),
		Groups:      req.SecurityGroups,
		Description: aws.String(req.Description),
		ClientToken: aws.String(req.ClientToken),
	}
	if req.SecondaryIPs > 0 {
		in.SecondaryPrivateIpAddressCount = aws.Int32(int32(req.SecondaryIPs))
	}
	if req.Prefixes > 0 {
		in.Ipv4PrefixCount = aws.Int32(int32(req.Prefixes))
	}
	if req.IPv6Addresses > 0 {
		in.Ipv6AddressCount = aws.Int32(int32(req.IPv6Addresses))
	}
	if req.IPv6Prefixes > 0 {
		in.Ipv6PrefixCount = aws.Int32(int32(req.IPv6Prefixes))
	}
	if len(req.Tags) > 0 {
		spec := types.TagSpecification{ResourceType: types.ResourceTypeNetworkInterface}
		for _, k := range slices.Sorted(maps.Keys(req.Tags)) {
			spec.Tags = append(spec.Tags, types.Tag{Key: aws.String(k), Value: aws.String(req.Tags[k])})
		}
		in.TagSpecifications = []types.TagSpecification{spec}
	}
	var out *ec2.CreateNetworkInterfaceOutput
	err := c.call(ctx, CreateNetworkInterface, func(ctx context.Context) (err error) {
		out, err = c.sdk.CreateNetworkInterface(ctx, in)
		return err
	})
	if err != nil {
		return cloud.ENI{}, err
	}
	return eniFrom(*out.NetworkInterface), nil
}

// AttachENI implements cloud.API.
func (c *Client) AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error) {
	var out *ec2.AttachNetworkInterfaceOutput
	err := c.call(ctx, AttachNetworkInterface, func(ctx context.Context) (err error) {
		out, err = c.sdk.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
			NetworkInterfaceId: aws.String(eniID), InstanceId: aws.String(instanceID),
			DeviceIndex: aws.Int32(int32(deviceIndex)),
			// Card 0, said explicitly: on multi-card types EC2 validates
			// device indexes wrongly when it is left out (Cilium sets it
			// for the same reason: pkg/aws/api AttachNetworkInterface).
			NetworkCardIndex: aws.Int32(0),
		})
		return err
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.AttachmentId), nil
}

// SetDeleteOnTermination implements cloud.API.
func (c *Client) SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string) error {
	return c.call(ctx, ModifyNetworkInterfaceAttribute, func(ctx context.Context) error {
		_, err := c.sdk.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(eniID),
			Attachment: &types.NetworkInterfaceAttachmentChanges{
				AttachmentId: aws.String(attachmentID), DeleteOnTermination: aws.Bool(true),
			},
		})
		return err
	})
}

// DetachENI implements cloud.API.
func (c *Client) DetachENI(ctx context.Context, attachmentID string) error {
	return c.call(ctx, DetachNetworkInterface, func(ctx context.Context) error {
		_, err := c.sdk.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attachmentID)})
		return err
	})
}

// DeleteENI implements cloud.API.
func (c *Client) DeleteENI(ctx context.Context, eniID string) error {
	return c.call(ctx, DeleteNetworkInterface, func(ctx context.Context) error {
		_, err := c.sdk.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eniID)})
		return err
	})
}

// AssignIPs implements cloud.API.
func (c *Client) AssignIPs(ctx context.Context, eniID string, count int) ([]netip.Addr, error) {
	out, err := c.assign(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eniID), SecondaryPrivateIpAddressCount: aws.Int32(int32(count)),
	})
	if err != nil {
		return nil, err
	}
	return parseAddrs(out.AssignedPrivateIpAddresses, func(a types.AssignedPrivateIpAddress) string { return ptr(a.PrivateIpAddress) }, nil), nil
}

// AssignPrefixes implements cloud.API.
func (c *Client) AssignPrefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error) {
	out, err := c.assign(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eniID), Ipv4PrefixCount: aws.Int32(int32(count)),
	})
	if err != nil {
		return nil, err
	}
	return parsePrefixes(out.AssignedIpv4Prefixes, func(p types.Ipv4PrefixSpecification) string { return ptr(p.Ipv4Prefix) }, nil), nil
}

// AssignAddresses implements cloud.API.
func (c *Client) AssignAddresses(ctx context.Context, eniID string, ips []netip.Addr, allowReassignment bool) error {
	in := &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID)}
	for _, ip := range ips {
		in.PrivateIpAddresses = append(in.PrivateIpAddresses, ip.String())
	}
	if allowReassignment {
		in.AllowReassignment = aws.Bool(true)
	}
	_, err := c.assign(ctx, in)
	return err
}

func (c *Client) assign(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput) (*ec2.AssignPrivateIpAddressesOutput, error) {
	var out *ec2.AssignPrivateIpAddressesOutput
	err := c.call(ctx, AssignPrivateIpAddresses, func(ctx context.Context) (err error) {
		out, err = c.sdk.AssignPrivateIpAddresses(ctx, in)
		return err
	})
	return out, err
}

// UnassignIPs implements cloud.API. EC2 refuses the whole call when the
// ENI no longer holds one of the addresses; the ENI is then described and
// only what it still holds is unassigned, so a retry after a crash is
// harmless.
func (c *Client) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	err := c.unassign(ctx, eniID, ips)
	if !errors.Is(err, cloud.ErrInvalid) {
		return err
	}
	enis, derr := c.describeENIs(ctx, nil, filter("network-interface-id", eniID))
	if derr != nil {
		return err
	}
	if len(enis) == 0 {
		return &cloud.Error{Action: "UnassignPrivateIpAddresses", Message: eniID + " not found", Kind: cloud.ErrNotFound}
	}
	held := slices.DeleteFunc(slices.Clone(ips), func(ip netip.Addr) bool { return !enis[0].HasIP(ip) })
	if len(held) == 0 {
		return nil
	}
	if len(held) == len(ips) {
		return err
	}
	return c.unassign(ctx, eniID, held)
}

// UnassignPrefixes implements cloud.API, idempotent like UnassignIPs.
func (c *Client) UnassignPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) error {
	err := c.unassign(ctx, eniID, nil, prefixes...)
	if !errors.Is(err, cloud.ErrInvalid) {
		return err
	}
	enis, derr := c.describeENIs(ctx, nil, filter("network-interface-id", eniID))
	if derr != nil {
		return err
	}
	if len(enis) == 0 {
		return &cloud.Error{Action: "UnassignPrivateIpAddresses", Message: eniID + " not found", Kind: cloud.ErrNotFound}
	}
	held := slices.DeleteFunc(slices.Clone(prefixes), func(p netip.Prefix) bool { return !slices.Contains(enis[0].Prefixes, p) })
	if len(held) == 0 {
		return nil
	}
	if len(held) == len(prefixes) {
		return err
	}
	return c.unassign(ctx, eniID, nil, held...)
}

func (c *Client) unassign(ctx context.Context, eniID string, ips []netip.Addr, prefixes ...netip.Prefix) error {
	in := &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID)}
	for _, ip := range ips {
		in.PrivateIpAddresses = append(in.PrivateIpAddresses, ip.String())
	}
	for _, p := range prefixes {
		in.Ipv4Prefixes = append(in.Ipv4Prefixes, p.String())
	}
	return c.call(ctx, UnassignPrivateIpAddresses, func(ctx context.Context) error {
		_, err := c.sdk.UnassignPrivateIpAddresses(ctx, in)
		return err
	})
}
