package policy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestFamiliesCondition: unset and [IPv4] are served (True); IPv6 alone
// says the pools carry an IPv6 window and no IPv4, dual-stack in either
// order both (True, FamiliesPooled); a value the schema refuses (stored
// before it did) says which entry is wrong (InvalidIPFamilies).
func TestFamiliesCondition(t *testing.T) {
	for _, tc := range []struct {
		families []enipamv1alpha1.IPFamily
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{nil, metav1.ConditionTrue, enipamv1alpha1.ReasonFamiliesPooled, "pools carry IPv4"},
		{[]enipamv1alpha1.IPFamily{"IPv4"}, metav1.ConditionTrue, enipamv1alpha1.ReasonFamiliesPooled, "pools carry IPv4"},
		{[]enipamv1alpha1.IPFamily{"IPv6"}, metav1.ConditionTrue, enipamv1alpha1.ReasonFamiliesPooled, "IPv6 /80 on each node's primary ENI, and no IPv4"},
		{[]enipamv1alpha1.IPFamily{"IPv6", "IPv4"}, metav1.ConditionTrue, enipamv1alpha1.ReasonFamiliesPooled, "pools carry IPv4 and a window of an IPv6 /80"},
		{[]enipamv1alpha1.IPFamily{"IPv4", "IPv6"}, metav1.ConditionTrue, enipamv1alpha1.ReasonFamiliesPooled, "pools carry IPv4 and a window of an IPv6 /80"},
		{[]enipamv1alpha1.IPFamily{"IPv4", "ipv6"}, metav1.ConditionFalse, enipamv1alpha1.ReasonInvalidFamilies, `ipFamilies[1]: "ipv6" is not IPv4 or IPv6`},
		{[]enipamv1alpha1.IPFamily{"IPv4", "IPv4"}, metav1.ConditionFalse, enipamv1alpha1.ReasonInvalidFamilies, "ipFamilies[1]: IPv4 listed twice"},
		{[]enipamv1alpha1.IPFamily{"IPv4", "IPv6", "IPv4"}, metav1.ConditionFalse, enipamv1alpha1.ReasonInvalidFamilies, "at most 2"},
	} {
		p := policyNamed("p", 0, nil, func(s *enipamv1alpha1.ENIPolicySpec) { s.IPFamilies = tc.families })
		c := FamiliesCondition(&p)
		if c.Type != enipamv1alpha1.ConditionIPFamilies || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
			t.Errorf("%v: condition %s %s %s %q, want %s %s containing %q", tc.families, c.Type, c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.message)
		}
	}
}

// TestFamilyProblemsSummarised: two nodes of policy dual lack IPv6 and
// one of policy other; Of counts dual's two and gives the first node's
// message by name; clearing a node takes it out; a nil collection knows
// of none.
func TestFamilyProblemsSummarised(t *testing.T) {
	f := NewFamilyProblems()
	f.Set("node-b", "dual", "b: no IPv6 subnet")
	f.Set("node-a", "dual", "a: no IPv6 subnet")
	f.Set("node-c", "other", "c: no IPv6 type")
	if n, first := f.Of("dual"); n != 2 || first != "a: no IPv6 subnet" {
		t.Errorf("dual: %d nodes, first %q; want 2, node-a's", n, first)
	}
	if got := summary(2, "a: no IPv6 subnet"); !strings.Contains(got, "2 nodes get no IPv6") {
		t.Errorf("summary of 2 nodes %q", got)
	}
	f.Set("node-a", "dual", "")
	if n, first := f.Of("dual"); n != 1 || first != "b: no IPv6 subnet" {
		t.Errorf("dual after node-a cleared: %d nodes, first %q; want 1, node-b's", n, first)
	}
	var none *FamilyProblems
	none.Set("node-a", "dual", "x")
	if n, _ := none.Of("dual"); n != 0 {
		t.Errorf("a nil collection counts %d nodes", n)
	}
}
