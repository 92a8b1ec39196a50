package state

import (
	"slices"
	"strings"
)

// maxTags is EC2's limit of tags per resource.
const maxTags = 50

func validateTag(t Tag) error {
	switch {
	case t.Key == "":
		return Errorf(CodeInvalidParameterValue, "Tag keys must not be empty")
	case len(t.Key) > 128:
		return Errorf(CodeInvalidParameterValue, "Tag key exceeds the maximum length of 128 characters")
	case len(t.Value) > 256:
		return Errorf(CodeInvalidParameterValue, "Tag value exceeds the maximum length of 256 characters")
	case strings.HasPrefix(strings.ToLower(t.Key), "aws:"):
		return Errorf(CodeInvalidParameterValue, "Tag keys starting with 'aws:' are reserved for internal use")
	}
	return nil
}

// setTags merges tags into a resource's, replacing values of existing keys.
func setTags(have []Tag, add []Tag) ([]Tag, error) {
	out := slices.Clone(have)
	for _, t := range add {
		if err := validateTag(t); err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(out, func(x Tag) bool { return x.Key == t.Key }); i >= 0 {
			out[i].Value = t.Value
		} else {
			out = append(out, t)
		}
	}
	if len(out) > maxTags {
		return nil, Errorf(CodeTagLimitExceeded, "The maximum number of tags (%d) for a resource has been reached.", maxTags)
	}
	return out, nil
}

// tagsFor collects the tags of the specifications for resourceType.
func tagsFor(resourceType string, specs []TagSpecification) ([]Tag, error) {
	var out []Tag
	for _, sp := range specs {
		if sp.ResourceType != resourceType {
			return nil, Errorf(CodeInvalidParameterValue, "'%s' is not a valid taggable resource type for this operation.", sp.ResourceType)
		}
		var err error
		if out, err = setTags(out, sp.Tags); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// metaIn finds id in r.
func metaIn[T resource](r *registry[T], id string) (*meta, bool) {
	v, ok := r.get(id)
	if !ok {
		return nil, false
	}
	return v.base(), true
}

// taggable finds any tagged resource by ID.
func (s *State) taggable(id string) (*meta, error) {
	var m *meta
	var found bool
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "eni":
		// A new ENI is NotFound to tag calls within the mutation window.
		var e *eni
		if e, found = s.enis.get(id); found && !young(e, s.timing.MutationConsistency, s.now()) {
			m = &e.meta
		} else {
			found = false
		}
	case "i":
		m, found = metaIn(&s.instances, id)
	case "subnet":
		m, found = metaIn(&s.subnets, id)
	case "vpc":
		m, found = metaIn(&s.vpcs, id)
	case "sg":
		m, found = metaIn(&s.groups, id)
	case "rtb":
		m, found = metaIn(&s.routeTables, id)
	case "eipalloc":
		m, found = metaIn(&s.addresses, id)
	default:
		return nil, Errorf(CodeInvalidID, "The ID '%s' is not valid", id)
	}
	if !found {
		codes := map[string]string{"eni": CodeENINotFound, "i": CodeInstanceNotFound, "subnet": CodeSubnetNotFound,
			"vpc": CodeVpcNotFound, "sg": CodeGroupNotFound, "rtb": CodeRouteTableNotFound, "eipalloc": CodeAllocationNotFound}
		return nil, Errorf(codes[prefix], "The ID '%s' does not exist", id)
	}
	return m, nil
}

// CreateTagsRequest is CreateTags' input.
type CreateTagsRequest struct {
	ResourceIDs []string
	Tags        []Tag
}

// CreateTags adds or overwrites tags on resources, all or nothing.
func (s *State) CreateTags(req CreateTagsRequest) (*ReturnResponse, error) {
	s.lock()
	defer s.unlock()
	if len(req.ResourceIDs) == 0 {
		return nil, Errorf(CodeMissingParameter, "The request must contain the parameter resourceIdSet")
	}
	if len(req.Tags) == 0 {
		return nil, Errorf(CodeMissingParameter, "The request must contain the parameter tagSet")
	}
	metas := make([]*meta, len(req.ResourceIDs))
	merged := make([][]Tag, len(req.ResourceIDs))
	for i, id := range req.ResourceIDs {
		m, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		if merged[i], err = setTags(m.tags, req.Tags); err != nil {
			return nil, err
		}
		metas[i] = m
	}
	commit := s.changingTags(req.ResourceIDs)
	for i, m := range metas {
		m.tags = merged[i]
	}
	commit()
	return returnTrue(), nil
}

// DeleteTag names a tag to delete: by key, and only if its value is Value
// when Value is set.
type DeleteTag struct {
	Key   string
	Value *string
}

// DeleteTagsRequest is DeleteTags' input; no tags means all of them.
type DeleteTagsRequest struct {
	ResourceIDs []string
	Tags        []DeleteTag
}

// DeleteTags removes tags from resources. Deleting a tag that is not there
// is no error.
func (s *State) DeleteTags(req DeleteTagsRequest) (*ReturnResponse, error) {
	s.lock()
	defer s.unlock()
	if len(req.ResourceIDs) == 0 {
		return nil, Errorf(CodeMissingParameter, "The request must contain the parameter resourceIdSet")
	}
	var metas []*meta
	for _, id := range req.ResourceIDs {
		m, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		metas = append(metas, m)
	}
	commit := s.changingTags(req.ResourceIDs)
	defer commit()
	for _, m := range metas {
		if len(req.Tags) == 0 {
			m.tags = nil
			continue
		}
		m.tags = slices.DeleteFunc(m.tags, func(t Tag) bool {
			return slices.ContainsFunc(req.Tags, func(d DeleteTag) bool {
				return d.Key == t.Key && (d.Value == nil || *d.Value == t.Value)
			})
		})
	}
	return returnTrue(), nil
}

// changingTags is changing for a tag change to the ENIs and Elastic IPs
// among ids (the other kinds show their tags at once).
func (s *State) changingTags(ids []string) (commit func()) {
	var enis []*eni
	var addrs []*address
	for _, id := range ids {
		if e, ok := s.enis.get(id); ok {
			enis = append(enis, e)
		}
		if a, ok := s.addresses.get(id); ok {
			addrs = append(addrs, a)
		}
	}
	if len(enis)+len(addrs) == 0 {
		return func() {}
	}
	return s.changing(s.timing.Lag.Tags, enis, addrs)
}
