package wire

import (
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/enipam/enipam/test/ec2sim/state"
)

// params reads one ec2query form. Getters record the first problem as an
// EC2 error and mark the keys they read, so that done can report a key no
// getter asked for as UnknownParameter, as EC2 does.
type params struct {
	v    url.Values
	used map[string]bool
	err  error
	// dryRun is the DryRun flag every action accepts; readOnly marks the
	// describes, which a dry run may carry out.
	dryRun   bool
	readOnly bool
	// authorize evaluates the caller's IAM policy for the request (nil:
	// everything is allowed).
	authorize func() error
}

// commonParams are accepted by every action: protocol and signing fields.
var commonParams = []string{"Action", "Version", "AWSAccessKeyId", "SignatureMethod", "SignatureVersion",
	"Signature", "Timestamp", "Expires", "SecurityToken"}

// noDryRun are the actions whose EC2 API has no DryRun parameter (as the
// SDK's input types show): DryRun is an unknown parameter to them.
var noDryRun = map[string]bool{
	"AssignPrivateIpAddresses": true, "UnassignPrivateIpAddresses": true,
	"AssignIpv6Addresses": true, "UnassignIpv6Addresses": true,
}

func newParams(v url.Values) *params {
	p := &params{v: v, used: map[string]bool{}}
	for _, k := range commonParams {
		p.used[k] = true
	}
	for k := range v {
		if strings.HasPrefix(k, "X-Amz-") {
			p.used[k] = true
		}
	}
	action := v.Get("Action")
	if !noDryRun[action] {
		if b := p.boolean("DryRun"); b != nil {
			p.dryRun = *b
		}
	}
	p.readOnly = strings.HasPrefix(action, "Describe")
	return p
}

func (p *params) fail(err *state.APIError) {
	if p.err == nil {
		p.err = err
	}
}

func (p *params) has(name string) bool {
	_, ok := p.v[name]
	return ok
}

// str returns the value of name, empty when absent.
func (p *params) str(name string) string {
	p.used[name] = true
	return p.v.Get(name)
}

// required returns the value of name, failing with MissingParameter when it
// is absent or empty.
func (p *params) required(name string) string {
	v := p.str(name)
	if v == "" {
		p.fail(state.Errorf(state.CodeMissingParameter, "The request must contain the parameter %s", name))
	}
	return v
}

// integer returns the value of name as an int, 0 when absent.
func (p *params) integer(name string) int {
	if !p.has(name) {
		return 0
	}
	s := p.str(name)
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		p.fail(state.Errorf(state.CodeInvalidParameterValue, "Invalid value '%s' for %s. Expecting an integer.", s, name))
	}
	return int(n)
}

// requiredInt is integer that fails with MissingParameter when absent.
func (p *params) requiredInt(name string) int {
	if !p.has(name) {
		p.used[name] = true
		p.fail(state.Errorf(state.CodeMissingParameter, "The request must contain the parameter %s", name))
		return 0
	}
	return p.integer(name)
}

// boolean returns the value of name, nil when absent.
func (p *params) boolean(name string) *bool {
	if !p.has(name) {
		return nil
	}
	s := p.str(name)
	var b bool
	switch strings.ToLower(s) {
	case "true":
		b = true
	case "false":
	default:
		p.fail(state.Errorf(state.CodeInvalidParameterValue, "Invalid value '%s' for %s. Expecting true or false.", s, name))
		return nil
	}
	return &b
}

// indexes returns the N of keys "prefix.N" and "prefix.N.<more>", sorted,
// marking a bare "prefix" key (how an empty list is sent) as read.
func (p *params) indexes(prefix string) []int {
	seen := map[int]bool{}
	if p.has(prefix) {
		p.used[prefix] = true
	}
	for k := range p.v {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || strconv.Itoa(n) != num {
			continue
		}
		seen[n] = true
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// list returns the values of "prefix.1", "prefix.2", ... in index order.
func (p *params) list(prefix string) []string {
	var out []string
	for _, n := range p.indexes(prefix) {
		key := prefix + "." + strconv.Itoa(n)
		if p.has(key) {
			out = append(out, p.str(key))
		}
	}
	return out
}

// filters reads Filter.N.Name and Filter.N.Value.M.
func (p *params) filters() []state.Filter {
	var out []state.Filter
	for _, n := range p.indexes("Filter") {
		base := "Filter." + strconv.Itoa(n)
		f := state.Filter{Name: p.required(base + ".Name"), Values: p.list(base + ".Value")}
		out = append(out, f)
	}
	return out
}

// tags reads prefix.N.Key and prefix.N.Value.
func (p *params) tags(prefix string) []state.Tag {
	var out []state.Tag
	for _, n := range p.indexes(prefix) {
		base := prefix + "." + strconv.Itoa(n)
		out = append(out, state.Tag{Key: p.required(base + ".Key"), Value: p.str(base + ".Value")})
	}
	return out
}

// tagSpecs reads TagSpecification.N.ResourceType and .Tag.M.
func (p *params) tagSpecs() []state.TagSpecification {
	var out []state.TagSpecification
	for _, n := range p.indexes("TagSpecification") {
		base := "TagSpecification." + strconv.Itoa(n)
		out = append(out, state.TagSpecification{ResourceType: p.required(base + ".ResourceType"), Tags: p.tags(base + ".Tag")})
	}
	return out
}

// page reads MaxResults and NextToken.
func (p *params) page() state.Page {
	return state.Page{MaxResults: p.integer("MaxResults"), NextToken: p.str("NextToken"), MaxResultsGiven: p.has("MaxResults")}
}

// ignore accepts parameters the emulator reads but does not model: the key
// itself and everything nested under it.
func (p *params) ignore(names ...string) {
	for k := range p.v {
		for _, n := range names {
			if k == n || strings.HasPrefix(k, n+".") {
				p.used[k] = true
			}
		}
	}
}

// done returns the first problem met, else UnknownParameter for a key no
// getter read.
func (p *params) done() error {
	if p.err != nil {
		return p.err
	}
	var unknown []string
	for k := range p.v {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return state.Errorf(state.CodeUnknownParameter, "The parameter %s is not recognized", unknown[0])
	}
	return nil
}

// unfiltered reports whether a describe has no filter, no ID list and no
// pagination: EC2 throttles those in a bucket of their own.
func unfiltered(v url.Values) bool {
	for k := range v {
		switch {
		case k == "MaxResults", k == "NextToken",
			strings.HasPrefix(k, "Filter."), strings.HasPrefix(k, "InstanceId."),
			strings.HasPrefix(k, "NetworkInterfaceId."), strings.HasPrefix(k, "GroupId."),
			strings.HasPrefix(k, "GroupName."):
			return false
		}
	}
	return true
}
