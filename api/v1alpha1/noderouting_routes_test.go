package v1alpha1_test

import (
	"net/netip"
	"testing"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestRoutesAnswersForBothFamilies: eni-a reports 10.0.2.10, the /28
// 10.0.2.16/28, 2001:db8:2::10 and the /80 2001:db8:2:0:b::/80. Routes
// and Routed agree: each listed address and every address inside a
// listed prefix is routed on eni-a, of either family; nothing is on
// eni-b, and an address next to the /80 is not routed.
func TestRoutesAnswersForBothFamilies(t *testing.T) {
	s := enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{
		ID: "eni-a", IPs: []string{"10.0.2.10"}, Prefixes: []string{"10.0.2.16/28"},
		IPv6: []string{"2001:db8:2::10"}, IPv6Prefixes: []string{"2001:db8:2:0:b::/80"},
	}}}
	routed := s.Routed()
	for ip, want := range map[string]bool{
		"10.0.2.10": true, "10.0.2.20": true, "10.0.2.11": false,
		"2001:db8:2::10": true, "2001:db8:2:0:b:ffff:ffff:ffff": true, "2001:db8:2:0:c::1": false,
	} {
		if got := s.Routes("eni-a", ip); got != want {
			t.Errorf("Routes(eni-a, %s) = %v, want %v", ip, got, want)
		}
		if got := routed("eni-a", netip.MustParseAddr(ip)); got != want {
			t.Errorf("Routed()(eni-a, %s) = %v, want %v", ip, got, want)
		}
		if s.Routes("eni-b", ip) || routed("eni-b", netip.MustParseAddr(ip)) {
			t.Errorf("%s reported on eni-b", ip)
		}
	}
}
