package cloudfake

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim"
)

// CreateENI implements cloud.API.
func (c *Cloud) CreateENI(ctx context.Context, req cloud.CreateENIRequest) (cloud.ENI, error) {
	in := ec2sim.CreateNetworkInterfaceRequest{
		SubnetID: req.SubnetID, SecurityGroupIDs: req.SecurityGroups, Description: req.Description, ClientToken: req.ClientToken,
		// The adapter sends counts only when positive.
		SecondaryPrivateIPAddressCount: max(req.SecondaryIPs, 0), IPv4PrefixCount: max(req.Prefixes, 0),
	}
	if len(req.Tags) > 0 {
		spec := ec2sim.TagSpecification{ResourceType: "network-interface"}
		for _, k := range slices.Sorted(maps.Keys(req.Tags)) {
			spec.Tags = append(spec.Tags, ec2sim.Tag{Key: k, Value: req.Tags[k]})
		}
		in.TagSpecifications = []ec2sim.TagSpecification{spec}
	}
	out, err := call(ctx, c, CreateNetworkInterface, func() (*ec2sim.CreateNetworkInterfaceResponse, error) {
		return c.state.CreateNetworkInterface(in)
	})
	if err != nil {
		return cloud.ENI{}, err
	}
	return eniFrom(out.NetworkInterface), nil
}

// AttachENI implements cloud.API on network card 0, as the adapter asks.
func (c *Cloud) AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error) {
	out, err := call(ctx, c, AttachNetworkInterface, func() (*ec2sim.AttachNetworkInterfaceResponse, error) {
		return c.state.AttachNetworkInterface(ec2sim.AttachNetworkInterfaceRequest{NetworkInterfaceID: eniID, InstanceID: instanceID, DeviceIndex: deviceIndex})
	})
	if err != nil {
		return "", err
	}
	return out.AttachmentID, nil
}

// SetDeleteOnTermination implements cloud.API.
func (c *Cloud) SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string) error {
	yes := true
	_, err := call(ctx, c, ModifyNetworkInterfaceAttribute, func() (*ec2sim.ReturnResponse, error) {
		return c.state.ModifyNetworkInterfaceAttribute(ec2sim.ModifyNetworkInterfaceAttributeRequest{
			NetworkInterfaceID: eniID, AttachmentID: attachmentID, DeleteOnTermination: &yes,
		})
	})
	return err
}

// DetachENI implements cloud.API.
func (c *Cloud) DetachENI(ctx context.Context, attachmentID string) error {
	_, err := call(ctx, c, DetachNetworkInterface, func() (*ec2sim.ReturnResponse, error) {
		return c.state.DetachNetworkInterface(attachmentID, false)
	})
	return err
}

// DeleteENI implements cloud.API.
func (c *Cloud) DeleteENI(ctx context.Context, eniID string) error {
	_, err := call(ctx, c, DeleteNetworkInterface, func() (*ec2sim.ReturnResponse, error) {
		return c.state.DeleteNetworkInterface(eniID)
	})
	return err
}

// AssignIPs implements cloud.API.
func (c *Cloud) AssignIPs(ctx context.Context, eniID string, count int) ([]netip.Addr, error) {
	out, err := c.assign(ctx, ec2sim.AssignPrivateIpAddressesRequest{NetworkInterfaceID: eniID, SecondaryPrivateIPAddressCount: count})
	if err != nil {
		return nil, err
	}
	ips := make([]netip.Addr, 0, len(out.AssignedPrivateIPs))
	for _, a := range out.AssignedPrivateIPs {
		if ip, err := netip.ParseAddr(a.PrivateIPAddress); err == nil {
			ips = append(ips, ip)
		}
	}
	return ips, nil
}

// AssignPrefixes implements cloud.API.
func (c *Cloud) AssignPrefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error) {
	out, err := c.assign(ctx, ec2sim.AssignPrivateIpAddressesRequest{NetworkInterfaceID: eniID, IPv4PrefixCount: count})
	if err != nil {
		return nil, err
	}
	prefixes := make([]netip.Prefix, 0, len(out.AssignedIPv4Prefixes))
	for _, p := range out.AssignedIPv4Prefixes {
		if pfx, err := netip.ParsePrefix(p.IPv4Prefix); err == nil {
			prefixes = append(prefixes, pfx)
		}
	}
	return prefixes, nil
}

// AssignAddresses implements cloud.API.
func (c *Cloud) AssignAddresses(ctx context.Context, eniID string, ips []netip.Addr, allowReassignment bool) error {
	req := ec2sim.AssignPrivateIpAddressesRequest{NetworkInterfaceID: eniID, AllowReassignment: allowReassignment}
	for _, ip := range ips {
		req.PrivateIPAddresses = append(req.PrivateIPAddresses, ip.String())
	}
	_, err := c.assign(ctx, req)
	return err
}

func (c *Cloud) assign(ctx context.Context, req ec2sim.AssignPrivateIpAddressesRequest) (*ec2sim.AssignPrivateIpAddressesResponse, error) {
	return call(ctx, c, AssignPrivateIpAddresses, func() (*ec2sim.AssignPrivateIpAddressesResponse, error) {
		return c.state.AssignPrivateIpAddresses(req)
	})
}

// UnassignIPs implements cloud.API as the adapter does: when EC2 refuses
// the call because the ENI no longer holds some of the addresses, the ENI
// is described and only what it still holds is unassigned.
func (c *Cloud) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	return c.unassignHeld(ctx, eniID, ips, nil)
}

// UnassignPrefixes implements cloud.API, idempotent like UnassignIPs.
func (c *Cloud) UnassignPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) error {
	return c.unassignHeld(ctx, eniID, nil, prefixes)
}

// unassignHeld unassigns ips or prefixes (one of them is empty), retrying
// with what the ENI still holds when EC2 refuses the whole call.
func (c *Cloud) unassignHeld(ctx context.Context, eniID string, ips []netip.Addr, prefixes []netip.Prefix) error {
	err := c.unassign(ctx, eniID, ips, prefixes)
	if !errors.Is(err, cloud.ErrInvalid) {
		return err
	}
	enis, derr := c.describeENIs(ctx, filter("network-interface-id", eniID))
	if derr != nil {
		return err
	}
	if len(enis) == 0 {
		return &cloud.Error{Action: string(UnassignPrivateIpAddresses), Message: eniID + " not found", Kind: cloud.ErrNotFound}
	}
	heldIPs := slices.DeleteFunc(slices.Clone(ips), func(ip netip.Addr) bool { return !enis[0].HasIP(ip) })
	heldPrefixes := slices.DeleteFunc(slices.Clone(prefixes), func(p netip.Prefix) bool { return !slices.Contains(enis[0].Prefixes, p) })
	switch held := len(heldIPs) + len(heldPrefixes); held {
	case 0:
		return nil
	case len(ips) + len(prefixes):
		return err
	}
	return c.unassign(ctx, eniID, heldIPs, heldPrefixes)
}

func (c *Cloud) unassign(ctx context.Context, eniID string, ips []netip.Addr, prefixes []netip.Prefix) error {
	req := ec2sim.UnassignPrivateIpAddressesRequest{NetworkInterfaceID: eniID}
	for _, ip := range ips {
		req.PrivateIPAddresses = append(req.PrivateIPAddresses, ip.String())
	}
	for _, p := range prefixes {
		req.IPv4Prefixes = append(req.IPv4Prefixes, p.String())
	}
	_, err := call(ctx, c, UnassignPrivateIpAddresses, func() (*ec2sim.ReturnResponse, error) {
		return c.state.UnassignPrivateIpAddresses(req)
	})
	return err
}
