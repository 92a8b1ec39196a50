package iam

import (
	"encoding/json"
	"fmt"
	"regexp"

	repopolicy "github.com/enipam/enipam/docs/iam"
)

// The default principal's credentials: what a scenario without principals
// accepts, and what the test helpers that build EC2 clients (test/stack,
// the operator's test harness) sign with.
const (
	DefaultAccessKeyID     = "AKIDENIPAMTEST"
	DefaultSecretAccessKey = "enipam"
	// DefaultPrincipalName names the default principal in ARNs and
	// authorization failures.
	DefaultPrincipalName = "enipam-operator"
)

// The policies a principal can name.
const (
	// PolicyEnipam is the repository's IAM policy for enipam-operator
	// (docs/iam/policy.json, the README's), written for the principal's
	// cluster name.
	PolicyEnipam = "enipam"
	// PolicyAllowAll lets the principal call every action: for tests of
	// ec2sim itself, which call actions the operator never does.
	PolicyAllowAll = "allow-all"
)

// PrincipalSpec is an IAM identity of the scenario's account: the access
// key it signs with and the identity policy attached to it.
type PrincipalSpec struct {
	// Name is the user name in its ARN, arn:aws:iam::<account>:user/<name>.
	Name            string `json:"name,omitempty"`
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
	// Policy is PolicyEnipam (the default) or PolicyAllowAll; PolicyDocument
	// overrides it with a policy of its own.
	Policy string `json:"policy,omitempty"`
	// PolicyDocument is an IAM policy (JSON or the same in YAML).
	PolicyDocument json.RawMessage `json:"policyDocument,omitempty"`
	// ClusterName replaces the example cluster name of PolicyEnipam (as the
	// README asks users to); the scenario's clusterName when empty.
	ClusterName string `json:"clusterName,omitempty"`
}

// DefaultPrincipal is the principal of a scenario that names none: the
// default credentials with the repository's policy for clusterName.
func DefaultPrincipal(clusterName string) PrincipalSpec {
	return PrincipalSpec{Name: DefaultPrincipalName, AccessKeyID: DefaultAccessKeyID, SecretAccessKey: DefaultSecretAccessKey,
		Policy: PolicyEnipam, ClusterName: clusterName}
}

// AllowAllPrincipal is the default credentials allowed every action.
func AllowAllPrincipal() PrincipalSpec {
	return PrincipalSpec{Name: "ec2sim-admin", AccessKeyID: DefaultAccessKeyID, SecretAccessKey: DefaultSecretAccessKey, Policy: PolicyAllowAll}
}

var accessKeyRE = regexp.MustCompile(`^[A-Z0-9]{4,128}$`)

// Principal is a PrincipalSpec ready to authenticate and authorize.
type Principal struct {
	// ARN names the principal in authorization failures.
	ARN string
	// Secret is the secret access key its requests are signed with.
	Secret string
	// Policy is nil for PolicyAllowAll.
	Policy *Policy
}

// SpecError is a principal spec that cannot be used: Path names the field
// from the list of specs, e.g. "[0].accessKeyID".
type SpecError struct {
	Path string
	Err  error
}

func (e *SpecError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

func specErr(path, format string, args ...any) error {
	return &SpecError{Path: path, Err: fmt.Errorf(format, args...)}
}

// Principals builds an account's principals keyed by access key ID: specs,
// or DefaultPrincipal for clusterName when specs is nil. ARNs are in
// account; PolicyEnipam is written for a spec's cluster name, else
// clusterName.
func Principals(specs []PrincipalSpec, account, clusterName string) (map[string]*Principal, error) {
	if specs == nil {
		specs = []PrincipalSpec{DefaultPrincipal(clusterName)}
	}
	out := map[string]*Principal{}
	for i, p := range specs {
		path := fmt.Sprintf("[%d]", i)
		if !accessKeyRE.MatchString(p.AccessKeyID) {
			return nil, specErr(path+".accessKeyID", "%q is not 4 to 128 capital letters and digits", p.AccessKeyID)
		}
		if out[p.AccessKeyID] != nil {
			return nil, specErr(path+".accessKeyID", "%s is another principal's", p.AccessKeyID)
		}
		if p.SecretAccessKey == "" {
			return nil, specErr(path+".secretAccessKey", "empty")
		}
		name := p.Name
		if name == "" {
			name = p.AccessKeyID
		}
		pr := &Principal{ARN: fmt.Sprintf("arn:aws:iam::%s:user/%s", account, name), Secret: p.SecretAccessKey}
		var doc []byte
		switch {
		case len(p.PolicyDocument) > 0:
			doc = p.PolicyDocument
		case p.Policy == "" || p.Policy == PolicyEnipam:
			cluster := p.ClusterName
			if cluster == "" {
				cluster = clusterName
			}
			doc = repopolicy.OperatorPolicy(cluster)
		case p.Policy == PolicyAllowAll:
		default:
			return nil, specErr(path+".policy", "%q is not %q or %q", p.Policy, PolicyEnipam, PolicyAllowAll)
		}
		if doc != nil {
			pol, err := ParsePolicy(doc)
			if err != nil {
				return nil, &SpecError{Path: path + ".policyDocument", Err: err}
			}
			pr.Policy = pol
		}
		out[p.AccessKeyID] = pr
	}
	return out, nil
}
