package ec2

import (
	"context"
	"maps"
	"net/netip"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/operator/cloud"
)

// ListAddresses implements cloud.API.
func (c *Client) ListAddresses(ctx context.Context) ([]cloud.Address, error) {
	var out *ec2.DescribeAddressesOutput
	err := c.call(ctx, DescribeAddresses, func(ctx context.Context) (err error) {
		out, err = c.sdk.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{
			Filters: []types.Filter{filter("domain", "vpc")},
		})
		return err
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

func addressFrom(a types.Address) cloud.Address {
	out := cloud.Address{
		AllocationID: aws.ToString(a.AllocationId), AssociationID: aws.ToString(a.AssociationId),
		ENIID: aws.ToString(a.NetworkInterfaceId), InstanceID: aws.ToString(a.InstanceId), Tags: tagsFrom(a.Tags),
	}
	out.PublicIP, _ = netip.ParseAddr(aws.ToString(a.PublicIp))
	out.PrivateIP, _ = netip.ParseAddr(aws.ToString(a.PrivateIpAddress))
	return out
}

// AssociateAddress implements cloud.API.
func (c *Client) AssociateAddress(ctx context.Context, allocationID, eniID string, privateIP netip.Addr, reassociate bool) (string, error) {
	in := &ec2.AssociateAddressInput{
		AllocationId: aws.String(allocationID), NetworkInterfaceId: aws.String(eniID),
		AllowReassociation: aws.Bool(reassociate),
	}
	if privateIP.IsValid() {
		in.PrivateIpAddress = aws.String(privateIP.String())
	}
	var out *ec2.AssociateAddressOutput
	err := c.call(ctx, AssociateAddress, func(ctx context.Context) (err error) {
		out, err = c.sdk.AssociateAddress(ctx, in)
		return err
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.AssociationId), nil
}

// DisassociateAddress implements cloud.API.
func (c *Client) DisassociateAddress(ctx context.Context, associationID string) error {
	return c.call(ctx, DisassociateAddress, func(ctx context.Context) error {
		_, err := c.sdk.DisassociateAddress(ctx, &ec2.DisassociateAddressInput{AssociationId: aws.String(associationID)})
		return err
	})
}

// AllocateAddress implements cloud.API: a VPC Elastic IP from Amazon's
// pool, tagged at creation (EC2 checks ec2:CreateTags with
// ec2:CreateAction=AllocateAddress for that).
func (c *Client) AllocateAddress(ctx context.Context, tags map[string]string) (cloud.Address, error) {
	in := &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc}
	if len(tags) > 0 {
		spec := types.TagSpecification{ResourceType: types.ResourceTypeElasticIp}
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			spec.Tags = append(spec.Tags, types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
		}
		in.TagSpecifications = []types.TagSpecification{spec}
	}
	var out *ec2.AllocateAddressOutput
	err := c.call(ctx, AllocateAddress, func(ctx context.Context) (err error) {
		out, err = c.sdk.AllocateAddress(ctx, in)
		return err
	})
	if err != nil {
		return cloud.Address{}, err
	}
	addr := cloud.Address{AllocationID: aws.ToString(out.AllocationId), Tags: maps.Clone(tags)}
	addr.PublicIP, _ = netip.ParseAddr(aws.ToString(out.PublicIp))
	return addr, nil
}

// ReleaseAddress implements cloud.API.
func (c *Client) ReleaseAddress(ctx context.Context, allocationID string) error {
	return c.call(ctx, ReleaseAddress, func(ctx context.Context) error {
		_, err := c.sdk.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String(allocationID)})
		return err
	})
}
