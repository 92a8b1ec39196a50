package iam

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// An identity policy as IAM evaluates it for one request: an explicit Deny
// wins, else an Allow is needed, else the request is implicitly denied.
// What is modelled is what a policy for EC2's resource-level permissions
// uses: Effect, Action/NotAction and Resource/NotResource with * and ?
// wildcards, and conditions with the string, Null and Bool operators, their
// IfExists forms and the ForAllValues/ForAnyValue set qualifiers. A policy
// using anything else (Principal, policy variables, other operators) is
// refused when the scenario loads, rather than evaluated wrongly.

// Policy is a parsed identity policy.
type Policy struct {
	statements []statement
}

type statement struct {
	sid         string
	allow       bool
	actions     []string // lower case
	notAction   bool
	resources   []string
	notResource bool
	conditions  []condition
}

// condition is one operator applied to one key: true when any of values
// matches (all of them for the negated operators).
type condition struct {
	op       string // StringEquals, StringLike, Null, ...
	set      string // "", "ForAllValues" or "ForAnyValue"
	ifExists bool
	key      string // lower case
	values   []string
}

// policyDocument is the JSON of a policy; single values may be lists.
type policyDocument struct {
	Version   string
	Statement oneOrMany[rawStatement]
}

type rawStatement struct {
	Sid         string
	Effect      string
	Action      oneOrMany[string]
	NotAction   oneOrMany[string]
	Resource    oneOrMany[string]
	NotResource oneOrMany[string]
	Condition   map[string]map[string]oneOrMany[any]
	Principal   any
}

// oneOrMany reads a JSON value that is one T or a list of them.
type oneOrMany[T any] []T

func (o *oneOrMany[T]) UnmarshalJSON(b []byte) error {
	if len(bytes.TrimSpace(b)) > 0 && bytes.TrimSpace(b)[0] == '[' {
		var many []T
		err := strictJSON(b, &many)
		*o = many
		return err
	}
	var one T
	if err := strictJSON(b, &one); err != nil {
		return err
	}
	*o = []T{one}
	return nil
}

// strictJSON decodes b into v, refusing fields v does not have.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

var conditionOps = map[string]bool{
	"StringEquals": true, "StringNotEquals": true, "StringEqualsIgnoreCase": true, "StringNotEqualsIgnoreCase": true,
	"StringLike": true, "StringNotLike": true, "Null": true, "Bool": true,
}

// ParsePolicy reads an identity policy, refusing what it cannot evaluate.
func ParsePolicy(b []byte) (*Policy, error) {
	var doc policyDocument
	if err := strictJSON(b, &doc); err != nil {
		return nil, fmt.Errorf("reading the policy, %w", err)
	}
	if doc.Version != "2012-10-17" {
		return nil, fmt.Errorf("policy Version %q: only 2012-10-17 is evaluated", doc.Version)
	}
	if len(doc.Statement) == 0 {
		return nil, errors.New("the policy has no statement")
	}
	p := &Policy{}
	for i, rs := range doc.Statement {
		st, err := parseStatement(rs)
		if err != nil {
			return nil, fmt.Errorf("statement %d (%s): %w", i, rs.Sid, err)
		}
		p.statements = append(p.statements, st)
	}
	return p, nil
}

func parseStatement(rs rawStatement) (statement, error) {
	st := statement{sid: rs.Sid}
	switch rs.Effect {
	case "Allow":
		st.allow = true
	case "Deny":
	default:
		return st, fmt.Errorf("the Effect %q is not Allow or Deny", rs.Effect)
	}
	if rs.Principal != nil {
		return st, errors.New("an identity policy has no Principal")
	}
	switch {
	case len(rs.Action) > 0 && len(rs.NotAction) > 0, len(rs.Action) == 0 && len(rs.NotAction) == 0:
		return st, errors.New("exactly one of Action and NotAction is needed")
	case len(rs.NotAction) > 0:
		st.notAction, rs.Action = true, rs.NotAction
	}
	for _, a := range rs.Action {
		if a != "*" && !strings.Contains(a, ":") {
			return st, fmt.Errorf("action %q is not service:action", a)
		}
		st.actions = append(st.actions, strings.ToLower(a))
	}
	switch {
	case len(rs.Resource) > 0 && len(rs.NotResource) > 0, len(rs.Resource) == 0 && len(rs.NotResource) == 0:
		return st, errors.New("exactly one of Resource and NotResource is needed")
	case len(rs.NotResource) > 0:
		st.notResource, rs.Resource = true, rs.NotResource
	}
	st.resources = rs.Resource
	for op, keys := range rs.Condition {
		c := condition{op: op}
		if set, rest, ok := strings.Cut(c.op, ":"); ok {
			if set != "ForAllValues" && set != "ForAnyValue" {
				return st, fmt.Errorf("condition qualifier %q is not ForAllValues or ForAnyValue", set)
			}
			c.set, c.op = set, rest
		}
		c.op, c.ifExists = strings.CutSuffix(c.op, "IfExists")
		if !conditionOps[c.op] {
			return st, fmt.Errorf("condition operator %q is not evaluated by ec2sim", op)
		}
		for key, vals := range keys {
			c.key = strings.ToLower(key)
			c.values = nil
			for _, v := range vals {
				switch v := v.(type) {
				case string:
					if strings.Contains(v, "${") {
						return st, fmt.Errorf("condition value %q: policy variables are not evaluated", v)
					}
					c.values = append(c.values, v)
				case bool:
					c.values = append(c.values, fmt.Sprint(v))
				default:
					return st, fmt.Errorf("condition %s %s: value %v is not a string", op, key, v)
				}
			}
			st.conditions = append(st.conditions, c)
		}
	}
	return st, nil
}

// Request is one action on one resource as IAM sees it: the action
// (ec2:CreateNetworkInterface), the resource ARN ("*" for actions without
// resource-level permissions) and the values of the condition keys.
type Request struct {
	Action   string
	Resource string
	Keys     ConditionKeys
}

// ConditionKeys gives the values of condition keys (lower case) for one
// request; present is false for a key absent from the request context.
// Resolving a key can fail, as looking up a resource's tags can
// (NotFound): the error is returned as the request's answer.
type ConditionKeys func(key string) (values []string, present bool, err error)

// Decision is the outcome of evaluating a request.
type Decision struct {
	Allowed bool
	// DeniedBy is the Sid of an explicit Deny, empty for an implicit deny.
	DeniedBy string
	Explicit bool
}

// Evaluate applies the policy to one request.
func (p *Policy) Evaluate(r Request) (Decision, error) {
	var d Decision
	for _, st := range p.statements {
		ok, err := st.applies(r)
		if err != nil {
			return Decision{}, err
		}
		if !ok {
			continue
		}
		if !st.allow {
			return Decision{DeniedBy: st.sid, Explicit: true}, nil
		}
		d.Allowed = true
	}
	return d, nil
}

func (st statement) applies(r Request) (bool, error) {
	action := strings.ToLower(r.Action)
	matched := false
	for _, a := range st.actions {
		matched = matched || wildcardMatch(a, action)
	}
	if matched == st.notAction {
		return false, nil
	}
	matched = false
	for _, res := range st.resources {
		matched = matched || wildcardMatch(res, r.Resource)
	}
	if matched == st.notResource {
		return false, nil
	}
	for _, c := range st.conditions {
		ok, err := c.holds(r.Keys)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// holds evaluates one condition against the request's keys.
func (c condition) holds(keys ConditionKeys) (bool, error) {
	have, present, err := keys(c.key)
	if err != nil {
		return false, err
	}
	if c.op == "Null" {
		// Null: true asks for the key to be absent, false for it present.
		want := len(c.values) == 1 && strings.EqualFold(c.values[0], "true")
		return want != present, nil
	}
	if !present {
		switch {
		case c.ifExists, c.set == "ForAllValues":
			return true, nil
		case c.set == "ForAnyValue":
			return false, nil
		}
		return negated(c.op), nil
	}
	one := func(v string) bool {
		for _, want := range c.values {
			if c.match(want, v) {
				return true
			}
		}
		return false
	}
	if negated(c.op) {
		// A negated operator holds when no value matches any of the policy's.
		one = func(v string) bool {
			for _, want := range c.values {
				if !c.match(want, v) {
					return false
				}
			}
			return true
		}
	}
	if c.set == "ForAllValues" {
		for _, v := range have {
			if !one(v) {
				return false, nil
			}
		}
		return true, nil
	}
	// ForAnyValue, and a single-valued key.
	for _, v := range have {
		if one(v) {
			return true, nil
		}
	}
	return false, nil
}

// match reports whether the request's value v matches the policy's want
// under the operator (for a negated operator: whether they differ).
func (c condition) match(want, v string) bool {
	switch c.op {
	case "StringEquals", "Bool":
		return want == v
	case "StringNotEquals":
		return want != v
	case "StringEqualsIgnoreCase":
		return strings.EqualFold(want, v)
	case "StringNotEqualsIgnoreCase":
		return !strings.EqualFold(want, v)
	case "StringLike":
		return wildcardMatch(want, v)
	case "StringNotLike":
		return !wildcardMatch(want, v)
	}
	return false
}

func negated(op string) bool { return strings.Contains(op, "Not") }

// wildcardMatch matches s against an IAM pattern, where * is any run of
// characters (slashes included) and ? one character.
func wildcardMatch(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == s
	}
	// path.Match stops * at '/', which IAM does not: match segment-free by
	// replacing slashes, which neither pattern syntax treats specially then.
	esc := func(x string) string {
		return strings.NewReplacer("/", "\x00", "[", "\x01", "]", "\x02", "\\", "\x03").Replace(x)
	}
	ok, err := path.Match(esc(pattern), esc(s))
	return err == nil && ok
}
