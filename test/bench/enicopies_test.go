package bench

import (
	"net/netip"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestCopiedENIs: a node's copy counts as seen only when its
// status.eni.enis lists every ENI of its spec.enis with the same
// addresses, and nothing more.
func TestCopiedENIs(t *testing.T) {
	addr := func(s string) ciliumip.Addr { return ciliumip.AddrFrom(netip.MustParseAddr(s)) }
	spec := []enipamv1alpha1.NodeENI{{ID: "eni-1", Addresses: []string{"10.0.1.5", "10.0.1.6"}}, {ID: "eni-2", Addresses: []string{"10.0.2.5"}}}
	full := map[string]awstypes.ENI{
		"eni-1": {ID: "eni-1", Addresses: []ciliumip.Addr{addr("10.0.1.6"), addr("10.0.1.5")}},
		"eni-2": {ID: "eni-2", Addresses: []ciliumip.Addr{addr("10.0.2.5")}},
	}
	if !copiedENIs(full, spec) {
		t.Error("a full copy, addresses in another order, not seen")
	}
	for name, status := range map[string]map[string]awstypes.ENI{
		"none":             nil,
		"the first ENI":    {"eni-1": full["eni-1"]},
		"an address fewer": {"eni-1": {ID: "eni-1", Addresses: []ciliumip.Addr{addr("10.0.1.5")}}, "eni-2": full["eni-2"]},
		"another address":  {"eni-1": {ID: "eni-1", Addresses: []ciliumip.Addr{addr("10.0.1.5"), addr("10.0.1.7")}}, "eni-2": full["eni-2"]},
		"an ENI more":      {"eni-1": full["eni-1"], "eni-2": full["eni-2"], "eni-3": {ID: "eni-3"}},
	} {
		if copiedENIs(status, spec) {
			t.Errorf("%s: taken for the copy", name)
		}
	}
	if copiedENIs(nil, nil) {
		t.Error("a node with no spec.enis taken for copied")
	}
}
