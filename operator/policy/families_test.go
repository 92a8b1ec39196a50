package policy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestFamiliesCondition: unset and [IPv4] are served (True); IPv6 alone
// or dual-stack in either order say the pools carry IPv4 only
// (IPv6NotPooled); a value the schema refuses (stored before it did)
// says which entry is wrong (InvalidIPFamilies).
func TestFamiliesCondition(t *testing.T) {
	for _, tc := range []struct {
		families []enipamv1alpha1.IPFamily
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{nil, metav1.ConditionTrue, enipamv1alpha1.ReasonFamiliesPooled, "pools carry IPv4"},
		{[]enipamv1alpha1.IPFamily{"IPv4"}, metav1.ConditionTrue, enipamv1alpha1.ReasonFamiliesPooled, "pools carry IPv4"},
		{[]enipamv1alpha1.IPFamily{"IPv6"}, metav1.ConditionFalse, enipamv1alpha1.ReasonIPv6NotPooled, "pools carry IPv4 only"},
		{[]enipamv1alpha1.IPFamily{"IPv6", "IPv4"}, metav1.ConditionFalse, enipamv1alpha1.ReasonIPv6NotPooled, "pools carry IPv4 only"},
		{[]enipamv1alpha1.IPFamily{"IPv4", "IPv6"}, metav1.ConditionFalse, enipamv1alpha1.ReasonIPv6NotPooled, "pools carry IPv4 only"},
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
