package iam

import (
	"strings"
	"testing"
)

// TestPolicyEvaluation: the evaluator on one request at a time, for each
// operator and qualifier it accepts: a policy allowing only under the
// condition, and requests with and without the keys. Keys are given
// lower case, as IAM compares them.
func TestPolicyEvaluation(t *testing.T) {
	const eni = "arn:aws:ec2:us-east-1:123456789012:network-interface/eni-0123456789abcdef0"
	keys := func(kv map[string][]string) ConditionKeys {
		return func(key string) ([]string, bool, error) {
			v, ok := kv[key]
			return v, ok, nil
		}
	}
	allow := func(cond string) string {
		return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"` + cond + `}]}`
	}
	cases := []struct {
		name, policy string
		action, res  string
		keys         map[string][]string
		want         bool
	}{
		{"action wildcard", allow(""), "ec2:DeleteNetworkInterface", eni, nil, true},
		{"other service", allow(""), "iam:PassRole", eni, nil, false},
		{"action case", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"EC2:deletenetworkinterface","Resource":"*"}}`, "ec2:DeleteNetworkInterface", eni, nil, true},
		{"? in action", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"ec2:?escribeVpcs","Resource":"*"}}`, "ec2:DescribeVpcs", "*", nil, true},
		{"resource wildcard crosses /", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"arn:aws:ec2:*"}}`, "ec2:X", eni, nil, true},
		{"resource type", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"arn:aws:ec2:*:*:elastic-ip/*"}}`, "ec2:X", eni, nil, false},
		{"ARN pattern is not *", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"arn:aws:ec2:*"}}`, "ec2:DescribeVpcs", "*", nil, false},
		{"NotAction", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","NotAction":"ec2:Delete*","Resource":"*"}}`, "ec2:DeleteNetworkInterface", eni, nil, false},
		{"NotResource", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","NotResource":"arn:aws:ec2:*:*:instance/*"}}`, "ec2:X", eni, nil, true},
		{"deny wins", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"},{"Effect":"Deny","Action":"ec2:Delete*","Resource":"*"}]}`, "ec2:DeleteTags", eni, nil, false},
		{"StringEquals absent", allow(`,"Condition":{"StringEquals":{"aws:RequestTag/c":"a"}}`), "ec2:X", eni, nil, false},
		{"StringEquals list", allow(`,"Condition":{"StringEquals":{"aws:RequestTag/c":["a","b"]}}`), "ec2:X", eni, map[string][]string{"aws:requesttag/c": {"b"}}, true},
		{"StringNotEquals absent", allow(`,"Condition":{"StringNotEquals":{"aws:RequestTag/c":"a"}}`), "ec2:X", eni, nil, true},
		{"StringNotEquals equal", allow(`,"Condition":{"StringNotEquals":{"aws:RequestTag/c":["a","b"]}}`), "ec2:X", eni, map[string][]string{"aws:requesttag/c": {"b"}}, false},
		{"StringEqualsIgnoreCase", allow(`,"Condition":{"StringEqualsIgnoreCase":{"aws:RequestTag/c":"ProD"}}`), "ec2:X", eni, map[string][]string{"aws:requesttag/c": {"prod"}}, true},
		{"StringLike", allow(`,"Condition":{"StringLike":{"aws:ResourceTag/c":"prod-*"}}`), "ec2:X", eni, map[string][]string{"aws:resourcetag/c": {"prod-eu-1"}}, true},
		{"StringNotLike", allow(`,"Condition":{"StringNotLike":{"aws:ResourceTag/c":"prod-*"}}`), "ec2:X", eni, map[string][]string{"aws:resourcetag/c": {"prod-eu-1"}}, false},
		{"IfExists absent", allow(`,"Condition":{"StringEqualsIfExists":{"aws:RequestTag/c":"a"}}`), "ec2:X", eni, nil, true},
		{"IfExists present", allow(`,"Condition":{"StringEqualsIfExists":{"aws:RequestTag/c":"a"}}`), "ec2:X", eni, map[string][]string{"aws:requesttag/c": {"z"}}, false},
		{"Null true absent", allow(`,"Condition":{"Null":{"aws:RequestTag/c":"true"}}`), "ec2:X", eni, nil, true},
		{"Null false absent", allow(`,"Condition":{"Null":{"aws:RequestTag/c":"false"}}`), "ec2:X", eni, nil, false},
		{"Null false present", allow(`,"Condition":{"Null":{"aws:RequestTag/c":false}}`), "ec2:X", eni, map[string][]string{"aws:requesttag/c": {"v"}}, true},
		{"ForAllValues subset", allow(`,"Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["a","b"]}}`), "ec2:X", eni, map[string][]string{"aws:tagkeys": {"a"}}, true},
		{"ForAllValues extra", allow(`,"Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["a","b"]}}`), "ec2:X", eni, map[string][]string{"aws:tagkeys": {"a", "c"}}, false},
		{"ForAllValues absent", allow(`,"Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["a"]}}`), "ec2:X", eni, nil, true},
		{"ForAnyValue one", allow(`,"Condition":{"ForAnyValue:StringLike":{"aws:TagKeys":"enipam.io/*"}}`), "ec2:X", eni, map[string][]string{"aws:tagkeys": {"x", "enipam.io/cluster"}}, true},
		{"ForAnyValue absent", allow(`,"Condition":{"ForAnyValue:StringEquals":{"aws:TagKeys":"a"}}`), "ec2:X", eni, nil, false},
		{"conditions AND", allow(`,"Condition":{"StringEquals":{"aws:RequestTag/a":"1","aws:RequestTag/b":"2"}}`), "ec2:X", eni, map[string][]string{"aws:requesttag/a": {"1"}}, false},
	}
	for _, c := range cases {
		p, err := ParsePolicy([]byte(c.policy))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		d, err := p.Evaluate(Request{Action: c.action, Resource: c.res, Keys: keys(c.keys)})
		if err != nil || d.Allowed != c.want {
			t.Errorf("%s: allowed %v (%v), want %v", c.name, d.Allowed, err, c.want)
		}
	}
}

// TestPoliciesEC2simCannotEvaluateAreRefused: a policy with an operator,
// a policy variable or a field the evaluator does not know is refused when
// read, naming what, rather than evaluated wrongly.
func TestPoliciesEC2simCannotEvaluateAreRefused(t *testing.T) {
	for _, c := range []struct{ policy, want string }{
		{`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}}`, "IpAddress"},
		{`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"StringEquals":{"aws:RequestTag/c":"${aws:username}"}}}}`, "policy variables"},
		{`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"*","Principal":"*"}}`, "Principal"},
		{`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*"}}`, "Resource"},
		{`{"Version":"2012-10-17","Statement":{"Effect":"Maybe","Action":"*","Resource":"*"}}`, "Maybe"},
		{`{"Version":"2008-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}`, "2008-10-17"},
		{`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"*","Colour":"blue"}}`, "Colour"},
	} {
		if _, err := ParsePolicy([]byte(c.policy)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.policy, err, c.want)
		}
	}
}
