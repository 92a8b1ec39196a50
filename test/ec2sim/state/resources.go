package state

import "strings"

// What IAM needs to know of the resources a request names (the caller
// evaluates the policy at the edge).

// ResourceType is the resource type an EC2 ID names, as in its ARN
// (network-interface, instance, elastic-ip, ...).
func ResourceType(id string) string {
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

// ResourceTags returns the tags of any resource, keyed by lower-case key (IAM
// compares tag keys in condition keys without case). A missing resource
// is the NotFound the action itself answers.
func (s *State) ResourceTags(id string) (map[string]string, error) {
	s.lock()
	defer s.unlock()
	var tags []Tag
	var err error
	switch ResourceType(id) {
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

// AttachmentParties returns the ENI and instance of an attachment.
func (s *State) AttachmentParties(id string) (eniID, instanceID string, err error) {
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

// AllocationOf returns the allocation ID of an Elastic IP named by
// allocation ID, public IP or association ID.
func (s *State) AllocationOf(allocationID, publicIP, associationID string) (string, error) {
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
