package wire

import (
	"maps"
	"slices"
	"strconv"

	"github.com/enipam/enipam/test/ec2sim/state"
)

// decoder reads one action's parameters, calls the State and returns its
// answer. Unmodelled parameters the SDK may send are accepted and ignored;
// any other key is UnknownParameter.
type decoder func(s *state.State, p *params) (any, error)

// actions is every EC2 action the emulator serves.
var actions = map[string]decoder{
	"DescribeInstances": func(s *state.State, p *params) (any, error) {
		req := state.DescribeRequest{IDs: p.list("InstanceId"), Filters: p.filters(), Page: p.page()}
		p.ignore("IncludeManagedResources")
		return call(s, p, req, s.DescribeInstances)
	},
	"DescribeInstanceTypes": func(s *state.State, p *params) (any, error) {
		req := state.DescribeInstanceTypesRequest{InstanceTypes: p.list("InstanceType"), Filters: p.filters(), Page: p.page()}
		p.ignore("IncludeUnsupportedInRegion")
		return call(s, p, req, s.DescribeInstanceTypes)
	},
	"DescribeSubnets": func(s *state.State, p *params) (any, error) {
		req := state.DescribeRequest{IDs: p.list("SubnetId"), Filters: p.filters(), Page: p.page()}
		return call(s, p, req, s.DescribeSubnets)
	},
	"DescribeVpcs": func(s *state.State, p *params) (any, error) {
		req := state.DescribeRequest{IDs: p.list("VpcId"), Filters: p.filters(), Page: p.page()}
		return call(s, p, req, s.DescribeVpcs)
	},
	"DescribeSecurityGroups": func(s *state.State, p *params) (any, error) {
		req := state.DescribeRequest{IDs: p.list("GroupId"), Names: p.list("GroupName"), Filters: p.filters(), Page: p.page()}
		return call(s, p, req, s.DescribeSecurityGroups)
	},
	"DescribeRouteTables": func(s *state.State, p *params) (any, error) {
		req := state.DescribeRequest{IDs: p.list("RouteTableId"), Filters: p.filters(), Page: p.page()}
		return call(s, p, req, s.DescribeRouteTables)
	},
	"DescribeNetworkInterfaces": func(s *state.State, p *params) (any, error) {
		req := state.DescribeNetworkInterfacesRequest{NetworkInterfaceIDs: p.list("NetworkInterfaceId"), Filters: p.filters(), Page: p.page()}
		p.ignore("IncludeManagedResources")
		return call(s, p, req, s.DescribeNetworkInterfaces)
	},
	"CreateNetworkInterface": func(s *state.State, p *params) (any, error) {
		req := state.CreateNetworkInterfaceRequest{
			SubnetID:                       p.required("SubnetId"),
			Description:                    p.str("Description"),
			SecurityGroupIDs:               p.list("SecurityGroupId"),
			PrivateIPAddress:               p.str("PrivateIpAddress"),
			SecondaryPrivateIPAddressCount: p.integer("SecondaryPrivateIpAddressCount"),
			IPv4PrefixCount:                p.integer("Ipv4PrefixCount"),
			InterfaceType:                  p.str("InterfaceType"),
			TagSpecifications:              p.tagSpecs(),
			ClientToken:                    p.str("ClientToken"),
		}
		for _, n := range p.indexes("PrivateIpAddresses") {
			base := "PrivateIpAddresses." + strconv.Itoa(n)
			primary := p.boolean(base + ".Primary")
			req.PrivateIPAddresses = append(req.PrivateIPAddresses, state.PrivateIPSpec{Address: p.required(base + ".PrivateIpAddress"), Primary: primary != nil && *primary})
		}
		for _, n := range p.indexes("Ipv4Prefix") {
			req.IPv4Prefixes = append(req.IPv4Prefixes, p.required("Ipv4Prefix."+strconv.Itoa(n)+".Ipv4Prefix"))
		}
		req.IPv6AddressCount = p.integer("Ipv6AddressCount")
		req.IPv6PrefixCount = p.integer("Ipv6PrefixCount")
		for _, n := range p.indexes("Ipv6Addresses") {
			base := "Ipv6Addresses." + strconv.Itoa(n)
			p.ignore(base + ".IsPrimaryIpv6")
			req.IPv6Addresses = append(req.IPv6Addresses, p.required(base+".Ipv6Address"))
		}
		for _, n := range p.indexes("Ipv6Prefix") {
			req.IPv6Prefixes = append(req.IPv6Prefixes, p.required("Ipv6Prefix."+strconv.Itoa(n)+".Ipv6Prefix"))
		}
		// Primary IPv6 addresses are not modelled (see package state).
		p.ignore("ConnectionTrackingSpecification", "EnablePrimaryIpv6", "Operator")
		return call(s, p, req, s.CreateNetworkInterface, state.NeedSubnet(req.SubnetID), state.NeedGroups(req.SecurityGroupIDs))
	},
	"DeleteNetworkInterface": func(s *state.State, p *params) (any, error) {
		id := p.required("NetworkInterfaceId")
		return call(s, p, id, s.DeleteNetworkInterface, state.NeedENI(id))
	},
	"AttachNetworkInterface": func(s *state.State, p *params) (any, error) {
		req := state.AttachNetworkInterfaceRequest{
			NetworkInterfaceID: p.required("NetworkInterfaceId"),
			InstanceID:         p.required("InstanceId"),
			DeviceIndex:        p.requiredInt("DeviceIndex"),
			NetworkCardIndex:   p.integer("NetworkCardIndex"),
		}
		p.ignore("EnaSrdSpecification", "EnaQueueCount")
		return call(s, p, req, s.AttachNetworkInterface, state.NeedENI(req.NetworkInterfaceID), state.NeedInstance(req.InstanceID))
	},
	"DetachNetworkInterface": func(s *state.State, p *params) (any, error) {
		id := p.required("AttachmentId")
		force := p.boolean("Force")
		return call(s, p, id, func(id string) (*state.ReturnResponse, error) {
			return s.DetachNetworkInterface(id, force != nil && *force)
		},
			state.NeedAttachment(id))
	},
	"ModifyNetworkInterfaceAttribute": func(s *state.State, p *params) (any, error) {
		req := state.ModifyNetworkInterfaceAttributeRequest{
			NetworkInterfaceID:  p.required("NetworkInterfaceId"),
			SourceDestCheck:     p.boolean("SourceDestCheck.Value"),
			SecurityGroupIDs:    p.list("SecurityGroupId"),
			AttachmentID:        p.str("Attachment.AttachmentId"),
			DeleteOnTermination: p.boolean("Attachment.DeleteOnTermination"),
		}
		if p.has("Description.Value") {
			d := p.str("Description.Value")
			req.Description = &d
		}
		p.ignore("EnaSrdSpecification", "ConnectionTrackingSpecification", "AssociatePublicIpAddress", "AssociatedSubnetId")
		return call(s, p, req, s.ModifyNetworkInterfaceAttribute, state.NeedENI(req.NetworkInterfaceID), state.NeedGroups(req.SecurityGroupIDs))
	},
	"AssignPrivateIpAddresses": func(s *state.State, p *params) (any, error) {
		reassign := p.boolean("AllowReassignment")
		req := state.AssignPrivateIpAddressesRequest{
			NetworkInterfaceID:             p.required("NetworkInterfaceId"),
			PrivateIPAddresses:             p.list("PrivateIpAddress"),
			SecondaryPrivateIPAddressCount: p.integer("SecondaryPrivateIpAddressCount"),
			IPv4Prefixes:                   p.list("Ipv4Prefix"),
			IPv4PrefixCount:                p.integer("Ipv4PrefixCount"),
			AllowReassignment:              reassign != nil && *reassign,
		}
		return call(s, p, req, s.AssignPrivateIpAddresses, state.NeedENI(req.NetworkInterfaceID))
	},
	"UnassignPrivateIpAddresses": func(s *state.State, p *params) (any, error) {
		req := state.UnassignPrivateIpAddressesRequest{
			NetworkInterfaceID: p.required("NetworkInterfaceId"),
			PrivateIPAddresses: p.list("PrivateIpAddress"),
			IPv4Prefixes:       p.list("Ipv4Prefix"),
		}
		return call(s, p, req, s.UnassignPrivateIpAddresses, state.NeedENI(req.NetworkInterfaceID))
	},
	"AssignIpv6Addresses": func(s *state.State, p *params) (any, error) {
		req := state.AssignIpv6AddressesRequest{
			NetworkInterfaceID: p.required("NetworkInterfaceId"),
			IPv6Addresses:      p.list("Ipv6Addresses"),
			IPv6AddressCount:   p.integer("Ipv6AddressCount"),
			IPv6Prefixes:       p.list("Ipv6Prefix"),
			IPv6PrefixCount:    p.integer("Ipv6PrefixCount"),
		}
		return call(s, p, req, s.AssignIpv6Addresses, state.NeedENI(req.NetworkInterfaceID))
	},
	"UnassignIpv6Addresses": func(s *state.State, p *params) (any, error) {
		req := state.UnassignIpv6AddressesRequest{
			NetworkInterfaceID: p.required("NetworkInterfaceId"),
			IPv6Addresses:      p.list("Ipv6Addresses"),
			IPv6Prefixes:       p.list("Ipv6Prefix"),
		}
		return call(s, p, req, s.UnassignIpv6Addresses, state.NeedENI(req.NetworkInterfaceID))
	},
	"CreateTags": func(s *state.State, p *params) (any, error) {
		req := state.CreateTagsRequest{ResourceIDs: p.list("ResourceId"), Tags: p.tags("Tag")}
		return call(s, p, req, s.CreateTags, state.NeedTaggable(req.ResourceIDs))
	},
	"DeleteTags": func(s *state.State, p *params) (any, error) {
		req := state.DeleteTagsRequest{ResourceIDs: p.list("ResourceId")}
		for _, n := range p.indexes("Tag") {
			base := "Tag." + strconv.Itoa(n)
			t := state.DeleteTag{Key: p.required(base + ".Key")}
			if p.has(base + ".Value") {
				v := p.str(base + ".Value")
				t.Value = &v
			}
			req.Tags = append(req.Tags, t)
		}
		return call(s, p, req, s.DeleteTags, state.NeedTaggable(req.ResourceIDs))
	},
	"AllocateAddress": func(s *state.State, p *params) (any, error) {
		req := state.AllocateAddressRequest{Domain: p.str("Domain"), Address: p.str("Address"), TagSpecifications: p.tagSpecs()}
		p.ignore("NetworkBorderGroup", "PublicIpv4Pool", "CustomerOwnedIpv4Pool", "IpamPoolId")
		return call(s, p, req, s.AllocateAddress)
	},
	"AssociateAddress": func(s *state.State, p *params) (any, error) {
		re := p.boolean("AllowReassociation")
		req := state.AssociateAddressRequest{
			AllocationID: p.str("AllocationId"), PublicIP: p.str("PublicIp"),
			NetworkInterfaceID: p.str("NetworkInterfaceId"), InstanceID: p.str("InstanceId"),
			PrivateIPAddress: p.str("PrivateIpAddress"), AllowReassociation: re != nil && *re,
		}
		needs := []state.Need{state.NeedAddress(req.AllocationID, req.PublicIP)}
		if req.NetworkInterfaceID != "" {
			needs = append(needs, state.NeedENI(req.NetworkInterfaceID))
		} else if req.InstanceID != "" {
			needs = append(needs, state.NeedInstance(req.InstanceID))
		}
		return call(s, p, req, s.AssociateAddress, needs...)
	},
	"DisassociateAddress": func(s *state.State, p *params) (any, error) {
		id, ip := p.str("AssociationId"), p.str("PublicIp")
		if id == "" && ip == "" {
			p.fail(state.Errorf(state.CodeMissingParameter, "Either AssociationId or PublicIp must be specified"))
		}
		check := state.NeedAddress("", ip)
		if id != "" {
			check = state.NeedAssociation(id)
		}
		return call(s, p, id, func(id string) (*state.ReturnResponse, error) { return s.DisassociateAddress(id, ip) }, check)
	},
	"ReleaseAddress": func(s *state.State, p *params) (any, error) {
		id, ip := p.str("AllocationId"), p.str("PublicIp")
		if id == "" && ip == "" {
			p.fail(state.Errorf(state.CodeMissingParameter, "Either AllocationId or PublicIp must be specified"))
		}
		p.ignore("NetworkBorderGroup")
		return call(s, p, id, func(id string) (*state.ReturnResponse, error) { return s.ReleaseAddress(id, ip) }, state.NeedAddress(id, ip))
	},
	"DescribeAddresses": func(s *state.State, p *params) (any, error) {
		req := state.DescribeRequest{IDs: p.list("AllocationId"), Names: p.list("PublicIp"), Filters: p.filters()}
		return call(s, p, req, s.DescribeAddresses)
	},
}

// call finishes decoding (unknown keys), authorizes the request by the
// caller's IAM policy (DryRun or not: a dry run refused is
// UnauthorizedOperation) and runs the action; under DryRun, a describe
// runs and any other action's needs are checked, and both then answer
// DryRunOperation (see package state, dryrun.go).
func call[Req any, Resp any](s *state.State, p *params, req Req, fn func(Req) (*Resp, error), needs ...state.Need) (any, error) {
	if err := p.done(); err != nil {
		return nil, err
	}
	if p.authorize != nil {
		if err := p.authorize(); err != nil {
			return nil, err
		}
	}
	if p.dryRun {
		if p.readOnly {
			if _, err := fn(req); err != nil {
				return nil, err
			}
			needs = nil
		}
		return nil, s.DryRun(needs)
	}
	resp, err := fn(req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// ActionNames lists the actions served, sorted.
func ActionNames() []string { return slices.Sorted(maps.Keys(actions)) }
