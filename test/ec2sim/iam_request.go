package ec2sim

import (
	"net/url"
	"strconv"
	"strings"
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
	s       *State
	region  string
	account string
	v       url.Values
	out     []authzRequest
}

// authzRequests returns what IAM evaluates for action with the form v.
func (s *State) authzRequests(action string, v url.Values) ([]authzRequest, error) {
	b := &authzBuilder{s: s, region: s.region, account: s.account, v: v}
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
		eniID, instanceID, err := s.attachmentParties(v.Get("AttachmentId"))
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
	case "DeleteNetworkInterface", "AssignPrivateIpAddresses", "UnassignPrivateIpAddresses":
		b.existing(ec2Action, v.Get("NetworkInterfaceId"))
	case "CreateTags", "DeleteTags":
		tags := formTags(v, "Tag")
		for _, id := range formList(v, "ResourceId") {
			b.tagging(ec2Action, id, tags)
		}
	case "AssociateAddress", "DisassociateAddress", "ReleaseAddress":
		alloc, err := s.allocationOf(v.Get("AllocationId"), v.Get("PublicIp"), v.Get("AssociationId"))
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
func (b *authzBuilder) add(action, resource string, extra conditionKeys) {
	b.out = append(b.out, authzRequest{action: action, resource: resource, keys: func(key string) ([]string, bool, error) {
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
	b.add(action, b.arn(arnType(id), id), b.resourceTags(id, nil))
}

// created records action on a new resource of typ, with the tags of its
// TagSpecification, and ec2:CreateTags on it when it is tagged at creation.
func (b *authzBuilder) created(action, typ string) {
	var tags []Tag
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
func (b *authzBuilder) tagging(action, id string, tags []Tag) {
	b.add(action, b.arn(arnType(id), id), requestTags(tags, b.resourceTags(id, nil)))
}

// resourceTags resolves aws:ResourceTag/<key> and ec2:ResourceTag/<key>
// from the tags of id, looked up once and only when asked; other keys go
// to next.
func (b *authzBuilder) resourceTags(id string, next conditionKeys) conditionKeys {
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
			if tags, err = b.s.tagsOf(id); err != nil {
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
func requestTags(tags []Tag, next conditionKeys) conditionKeys {
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

// arnType is the ARN resource type of an EC2 ID.
func arnType(id string) string {
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "eni":
		return "network-interface"
	case "i":
		return "instance"
	case "sg":
		return "security-group"
	case "rtb":
		return "route-table"
	case "eipalloc":
		return "elastic-ip"
	}
	return prefix // subnet, vpc
}

// tagsOf returns the tags of any resource, keyed by lower-case key (IAM
// compares tag keys in condition keys without case). A missing resource
// is the NotFound the action itself answers.
func (s *State) tagsOf(id string) (map[string]string, error) {
	s.lock()
	defer s.unlock()
	var tags []Tag
	var err error
	switch arnType(id) {
	case "network-interface":
		var e *eni
		if e, err = s.eniToChange(id); err == nil {
			tags = e.tags
		}
	case "elastic-ip":
		var a *address
		if a, err = s.addressByRef(id, ""); err == nil {
			tags = a.tags
		}
	case "subnet":
		var sn *subnet
		if sn, err = s.subnetByID(id); err == nil {
			tags = sn.tags
		}
	case "security-group":
		var g *securityGroup
		if g, err = s.groupByID(id); err == nil {
			tags = g.tags
		}
	case "instance":
		var in *instance
		if in, err = s.instanceByID(id); err == nil {
			tags = in.tags
		}
	default:
		var m *meta
		if m, err = s.taggable(id); err == nil {
			tags = m.tags
		}
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range tags {
		out[strings.ToLower(t.Key)] = t.Value
	}
	return out, nil
}

// attachmentParties returns the ENI and instance of an attachment.
func (s *State) attachmentParties(id string) (eniID, instanceID string, err error) {
	if id == "" {
		return "", "", nil
	}
	s.lock()
	defer s.unlock()
	a, err := s.attachmentByID(id)
	if err != nil {
		return "", "", err
	}
	return a.eni.id, a.instance.id, nil
}

// allocationOf returns the allocation ID of an Elastic IP named by
// allocation ID, public IP or association ID.
func (s *State) allocationOf(allocationID, publicIP, associationID string) (string, error) {
	if allocationID != "" {
		return allocationID, nil
	}
	s.lock()
	defer s.unlock()
	switch {
	case associationID != "":
		a, err := s.associationByID(associationID)
		if err != nil {
			return "", err
		}
		return a.id, nil
	case publicIP != "":
		a, err := s.addressByRef("", publicIP)
		if err != nil {
			return "", err
		}
		return a.id, nil
	}
	return "", nil
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

func formTags(v url.Values, prefix string) []Tag {
	p := &params{v: v, used: map[string]bool{}}
	return p.tags(prefix)
}
