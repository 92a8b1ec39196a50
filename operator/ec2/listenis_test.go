package ec2_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/enipam/enipam/operator/cloud"
)

// TestListENIsReturnsTheCallersViewOfUnchangedENIs: three m5.large with a
// secondary ENI each (6 ENIs), listed through the SDK from ec2sim over
// HTTP, then listed again with the first list as the caller's view after
// one address was assigned to one ENI. The five unchanged ENIs come back
// as the caller's views (their address lists are the views' own), so a
// resync of a VPC that did not change holds no second copy of its ENIs;
// the changed one comes back as EC2 shows it now, with the new address.
func TestListENIsReturnsTheCallersViewOfUnchangedENIs(t *testing.T) {
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
- {name: node, count: 3, type: m5.large, subnet: a, secondaryIPs: 2, enis: [{deviceIndex: 1, secondaryIPs: 3}]}
`)
	ctx := context.Background()
	const vpc = "vpc-0a000000000000001"
	first, err := client.ListENIs(ctx, vpc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 6 {
		t.Fatalf("%d ENIs listed, want 6", len(first))
	}
	views := map[string]cloud.ENI{}
	for _, e := range first {
		views[e.ID] = e
	}
	changed := first[0].ID
	added, err := client.AssignIPs(ctx, changed, 1)
	if err != nil {
		t.Fatal(err)
	}

	second, err := client.ListENIs(ctx, vpc, func(id string) (cloud.ENI, bool) {
		e, ok := views[id]
		return e, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 6 {
		t.Fatalf("%d ENIs listed the second time, want 6", len(second))
	}
	shared := 0
	for _, e := range second {
		view := views[e.ID]
		same := unsafe.SliceData(e.IPs) == unsafe.SliceData(view.IPs)
		if e.ID == changed {
			if same || len(e.IPs) != len(view.IPs)+1 || !e.HasIP(added[0]) {
				t.Errorf("changed %s listed with %v (the caller's view: %v), want EC2's %d addresses with %v", e.ID, e.IPs, same, len(view.IPs)+1, added[0])
			}
			continue
		}
		if !e.Equal(&view) {
			t.Errorf("unchanged %s listed as %+v, want %+v", e.ID, e, view)
		}
		if same {
			shared++
		}
	}
	if shared != 5 {
		t.Errorf("%d of the 5 unchanged ENIs came back as the caller's view, want 5", shared)
	}
}
