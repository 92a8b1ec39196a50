package wire

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/enipam/enipam/test/ec2sim/iam"
	"github.com/enipam/enipam/test/ec2sim/state"
)

// What IAM evaluates for each EC2 action: the resources the action touches
// (by ARN, "*" for the describes, which have no resource-level
// permissions) and the condition keys each carries, as EC2's service
// authorization reference lists them for these actions:
//
//   - every request: aws:RequestedRegion and ec2:Region;
//   - an existing resource: aws:ResourceTag/<key> and ec2:ResourceTag/<key>,
//     its tags, looked up only when a policy asks for them;
//   - a resource being created (network-interface/* of
//     CreateNetworkInterface, elastic-ip/* of AllocateAddress): the tags of
//     its TagSpecification as aws:RequestTag/<key> and aws:TagKeys; with
//     tags, the create also needs ec2:CreateTags on that resource, with
//     ec2:CreateAction set to the creating action;
//   - CreateTags and DeleteTags on each resource named: aws:RequestTag and
//     aws:TagKeys of the tags given, with the resource's own tags.
//
// CreateNetworkInterface touches its subnet and security groups too;
// Attach, Detach and Associate the instance and the interface; Modify the
// interface and any security group it names. Looking a resource up can
// fail: its NotFound is the answer, as EC2 resolves a resource before it
// can evaluate its tags.

// authzBuilder collects the requests of one call.
type authzBuilder struct {
	s       *state.State
	region  string
	account string
	v       url.Values
	out     []iam.Request
}

// authzRequests returns what IAM evaluates for action with the form v.
func authzRequests(s *state.State, action string, v url.Values) ([]iam.Request, error) {
	b := &authzBuilder{s: s, region: s.Region(), account: s.Account(), v: v}
	ec2Action := "ec2:" + action
	switch action {
	case "CreateNetworkInterface":
		b.existing(ec2Action, v.Get("SubnetId"))
		for _, g := range formList(v, "SecurityGroupId") {
			b.existing(ec2Action, g)
		}
		b.created(action, "network-interface")
	case "AllocateAddress":
		b.created(action, "elastic-ip")
	case "AttachNetworkInterface":
		b.existing(ec2Action, v.Get("InstanceId"))
		b.existing(ec2Action, v.Get("NetworkInterfaceId"))
	case "DetachNetworkInterface":
		eniID, instanceID, err := s.AttachmentParties(v.Get("AttachmentId"))
		if err != nil {
			return nil, err
		}
		b.existing(ec2Action, instanceID)
		b.existing(ec2Action, eniID)
	case "ModifyNetworkInterfaceAttribute":
		b.existing(ec2Action, v.Get("NetworkInterfaceId"))
		for _, g := range formList(v, "SecurityGroupId") {
			b.existing(ec2Action, g)
		}
	case "DeleteNetworkInterface", "AssignPrivateIpAddresses", "UnassignPrivateIpAddresses",
		"AssignIpv6Addresses", "UnassignIpv6Addresses":
		b.existing(ec2Action, v.Get("NetworkInterfaceId"))
	case "CreateTags", "DeleteTags":
		tags := formTags(v, "Tag")
		for _, id := range formList(v, "ResourceId") {
			b.tagging(ec2Action, id, tags)
		}
	case "AssociateAddress", "DisassociateAddress", "ReleaseAddress":
		alloc, err := s.AllocationOf(v.Get("AllocationId"), v.Get("PublicIp"), v.Get("AssociationId"))
		if err != nil {
			return nil, err
		}
		b.existing(ec2Action, alloc)
		if id := v.Get("NetworkInterfaceId"); action == "AssociateAddress" && id != "" {
			b.existing(ec2Action, id)
		} else if id := v.Get("InstanceId"); action == "AssociateAddress" && id != "" {
			b.existing(ec2Action, id)
		}
	default: // the describes
		b.add(ec2Action, "*", nil)
	}
	if len(b.out) == 0 {
		// A request naming no resource (its decoding fails later) is
		// still not let through by a policy that allows nothing.
		b.add(ec2Action, "*", nil)
	}
	return b.out, nil
}

// add records one request whose keys are the common ones plus extra's.
func (b *authzBuilder) add(action, resource string, extra iam.ConditionKeys) {
	b.out = append(b.out, iam.Request{Action: action, Resource: resource, Keys: func(key string) ([]string, bool, error) {
		switch key {
		case "aws:requestedregion", "ec2:region":
			return []string{b.region}, true, nil
		}
		if extra != nil {
			return extra(key)
		}
		return nil, false, nil
	}})
}

// arn is the ARN of a resource type and ID ("*" for one being created).
func (b *authzBuilder) arn(typ, id string) string {
	return "arn:aws:ec2:" + b.region + ":" + b.account + ":" + typ + "/" + id
}

// existing records action on the resource id, with its tags as
// aws:ResourceTag. An empty id (a parameter the call lacks) adds nothing:
// decoding reports it.
func (b *authzBuilder) existing(action, id string) {
	if id == "" {
		return
	}
	b.add(action, b.arn(state.ResourceType(id), id), b.resourceTags(id, nil))
}

// created records action on a new resource of typ, with the tags of its
// TagSpecification, and ec2:CreateTags on it when it is tagged at creation.
func (b *authzBuilder) created(action, typ string) {
	var tags []state.Tag
	for _, n := range formIndexes(b.v, "TagSpecification") {
		base := "TagSpecification." + strconv.Itoa(n)
		if b.v.Get(base+".ResourceType") == typ {
			tags = append(tags, formTags(b.v, base+".Tag")...)
		}
	}
	b.add("ec2:"+action, b.arn(typ, "*"), requestTags(tags, nil))
	if len(tags) > 0 {
		b.add("ec2:CreateTags", b.arn(typ, "*"), requestTags(tags, func(key string) ([]string, bool, error) {
			if key == "ec2:createaction" {
				return []string{action}, true, nil
			}
			return nil, false, nil
		}))
	}
}

// tagging records CreateTags or DeleteTags on the resource id: the tags
// given and the resource's own.
func (b *authzBuilder) tagging(action, id string, tags []state.Tag) {
	b.add(action, b.arn(state.ResourceType(id), id), requestTags(tags, b.resourceTags(id, nil)))
}

// resourceTags resolves aws:ResourceTag/<key> and ec2:ResourceTag/<key>
// from the tags of id, looked up once and only when asked; other keys go
// to next.
func (b *authzBuilder) resourceTags(id string, next iam.ConditionKeys) iam.ConditionKeys {
	var tags map[string]string
	var looked bool
	return func(key string) ([]string, bool, error) {
		tag, ok := strings.CutPrefix(key, "aws:resourcetag/")
		if !ok {
			tag, ok = strings.CutPrefix(key, "ec2:resourcetag/")
		}
		if !ok {
			if next != nil {
				return next(key)
			}
			return nil, false, nil
		}
		if !looked {
			var err error
			if tags, err = b.s.ResourceTags(id); err != nil {
				return nil, false, err
			}
			looked = true
		}
		v, present := tags[tag]
		return []string{v}, present, nil
	}
}

// requestTags resolves aws:RequestTag/<key> and aws:TagKeys from tags;
// other keys go to next.
func requestTags(tags []state.Tag, next iam.ConditionKeys) iam.ConditionKeys {
	return func(key string) ([]string, bool, error) {
		if key == "aws:tagkeys" {
			if len(tags) == 0 {
				return nil, false, nil
			}
			var keys []string
			for _, t := range tags {
				keys = append(keys, t.Key)
			}
			return keys, true, nil
		}
		if tag, ok := strings.CutPrefix(key, "aws:requesttag/"); ok {
			for _, t := range tags {
				if strings.ToLower(t.Key) == tag {
					return []string{t.Value}, true, nil
				}
			}
			return nil, false, nil
		}
		if next != nil {
			return next(key)
		}
		return nil, false, nil
	}
}

// formIndexes, formList and formTags read lists of a form as params does,
// without marking keys read.
func formIndexes(v url.Values, prefix string) []int {
	p := &params{v: v, used: map[string]bool{}}
	return p.indexes(prefix)
}

func formList(v url.Values, prefix string) []string {
	p := &params{v: v, used: map[string]bool{}}
	return p.list(prefix)
}

func formTags(v url.Values, prefix string) []state.Tag {
	p := &params{v: v, used: map[string]bool{}}
	return p.tags(prefix)
}
