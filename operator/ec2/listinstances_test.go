package ec2_test

import (
	"context"
	"maps"
	"reflect"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/ec2"
)

// TestListInstancesReturnsTheCallersViewOfUnchangedInstances: three
// m5.large, listed through the SDK from ec2sim over HTTP, then listed
// again with the first list as the caller's view, one view's tags
// differing from EC2's. The two unchanged instances come back as the
// caller's views (their tags are the views' own map), so a resync of a
// VPC whose instances did not change holds no second copy of their tags
// through the ENIs' describe that follows; the other comes back as EC2
// shows it.
func TestListInstancesReturnsTheCallersViewOfUnchangedInstances(t *testing.T) {
	client, first := listThree(t)
	ctx := context.Background()
	views := map[string]cloud.Instance{}
	for _, in := range first {
		if len(in.Tags) == 0 {
			t.Fatalf("instance %s listed without tags: nothing to share", in.ID)
		}
		views[in.ID] = in
	}
	changed := first[0].ID
	stale := views[changed]
	stale.Tags = maps.Clone(stale.Tags)
	stale.Tags["stale"] = "yes"
	views[changed] = stale

	second, err := client.ListInstances(ctx, listVPC, func(id string) (cloud.Instance, bool) {
		in, ok := views[id]
		return in, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 3 {
		t.Fatalf("%d instances listed the second time, want 3", len(second))
	}
	shared := 0
	for _, in := range second {
		view := views[in.ID]
		same := reflect.ValueOf(in.Tags).UnsafePointer() == reflect.ValueOf(view.Tags).UnsafePointer()
		if in.ID == changed {
			if same || in.Tags["stale"] != "" || !maps.Equal(in.Tags, first[0].Tags) {
				t.Errorf("changed %s listed with tags %v (the caller's view: %v), want EC2's %v", in.ID, in.Tags, same, first[0].Tags)
			}
			continue
		}
		if !in.Equal(&view) {
			t.Errorf("unchanged %s listed as %+v, want %+v", in.ID, in, view)
		}
		if same {
			shared++
		}
	}
	if shared != 2 {
		t.Errorf("%d of the 2 unchanged instances came back as the caller's view, want 2", shared)
	}
}

// TestListInstancesKeepsAnUntaggedViewOfUnchangedInstances: a caller that
// keeps its instances without tags (the inventory) gets its views back
// for instances EC2 shows unchanged but for the tags, so a resync holds
// no copy of them; an instance changed otherwise comes back as EC2 shows
// it.
func TestListInstancesKeepsAnUntaggedViewOfUnchangedInstances(t *testing.T) {
	client, first := listThree(t)
	ctx := context.Background()
	views := map[string]cloud.Instance{}
	for _, in := range first {
		if len(in.Tags) == 0 {
			t.Fatalf("instance %s listed without tags", in.ID)
		}
		views[in.ID] = in.Untagged()
	}
	changed := first[0].ID
	stale := views[changed]
	stale.State = "stopping"
	views[changed] = stale
	second, err := client.ListInstances(ctx, listVPC, func(id string) (cloud.Instance, bool) {
		in, ok := views[id]
		return in, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	untagged := 0
	for _, in := range second {
		if in.ID == changed {
			if in.State == "stopping" || len(in.Tags) == 0 {
				t.Errorf("changed %s listed as %+v, want EC2's with its tags", in.ID, in)
			}
			continue
		}
		if in.Tags == nil && in.Equal(new(views[in.ID])) {
			untagged++
		}
	}
	if untagged != 2 {
		t.Errorf("%d of the 2 unchanged instances came back as the untagged views, want 2", untagged)
	}
}

const listVPC = "vpc-0a000000000000001"

// listThree lists three m5.large from ec2sim through the SDK over HTTP.
func listThree(t *testing.T) (*ec2.Client, []cloud.Instance) {
	t.Helper()
	client := simClient(t, `
account: "123456789012"
region: us-east-1
zones: [us-east-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  subnets:
  - {name: a, cidr: 10.0.0.0/24, zone: us-east-1a}
instances:
- {name: node, count: 3, type: m5.large, subnet: a, secondaryIPs: 2}
`)
	first, err := client.ListInstances(context.Background(), listVPC, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 {
		t.Fatalf("%d instances listed, want 3", len(first))
	}
	return client, first
}
