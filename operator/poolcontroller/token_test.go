package poolcontroller

import (
	"maps"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
)

// TestClientTokenFollowsParameters: the create of a node's ENI at device
// index 1, and every variation of it a later create may send (another
// creation time, another count, another subnet, ...). EC2 answers a token
// it has seen with other parameters by IdempotentParameterMismatch, so
// each variation must get a token of its own; the same request sent again
// (tags built anew, in another map order) must get the same token, so
// EC2 answers it with the first ENI.
func TestClientTokenFollowsParameters(t *testing.T) {
	base := func() cloud.CreateENIRequest {
		return cloud.CreateENIRequest{
			SubnetID:       "subnet-0a000000000000002",
			SecurityGroups: []string{"sg-1", "sg-2"},
			Description:    "enipam: pod IPs of node node-1 (cluster test)",
			Tags: map[string]string{
				cloud.TagCluster: "test", cloud.TagInstance: "i-1", cloud.TagManagedBy: cloud.ManagedBy,
				TagNode: "node-1", cloud.TagCreatedAt: "2026-11-26T01:00:00Z", "team": "net",
			},
			SecondaryIPs: 8,
		}
	}
	first := clientToken("i-1", 1, base())
	if len(first) == 0 || len(first) > 64 {
		t.Fatalf("token %q: EC2 takes 1 to 64 characters", first)
	}
	again := base()
	again.Tags = maps.Clone(again.Tags)
	if got := clientToken("i-1", 1, again); got != first {
		t.Errorf("the same request got token %s, then %s", first, got)
	}

	type variation struct {
		name     string
		instance string
		index    int
		change   func(*cloud.CreateENIRequest)
	}
	same := func(*cloud.CreateENIRequest) {}
	variations := []variation{
		{"another instance", "i-2", 1, same},
		{"another device index", "i-1", 2, same},
		{"created a millisecond later", "i-1", 1, func(r *cloud.CreateENIRequest) { r.Tags[cloud.TagCreatedAt] = "2026-11-26T01:00:00.001Z" }},
		{"created a second later", "i-1", 1, func(r *cloud.CreateENIRequest) { r.Tags[cloud.TagCreatedAt] = "2026-11-26T01:00:01Z" }},
		{"another address count", "i-1", 1, func(r *cloud.CreateENIRequest) { r.SecondaryIPs = 9 }},
		{"prefixes instead", "i-1", 1, func(r *cloud.CreateENIRequest) { r.SecondaryIPs, r.Prefixes = 0, 1 }},
		{"prefixes as well", "i-1", 1, func(r *cloud.CreateENIRequest) { r.Prefixes = 1 }},
		{"another subnet", "i-1", 1, func(r *cloud.CreateENIRequest) { r.SubnetID = "subnet-0a000000000000003" }},
		{"another security group", "i-1", 1, func(r *cloud.CreateENIRequest) { r.SecurityGroups = []string{"sg-1"} }},
		{"security groups reordered", "i-1", 1, func(r *cloud.CreateENIRequest) { r.SecurityGroups = []string{"sg-2", "sg-1"} }},
		{"another description", "i-1", 1, func(r *cloud.CreateENIRequest) { r.Description += "." }},
		{"a policy tag changed", "i-1", 1, func(r *cloud.CreateENIRequest) { r.Tags["team"] = "storage" }},
		{"a policy tag added", "i-1", 1, func(r *cloud.CreateENIRequest) { r.Tags["cost"] = "a" }},
		{"a tag's key and value run together", "i-1", 1, func(r *cloud.CreateENIRequest) { delete(r.Tags, "team"); r.Tags["teamnet"] = "" }},
	}
	seen := map[string]string{first: "the first request"}
	for _, v := range variations {
		req := base()
		v.change(&req)
		token := clientToken(v.instance, v.index, req)
		if other, dup := seen[token]; dup {
			t.Errorf("%s: token %s already given to %s", v.name, token, other)
		}
		seen[token] = v.name
	}
}
