package poolcontroller

import (
	"errors"
	"net/netip"
	"testing"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
)

// TestDecideStaticIP: what a node's static IP decision is, from its facts
// alone. Instance i-1's primary ENI eni-p (10.0.0.5) asks for an Elastic
// IP tagged team=a; eipalloc-a (tagged, free), eipalloc-b (untagged) and
// eipalloc-c (tagged, associated with another instance's ENI) exist.
func TestDecideStaticIP(t *testing.T) {
	primaryIP := netip.MustParseAddr("10.0.0.5")
	tagged := map[string]string{"team": "a"}
	addrs := func() []cloud.Address {
		return []cloud.Address{
			{AllocationID: "eipalloc-a", PublicIP: netip.MustParseAddr("3.0.0.1"), Tags: tagged},
			{AllocationID: "eipalloc-b", PublicIP: netip.MustParseAddr("3.0.0.2")},
			{AllocationID: "eipalloc-c", PublicIP: netip.MustParseAddr("3.0.0.3"), Tags: tagged,
				AssociationID: "eipassoc-c", ENIID: "eni-other", InstanceID: "i-2", PrivateIP: netip.MustParseAddr("10.0.9.9")},
		}
	}
	rec := func(alloc, instance string) *enipamv1alpha1.NodeStaticIP {
		return &enipamv1alpha1.NodeStaticIP{AllocationID: alloc, InstanceID: instance, ENIID: "eni-p"}
	}
	onPrimaryAs := func(i int) func(f *staticIPFacts) {
		return func(f *staticIPFacts) {
			f.addrs[i].AssociationID, f.addrs[i].ENIID, f.addrs[i].PrivateIP, f.addrs[i].InstanceID = "eipassoc-p", "eni-p", primaryIP, "i-1"
		}
	}
	cases := []struct {
		name       string
		edit       func(f *staticIPFacts)
		wantRel    bool
		wantRecord string // allocation recorded as found on the primary
		wantAssoc  bool
		wantPick   string // the association's address ("" : the book picks)
		wantReason string
		wantBlock  bool
	}{
		{name: "nothing recorded: the address book picks a free tagged address",
			wantAssoc: true},
		{name: "the recorded address still free is associated again",
			edit:      func(f *staticIPFacts) { f.record = rec("eipalloc-a", "i-1") },
			wantAssoc: true, wantPick: "eipalloc-a"},
		{name: "a record of another instance is released",
			edit:    func(f *staticIPFacts) { f.record = rec("eipalloc-a", "i-0") },
			wantRel: true},
		{name: "a record the tags no longer ask for is released",
			edit:    func(f *staticIPFacts) { f.record, f.tags = rec("eipalloc-a", "i-1"), nil },
			wantRel: true},
		{name: "a recorded address taken by another instance is released",
			edit:    func(f *staticIPFacts) { f.record = rec("eipalloc-c", "i-1") },
			wantRel: true},
		{name: "a NodeRouting being deleted releases its record",
			edit:    func(f *staticIPFacts) { f.record, f.deleting = rec("eipalloc-a", "i-1"), true },
			wantRel: true},
		{name: "a NodeRouting being deleted without a record gets nothing",
			edit: func(f *staticIPFacts) { f.deleting = true }},
		{name: "no primary ENI in EC2's view yet",
			edit:       func(f *staticIPFacts) { f.primary = nil },
			wantReason: ReasonInstanceNotFound},
		{name: "a tagged address on the primary is recorded",
			edit:       onPrimaryAs(0),
			wantRecord: "eipalloc-a"},
		{name: "an untagged address on the primary is left alone and reported",
			edit:       onPrimaryAs(1),
			wantReason: ReasonStaticIPConflict, wantBlock: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := staticIPFacts{tags: tagged, instanceID: "i-1", addrs: addrs(),
				primary: &cloud.ENI{ID: "eni-p", PrimaryIP: primaryIP, InstanceID: "i-1"}}
			if tc.edit != nil {
				tc.edit(&f)
			}
			step := decideStaticIP(f)
			if step.release != tc.wantRel {
				t.Errorf("release %v, want %v", step.release, tc.wantRel)
			}
			switch {
			case tc.wantRecord == "" && step.record != nil:
				t.Errorf("records %+v, want nothing recorded", step.record)
			case tc.wantRecord != "" && (step.record == nil || step.record.AllocationID != tc.wantRecord || step.record.AssociationID != "eipassoc-p" || step.record.ENIID != "eni-p"):
				t.Errorf("records %+v, want %s on eni-p by eipassoc-p", step.record, tc.wantRecord)
			}
			if (step.associate != nil) != tc.wantAssoc {
				t.Fatalf("associate %+v, want one: %v", step.associate, tc.wantAssoc)
			}
			if a := step.associate; a != nil && (a.pick.AllocationID != tc.wantPick || a.primary.ID != "eni-p" || a.instanceID != "i-1") {
				t.Errorf("associates %q with %s of %s, want %q with eni-p of i-1", a.pick.AllocationID, a.primary.ID, a.instanceID, tc.wantPick)
			}
			if step.reason != tc.wantReason || (step.err != nil) != (tc.wantReason != "") {
				t.Errorf("failure %v (%s), want reason %q", step.err, step.reason, tc.wantReason)
			}
			if errors.Is(step.err, errStaticIPBlocked) != tc.wantBlock {
				t.Errorf("failure %v blocked: %v, want %v", step.err, errors.Is(step.err, errStaticIPBlocked), tc.wantBlock)
			}
		})
	}
}
