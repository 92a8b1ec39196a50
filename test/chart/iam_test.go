package chart

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/enipam/enipam/docs/iam"
	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/test/cluster"
)

// TestPolicyGrantsExactlyTheEC2ActionsTheOperatorCalls: the IAM policy
// docs/iam/policy.json (the one docs/install.md points to, and ec2sim enforces)
// allows exactly the actions of the operator's EC2 adapter (ec2.Actions:
// the typed constants every call passes its chokepoint with), plus
// ec2:CreateTags only as tag-on-create of CreateNetworkInterface and
// AllocateAddress, the two calls that tag what they create.
// AllocateAddress is granted only for addresses tagged with the cluster at
// creation, ReleaseAddress only on addresses carrying the cluster tag. An
// action added to the adapter without the policy, or a stale one left in
// it, fails here; so does a docs/install.md that no longer points to the file or
// names a statement it lacks.
func TestPolicyGrantsExactlyTheEC2ActionsTheOperatorCalls(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, a := range ec2.Actions() {
		calls = append(calls, string(a))
	}
	slices.Sort(calls)

	block, err := os.ReadFile(filepath.Join(root, "docs", "iam", "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(block, iam.OperatorPolicy("")) {
		t.Error("package iam does not embed docs/iam/policy.json")
	}
	install, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(install), "### IAM policy")
	if !ok {
		t.Fatal("docs/install.md has no IAM policy section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, "(iam/policy.json)") {
		t.Error("docs/install.md's IAM policy section does not link docs/iam/policy.json")
	}
	var policy struct {
		Statement []struct {
			Sid       string
			Effect    string
			Action    json.RawMessage
			Resource  any
			Condition map[string]map[string]any
		}
	}
	if err := json.Unmarshal([]byte(block), &policy); err != nil {
		t.Fatalf("docs/iam/policy.json is not valid JSON: %v\n%s", err, block)
	}
	var granted []string
	for _, st := range policy.Statement {
		if !strings.Contains(section, "`"+st.Sid+"`") {
			t.Errorf("docs/install.md's IAM policy section does not list statement %s", st.Sid)
		}
		var actions []string
		if err := json.Unmarshal(st.Action, &actions); err != nil {
			var one string
			if err := json.Unmarshal(st.Action, &one); err != nil {
				t.Fatalf("statement action %s", st.Action)
			}
			actions = []string{one}
		}
		for _, a := range actions {
			name, ok := strings.CutPrefix(a, "ec2:")
			if !ok || st.Effect != "Allow" {
				t.Errorf("unexpected grant %q (%s)", a, st.Effect)
				continue
			}
			if name == "CreateTags" {
				creating := values(st.Condition["StringEquals"]["ec2:CreateAction"])
				slices.Sort(creating)
				if !slices.Equal(creating, []string{"AllocateAddress", "CreateNetworkInterface"}) || len(st.Condition) != 1 {
					t.Errorf("ec2:CreateTags is granted beyond tag-on-create of CreateNetworkInterface and AllocateAddress: %+v", st.Condition)
				}
				continue
			}
			cond := map[string]string{"AllocateAddress": "aws:RequestTag/enipam.io/cluster", "ReleaseAddress": "aws:ResourceTag/enipam.io/cluster",
				"DeleteNetworkInterface": "aws:ResourceTag/enipam.io/cluster"}
			if name == "DetachNetworkInterface" && st.Resource != "arn:aws:ec2:*:*:instance/*" {
				// A detach names the instance and the ENI: the ENI must be
				// the cluster's.
				cond[name] = "aws:ResourceTag/enipam.io/cluster"
			}
			if key, ok := cond[name]; ok && len(values(st.Condition["StringEquals"][key])) != 1 {
				t.Errorf("ec2:%s is granted without the condition %s: %+v", name, key, st.Condition)
			}
			granted = append(granted, name)
		}
	}
	slices.Sort(granted)
	granted = slices.Compact(granted)
	if !slices.Equal(granted, calls) {
		t.Errorf("docs/iam/policy.json grants %v\nthe operator calls            %v", granted, calls)
	}
}

// values reads a condition's value: one string or a list of them.
func values(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
