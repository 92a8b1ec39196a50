package cloudfake

import (
	"context"
	"net/netip"
	"slices"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim"
)

// pageSize is the adapter's MaxResults for paginated describes.
const pageSize = 1000

func filter(name string, values ...string) ec2sim.Filter {
	return ec2sim.Filter{Name: name, Values: values}
}

// pages calls fetch page after page until it returns no token, as the
// SDK's paginators do; each page is one EC2 call.
func pages(ctx context.Context, c *Cloud, action Action, fetch func(token string) (string, error)) error {
	token := ""
	for {
		next, err := call(ctx, c, action, func() (string, error) { return fetch(token) })
		if err != nil || next == "" {
			return err
		}
		token = next
	}
}

// DescribeVPC implements cloud.API.
func (c *Cloud) DescribeVPC(ctx context.Context, vpcID string) (cloud.VPC, error) {
	out, err := call(ctx, c, DescribeVpcs, func() (*ec2sim.DescribeVpcsResponse, error) {
		return c.state.DescribeVpcs(ec2sim.DescribeRequest{Filters: []ec2sim.Filter{filter("vpc-id", vpcID)}})
	})
	if err != nil {
		return cloud.VPC{}, err
	}
	if len(out.Vpcs) == 0 {
		return cloud.VPC{}, &cloud.Error{Action: string(DescribeVpcs), Message: "VPC " + vpcID + " not found", Kind: cloud.ErrNotFound}
	}
	v := out.Vpcs[0]
	vpc := cloud.VPC{ID: v.VpcID}
	if p, err := netip.ParsePrefix(v.CidrBlock); err == nil {
		vpc.CIDRs = append(vpc.CIDRs, p)
	}
	for _, a := range v.CidrAssociations {
		if p, err := netip.ParsePrefix(a.CidrBlock); err == nil && !slices.Contains(vpc.CIDRs, p) {
			vpc.CIDRs = append(vpc.CIDRs, p)
		}
	}
	return vpc, nil
}

// ListSubnets implements cloud.API.
func (c *Cloud) ListSubnets(ctx context.Context, vpcID string) ([]cloud.Subnet, error) {
	var subnets []cloud.Subnet
	err := pages(ctx, c, DescribeSubnets, func(token string) (string, error) {
		out, err := c.state.DescribeSubnets(ec2sim.DescribeRequest{Filters: []ec2sim.Filter{filter("vpc-id", vpcID)}, Page: ec2sim.Page{MaxResults: pageSize, NextToken: token}})
		if err != nil {
			return "", err
		}
		for _, s := range out.Subnets {
			subnets = append(subnets, subnetFrom(s))
		}
		return out.NextToken, nil
	})
	if err != nil {
		return nil, err
	}
	return subnets, nil
}

// ListSecurityGroups implements cloud.API.
func (c *Cloud) ListSecurityGroups(ctx context.Context, vpcID string) ([]cloud.SecurityGroup, error) {
	var groups []cloud.SecurityGroup
	err := pages(ctx, c, DescribeSecurityGroups, func(token string) (string, error) {
		out, err := c.state.DescribeSecurityGroups(ec2sim.DescribeRequest{Filters: []ec2sim.Filter{filter("vpc-id", vpcID)}, Page: ec2sim.Page{MaxResults: pageSize, NextToken: token}})
		if err != nil {
			return "", err
		}
		for _, g := range out.SecurityGroups {
			groups = append(groups, cloud.SecurityGroup{ID: g.GroupID, Name: g.GroupName, VPCID: g.VpcID, Tags: tagsFrom(g.Tags)})
		}
		return out.NextToken, nil
	})
	if err != nil {
		return nil, err
	}
	return groups, nil
}

// ListInstances implements cloud.API.
func (c *Cloud) ListInstances(ctx context.Context, vpcID string) ([]cloud.Instance, error) {
	return c.describeInstances(ctx, filter("vpc-id", vpcID))
}

// GetInstances implements cloud.API as the adapter does: the live
// instances, the ENIs attached to them, and the available ENIs tagged for
// them.
func (c *Cloud) GetInstances(ctx context.Context, ids []string) ([]cloud.Instance, []cloud.ENI, error) {
	instances, err := c.describeInstances(ctx, filter("instance-id", ids...))
	if err != nil || len(instances) == 0 {
		return instances, nil, err
	}
	live := make([]string, 0, len(instances))
	for _, in := range instances {
		live = append(live, in.ID)
	}
	enis, err := c.describeENIs(ctx, filter("attachment.instance-id", live...))
	if err != nil {
		return instances, nil, err
	}
	orphans, err := c.describeENIs(ctx, filter("tag:"+cloud.TagInstance, live...), filter("status", cloud.ENIAvailable))
	return instances, append(enis, orphans...), err
}

func (c *Cloud) describeInstances(ctx context.Context, f ec2sim.Filter) ([]cloud.Instance, error) {
	var instances []cloud.Instance
	err := pages(ctx, c, DescribeInstances, func(token string) (string, error) {
		out, err := c.state.DescribeInstances(ec2sim.DescribeRequest{
			Filters: []ec2sim.Filter{f, filter("instance-state-name", "pending", "running")},
			Page:    ec2sim.Page{MaxResults: pageSize, NextToken: token},
		})
		if err != nil {
			return "", err
		}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				instances = append(instances, instanceFrom(in))
			}
		}
		return out.NextToken, nil
	})
	if err != nil {
		return nil, err
	}
	return instances, nil
}

// ListENIs implements cloud.API.
func (c *Cloud) ListENIs(ctx context.Context, vpcID string) ([]cloud.ENI, error) {
	return c.describeENIs(ctx, filter("vpc-id", vpcID))
}

// GetENIs implements cloud.API with a filter on the IDs, as the adapter
// does: an ENI EC2 does not show (yet) is left out, not an error.
func (c *Cloud) GetENIs(ctx context.Context, ids []string) ([]cloud.ENI, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return c.describeENIs(ctx, filter("network-interface-id", ids...))
}

func (c *Cloud) describeENIs(ctx context.Context, filters ...ec2sim.Filter) ([]cloud.ENI, error) {
	var enis []cloud.ENI
	err := pages(ctx, c, DescribeNetworkInterfaces, func(token string) (string, error) {
		out, err := c.state.DescribeNetworkInterfaces(ec2sim.DescribeNetworkInterfacesRequest{Filters: filters, Page: ec2sim.Page{MaxResults: pageSize, NextToken: token}})
		if err != nil {
			return "", err
		}
		for _, e := range out.NetworkInterfaces {
			enis = append(enis, eniFrom(e))
		}
		return out.NextToken, nil
	})
	if err != nil {
		return nil, err
	}
	return enis, nil
}

// InstanceTypes implements cloud.API: at most 200 names a call (EC2's
// filter value limit), every page of each, as the adapter asks.
func (c *Cloud) InstanceTypes(ctx context.Context, names []string) ([]cloud.InstanceType, error) {
	var out []cloud.InstanceType
	for chunk := range slices.Chunk(names, 200) {
		err := pages(ctx, c, DescribeInstanceTypes, func(token string) (string, error) {
			page, err := c.state.DescribeInstanceTypes(ec2sim.DescribeInstanceTypesRequest{
				Filters: []ec2sim.Filter{filter("instance-type", chunk...)}, Page: ec2sim.Page{MaxResults: 100, NextToken: token},
			})
			if err != nil {
				return "", err
			}
			for _, t := range page.InstanceTypes {
				out = append(out, instanceTypeFrom(t))
			}
			return page.NextToken, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
