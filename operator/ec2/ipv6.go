package ec2

import (
	"context"
	"errors"
	"net/netip"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/enipam/enipam/operator/cloud"
)

// AssignIPv6Prefixes implements cloud.API.
func (c *Client) AssignIPv6Prefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error) {
	out, err := c.assignIPv6(ctx, &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(eniID), Ipv6PrefixCount: aws.Int32(int32(count)),
	})
	if err != nil {
		return nil, err
	}
	return parsePrefixes(out.AssignedIpv6Prefixes, plain, prefix6), nil
}

// AssignIPv6s implements cloud.API.
func (c *Client) AssignIPv6s(ctx context.Context, eniID string, count int) ([]netip.Addr, error) {
	out, err := c.assignIPv6(ctx, &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(eniID), Ipv6AddressCount: aws.Int32(int32(count)),
	})
	if err != nil {
		return nil, err
	}
	return parseAddrs(out.AssignedIpv6Addresses, plain, is6), nil
}

func (c *Client) assignIPv6(ctx context.Context, in *ec2.AssignIpv6AddressesInput) (*ec2.AssignIpv6AddressesOutput, error) {
	var out *ec2.AssignIpv6AddressesOutput
	err := c.call(ctx, AssignIpv6Addresses, func(ctx context.Context) (err error) {
		out, err = c.sdk.AssignIpv6Addresses(ctx, in)
		return err
	})
	return out, err
}

// UnassignIPv6Prefixes implements cloud.API, idempotent as
// UnassignPrefixes: when EC2 refuses the call because the ENI no longer
// holds one of the prefixes, the ENI is described and only what it still
// holds is unassigned.
func (c *Client) UnassignIPv6Prefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) error {
	return c.unassignIPv6Held(ctx, eniID, nil, prefixes)
}

// UnassignIPv6s implements cloud.API, idempotent as UnassignIPs.
func (c *Client) UnassignIPv6s(ctx context.Context, eniID string, ips []netip.Addr) error {
	return c.unassignIPv6Held(ctx, eniID, ips, nil)
}

func (c *Client) unassignIPv6Held(ctx context.Context, eniID string, ips []netip.Addr, prefixes []netip.Prefix) error {
	err := c.unassignIPv6(ctx, eniID, ips, prefixes)
	if !errors.Is(err, cloud.ErrInvalid) {
		return err
	}
	enis, derr := c.describeENIs(ctx, nil, filter("network-interface-id", eniID))
	if derr != nil {
		return err
	}
	if len(enis) == 0 {
		return &cloud.Error{Action: string(UnassignIpv6Addresses), Message: eniID + " not found", Kind: cloud.ErrNotFound}
	}
	heldIPs := slices.DeleteFunc(slices.Clone(ips), func(ip netip.Addr) bool { return !slices.Contains(enis[0].IPv6s, ip) })
	heldPrefixes := slices.DeleteFunc(slices.Clone(prefixes), func(p netip.Prefix) bool { return !slices.Contains(enis[0].IPv6Prefixes, p) })
	switch {
	case len(heldIPs)+len(heldPrefixes) == 0:
		return nil
	case len(heldIPs) == len(ips) && len(heldPrefixes) == len(prefixes):
		return err // refused for another reason
	}
	return c.unassignIPv6(ctx, eniID, heldIPs, heldPrefixes)
}

func (c *Client) unassignIPv6(ctx context.Context, eniID string, ips []netip.Addr, prefixes []netip.Prefix) error {
	in := &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String(eniID)}
	for _, ip := range ips {
		in.Ipv6Addresses = append(in.Ipv6Addresses, ip.String())
	}
	for _, p := range prefixes {
		in.Ipv6Prefixes = append(in.Ipv6Prefixes, p.String())
	}
	return c.call(ctx, UnassignIpv6Addresses, func(ctx context.Context) error {
		_, err := c.sdk.UnassignIpv6Addresses(ctx, in)
		return err
	})
}
