// Package iam holds the IAM policy enipam-operator needs: one document,
// docs/iam/policy.json, which the README shows, the drift test in
// test/chart holds to the operator's calls, and ec2sim enforces on the
// operator's requests. Its cluster name is the README's example,
// ExampleClusterName, that users replace with theirs.
package iam

import (
	_ "embed"
	"encoding/json"
	"strings"
)

//go:embed policy.json
var policy string

// ExampleClusterName is the clusterName the policy is written for; a
// cluster's own policy replaces it.
const ExampleClusterName = "prod-eu-1"

// OperatorPolicy returns the policy document for clusterName (the example
// one when empty): JSON, as attached to the operator's role.
func OperatorPolicy(clusterName string) []byte {
	if clusterName == "" {
		return []byte(policy)
	}
	quoted, _ := json.Marshal(clusterName) // a string always marshals
	return []byte(strings.ReplaceAll(policy, `"`+ExampleClusterName+`"`, string(quoted)))
}
