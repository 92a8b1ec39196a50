package ec2

import (
	"context"
	"net/netip"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/operator/cloud"
)

// pageSize is the MaxResults of paginated describes.
const pageSize = 1000

func filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

// DescribeVPC implements cloud.API.
func (c *Client) DescribeVPC(ctx context.Context, vpcID string) (cloud.VPC, error) {
	var out *ec2.DescribeVpcsOutput
	err := c.call(ctx, DescribeVpcs, func(ctx context.Context) (err error) {
		out, err = c.sdk.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{filter("vpc-id", vpcID)}})
		return err
	})
	if err != nil {
		return cloud.VPC{}, err
	}
	if len(out.Vpcs) == 0 {
		return cloud.VPC{}, &cloud.Error{Action: "DescribeVpcs", Message: "VPC " + vpcID + " not found", Kind: cloud.ErrNotFound}
	}
	v := out.Vpcs[0]
	vpc := cloud.VPC{ID: aws.ToString(v.VpcId)}
	if p, err := netip.ParsePrefix(aws.ToString(v.CidrBlock)); err == nil {
		vpc.CIDRs = append(vpc.CIDRs, p)
	}
	for _, a := range v.CidrBlockAssociationSet {
		if p, err := netip.ParsePrefix(aws.ToString(a.CidrBlock)); err == nil && !slices.Contains(vpc.CIDRs, p) {
			vpc.CIDRs = append(vpc.CIDRs, p)
		}
	}
	vpc.IPv6CIDRs = ipv6CIDRs(v.Ipv6CidrBlockAssociationSet, func(a types.VpcIpv6CidrBlockAssociation) (*string, string) {
		if a.Ipv6CidrBlockState == nil {
			return a.Ipv6CidrBlock, ""
		}
		return a.Ipv6CidrBlock, string(a.Ipv6CidrBlockState.State)
	})
	return vpc, nil
}

// ListSubnets implements cloud.API.
func (c *Client) ListSubnets(ctx context.Context, vpcID string) ([]cloud.Subnet, error) {
	var subnets []cloud.Subnet
	p := ec2.NewDescribeSubnetsPaginator(c.sdk, &ec2.DescribeSubnetsInput{
		Filters: []types.Filter{filter("vpc-id", vpcID)}, MaxResults: aws.Int32(pageSize),
	})
	for p.HasMorePages() {
		var page *ec2.DescribeSubnetsOutput
		if err := c.call(ctx, DescribeSubnets, func(ctx context.Context) (err error) {
			page, err = p.NextPage(ctx)
			return err
		}); err != nil {
			return nil, err
		}
		for _, s := range page.Subnets {
			subnets = append(subnets, subnetFrom(s))
		}
	}
	return subnets, nil
}

// ListSecurityGroups implements cloud.API.
func (c *Client) ListSecurityGroups(ctx context.Context, vpcID string) ([]cloud.SecurityGroup, error) {
	var groups []cloud.SecurityGroup
	p := ec2.NewDescribeSecurityGroupsPaginator(c.sdk, &ec2.DescribeSecurityGroupsInput{
		Filters: []types.Filter{filter("vpc-id", vpcID)}, MaxResults: aws.Int32(pageSize),
	})
	for p.HasMorePages() {
		var page *ec2.DescribeSecurityGroupsOutput
		if err := c.call(ctx, DescribeSecurityGroups, func(ctx context.Context) (err error) {
			page, err = p.NextPage(ctx)
			return err
		}); err != nil {
			return nil, err
		}
		for _, g := range page.SecurityGroups {
			groups = append(groups, cloud.SecurityGroup{
				ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), VPCID: aws.ToString(g.VpcId), Tags: tagsFrom(g.Tags),
			})
		}
	}
	return groups, nil
}

// ListInstances implements cloud.API.
func (c *Client) ListInstances(ctx context.Context, vpcID string, known func(string) (cloud.Instance, bool)) ([]cloud.Instance, error) {
	instances, _, err := c.describeInstances(ctx, known, filter("vpc-id", vpcID))
	return instances, err
}

// GetInstances implements cloud.API: one filtered DescribeInstances and
// two filtered DescribeNetworkInterfaces for the whole batch: the ENIs
// attached to the instances, and the unattached ones the operator created
// for them (tagged with the instance), so an ENI whose attach never
// happened is found and adopted rather than made again.
func (c *Client) GetInstances(ctx context.Context, ids []string) ([]cloud.Instance, []cloud.ENI, error) {
	instances, _, err := c.describeInstances(ctx, nil, filter("instance-id", ids...))
	if err != nil || len(instances) == 0 {
		return instances, nil, err
	}
	live := make([]string, 0, len(instances))
	for _, in := range instances {
		live = append(live, in.ID)
	}
	enis, err := c.describeENIs(ctx, nil, filter("attachment.instance-id", live...))
	if err != nil {
		return instances, nil, err
	}
	orphans, err := c.describeENIs(ctx, nil, filter("tag:"+cloud.TagInstance, live...), filter("status", cloud.ENIAvailable))
	return instances, append(enis, orphans...), err
}

// describeInstances describes the pending and running instances f
// selects; an instance known returns Equal to what EC2 shows is kept as
// known's, the converted one (its tags) left to the collector at once, as
// describeENIs does: a VPC's describe otherwise holds a copy of every
// instance's tags through the ENIs' pages that follow, until the
// inventory installs it and drops the copy.
func (c *Client) describeInstances(ctx context.Context, known func(string) (cloud.Instance, bool), f types.Filter) ([]cloud.Instance, int, error) {
	var instances []cloud.Instance
	pages := 0
	p := ec2.NewDescribeInstancesPaginator(c.sdk, &ec2.DescribeInstancesInput{
		Filters:    []types.Filter{f, filter("instance-state-name", "pending", "running")},
		MaxResults: aws.Int32(pageSize),
	})
	for p.HasMorePages() {
		var page *ec2.DescribeInstancesOutput
		if err := c.call(ctx, DescribeInstances, func(ctx context.Context) (err error) {
			page, err = p.NextPage(ctx)
			return err
		}); err != nil {
			return nil, pages, err
		}
		pages++
		for _, r := range page.Reservations {
			for _, x := range r.Instances {
				in := instanceFrom(x)
				if known != nil {
					// A view kept without tags (the inventory's) is
					// known's when all else is equal.
					if k, ok := known(in.ID); ok {
						if u := in.Untagged(); k.Equal(&in) || k.Tags == nil && k.Equal(&u) {
							in = k
						}
					}
				}
				instances = append(instances, in)
			}
		}
	}
	return instances, pages, nil
}

// ListENIs implements cloud.API.
func (c *Client) ListENIs(ctx context.Context, vpcID string, known func(string) (cloud.ENI, bool)) ([]cloud.ENI, error) {
	return c.describeENIs(ctx, known, filter("vpc-id", vpcID))
}

// describeENIs describes the ENIs filters select; an ENI known returns
// Equal to what EC2 shows is kept as known's, the converted one left to
// the collector at once (a VPC's describe of thousands of ENIs otherwise
// holds a copy of each until the inventory installs it).
func (c *Client) describeENIs(ctx context.Context, known func(string) (cloud.ENI, bool), filters ...types.Filter) ([]cloud.ENI, error) {
	var enis []cloud.ENI
	p := ec2.NewDescribeNetworkInterfacesPaginator(c.sdk, &ec2.DescribeNetworkInterfacesInput{
		Filters: filters, MaxResults: aws.Int32(pageSize),
	})
	for p.HasMorePages() {
		var page *ec2.DescribeNetworkInterfacesOutput
		if err := c.call(ctx, DescribeNetworkInterfaces, func(ctx context.Context) (err error) {
			page, err = p.NextPage(ctx)
			return err
		}); err != nil {
			return nil, err
		}
		for _, e := range page.NetworkInterfaces {
			eni := eniFrom(e)
			if known != nil {
				if k, ok := known(eni.ID); ok && k.Equal(&eni) {
					eni = k
				}
			}
			enis = append(enis, eni)
		}
	}
	return enis, nil
}

// GetENIs implements cloud.API with a filter on the IDs, not
// NetworkInterfaceId.N: EC2 fails a whole describe by ID when one of them
// does not exist, and an ENI EC2 does not show yet is no error here.
func (c *Client) GetENIs(ctx context.Context, ids []string) ([]cloud.ENI, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return c.describeENIs(ctx, nil, filter("network-interface-id", ids...))
}

// maxFilterValues is the most values EC2 takes in the filters of one
// call (FilterLimitExceeded beyond).
const maxFilterValues = 200

// InstanceTypes implements cloud.API. It asks for at most maxFilterValues
// names a call and walks every page of each: DescribeInstanceTypes pages
// even a filtered answer, 100 types at most.
func (c *Client) InstanceTypes(ctx context.Context, names []string) ([]cloud.InstanceType, error) {
	var out []cloud.InstanceType
	for chunk := range slices.Chunk(names, maxFilterValues) {
		in := &ec2.DescribeInstanceTypesInput{Filters: []types.Filter{filter("instance-type", chunk...)}, MaxResults: aws.Int32(100)}
		p := ec2.NewDescribeInstanceTypesPaginator(c.sdk, in)
		for p.HasMorePages() {
			var page *ec2.DescribeInstanceTypesOutput
			if err := c.call(ctx, DescribeInstanceTypes, func(ctx context.Context) (err error) {
				page, err = p.NextPage(ctx)
				return err
			}); err != nil {
				return nil, err
			}
			for _, t := range page.InstanceTypes {
				out = append(out, instanceTypeFrom(t))
			}
		}
	}
	return out, nil
}

// instanceTypeFrom reads the limits of network card 0, the only card
// enipam's ENIs go to: NetworkInfo.MaximumNetworkInterfaces counts every
// card's interfaces (64 on a p5.48xlarge, whose card 0 takes 2), so the
// card's own MaximumNetworkInterfaces wins when EC2 lists the cards.
func instanceTypeFrom(t types.InstanceTypeInfo) cloud.InstanceType {
	it := cloud.InstanceType{Name: string(t.InstanceType), Hypervisor: string(t.Hypervisor), BareMetal: aws.ToBool(t.BareMetal)}
	if t.VCpuInfo != nil {
		it.VCPUs = int(aws.ToInt32(t.VCpuInfo.DefaultVCpus))
	}
	n := t.NetworkInfo
	if n == nil {
		return it
	}
	it.MaxENIs = int(aws.ToInt32(n.MaximumNetworkInterfaces))
	it.IPv4PerENI = int(aws.ToInt32(n.Ipv4AddressesPerInterface))
	it.IPv6PerENI = int(aws.ToInt32(n.Ipv6AddressesPerInterface))
	for _, card := range n.NetworkCards {
		if aws.ToInt32(card.NetworkCardIndex) == 0 && card.MaximumNetworkInterfaces != nil {
			it.MaxENIs = int(aws.ToInt32(card.MaximumNetworkInterfaces))
		}
	}
	return it
}
