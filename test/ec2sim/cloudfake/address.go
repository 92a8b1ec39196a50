package cloudfake

import (
	"context"
	"maps"
	"net/netip"
	"slices"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim"
)

// ListAddresses implements cloud.API.
func (c *Cloud) ListAddresses(ctx context.Context) ([]cloud.Address, error) {
	out, err := call(ctx, c, DescribeAddresses, func() (*ec2sim.DescribeAddressesResponse, error) {
		return c.state.DescribeAddresses(ec2sim.DescribeRequest{Filters: []ec2sim.Filter{filter("domain", "vpc")}})
	})
	if err != nil {
		return nil, err
	}
	addrs := make([]cloud.Address, 0, len(out.Addresses))
	for _, a := range out.Addresses {
		addrs = append(addrs, addressFrom(a))
	}
	return addrs, nil
}

func addressFrom(a ec2sim.Address) cloud.Address {
	out := cloud.Address{
		AllocationID: a.AllocationID, AssociationID: a.AssociationID, ENIID: a.NetworkInterfaceID,
		InstanceID: a.InstanceID, Tags: tagsFrom(a.Tags),
	}
	out.PublicIP, _ = netip.ParseAddr(a.PublicIP)
	out.PrivateIP, _ = netip.ParseAddr(a.PrivateIPAddress)
	return out
}

// AssociateAddress implements cloud.API.
func (c *Cloud) AssociateAddress(ctx context.Context, allocationID, eniID string, privateIP netip.Addr, reassociate bool) (string, error) {
	req := ec2sim.AssociateAddressRequest{AllocationID: allocationID, NetworkInterfaceID: eniID, AllowReassociation: reassociate}
	if privateIP.IsValid() {
		req.PrivateIPAddress = privateIP.String()
	}
	out, err := call(ctx, c, AssociateAddress, func() (*ec2sim.AssociateAddressResponse, error) {
		return c.state.AssociateAddress(req)
	})
	if err != nil {
		return "", err
	}
	return out.AssociationID, nil
}

// DisassociateAddress implements cloud.API.
func (c *Cloud) DisassociateAddress(ctx context.Context, associationID string) error {
	_, err := call(ctx, c, DisassociateAddress, func() (*ec2sim.ReturnResponse, error) {
		return c.state.DisassociateAddress(associationID, "")
	})
	return err
}

// AllocateAddress implements cloud.API, tagged at creation as the adapter
// asks.
func (c *Cloud) AllocateAddress(ctx context.Context, tags map[string]string) (cloud.Address, error) {
	req := ec2sim.AllocateAddressRequest{Domain: "vpc"}
	if len(tags) > 0 {
		spec := ec2sim.TagSpecification{ResourceType: "elastic-ip"}
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			spec.Tags = append(spec.Tags, ec2sim.Tag{Key: k, Value: tags[k]})
		}
		req.TagSpecifications = []ec2sim.TagSpecification{spec}
	}
	out, err := call(ctx, c, AllocateAddress, func() (*ec2sim.AllocateAddressResponse, error) {
		return c.state.AllocateAddress(req)
	})
	if err != nil {
		return cloud.Address{}, err
	}
	addr := cloud.Address{AllocationID: out.AllocationID, Tags: maps.Clone(tags)}
	addr.PublicIP, _ = netip.ParseAddr(out.PublicIP)
	return addr, nil
}

// ReleaseAddress implements cloud.API.
func (c *Cloud) ReleaseAddress(ctx context.Context, allocationID string) error {
	_, err := call(ctx, c, ReleaseAddress, func() (*ec2sim.ReturnResponse, error) {
		return c.state.ReleaseAddress(allocationID, "")
	})
	return err
}
