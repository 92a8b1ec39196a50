package cloudfake

import (
	"context"
	"net/netip"

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
