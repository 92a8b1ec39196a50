package poolcontroller

import (
	"maps"
	"slices"
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

	variations := map[string]func(*cloud.CreateENIRequest) (string, int){
		"another instance":             func(*cloud.CreateENIRequest) (string, int) { return "i-2", 1 },
		"another device index":         func(*cloud.CreateENIRequest) (string, int) { return "i-1", 2 },
		"created a second later":       func(r *cloud.CreateENIRequest) (string, int) { r.Tags[cloud.TagCreatedAt] = "2026-11-26T01:00:01Z"; return "i-1", 1 },
		"another address count":        func(r *cloud.CreateENIRequest) (string, int) { r.SecondaryIPs = 9; return "i-1", 1 },
		"prefixes instead":             func(r *cloud.CreateENIRequest) (string, int) { r.SecondaryIPs, r.Prefixes = 0, 1; return "i-1", 1 },
		"addresses instead (fallback)": func(r *cloud.CreateENIRequest) (string, int) { r.Prefixes = 1; return "i-1", 1 },
		"another subnet":               func(r *cloud.CreateENIRequest) (string, int) { r.SubnetID = "subnet-0a000000000000003"; return "i-1", 1 },
		"another security group":       func(r *cloud.CreateENIRequest) (string, int) { r.SecurityGroups = []string{"sg-1"}; return "i-1", 1 },
		"security groups reordered":    func(r *cloud.CreateENIRequest) (string, int) { r.SecurityGroups = []string{"sg-2", "sg-1"}; return "i-1", 1 },
		"another description":          func(r *cloud.CreateENIRequest) (string, int) { r.Description += "."; return "i-1", 1 },
		"a policy tag changed":         func(r *cloud.CreateENIRequest) (string, int) { r.Tags["team"] = "storage"; return "i-1", 1 },
		"a policy tag added":           func(r *cloud.CreateENIRequest) (string, int) { r.Tags["cost"] = "a"; return "i-1", 1 },
		"a tag's key and value merged": func(r *cloud.CreateENIRequest) (string, int) { delete(r.Tags, "team"); r.Tags["teamnet"] = ""; return "i-1", 1 },
	}
	seen := map[string]string{first: "the first request"}
	for _, name := range slices.Sorted(maps.Keys(variations)) {
		req := base()
		instance, index := variations[name](&req)
		token := clientToken(instance, index, req)
		if other, dup := seen[token]; dup {
			t.Errorf("%s: token %s already given to %s", name, token, other)
		}
		seen[token] = name
	}
}
