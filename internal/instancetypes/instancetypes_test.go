package instancetypes_test

import (
	"testing"

	"github.com/enipam/enipam/internal/instancetypes"
)

// TestTable: over 1 300 types, sorted and unique, each found by Lookup,
// with sane limits; and figures a user can check in AWS's tables.
func TestTable(t *testing.T) {
	all := instancetypes.All()
	if len(all) < 1300 || len(all) != instancetypes.Len() {
		t.Fatalf("%d types (Len %d)", len(all), instancetypes.Len())
	}
	arch := map[string]int{}
	for i, it := range all {
		if i > 0 && all[i-1].Name >= it.Name {
			t.Errorf("%s after %s", it.Name, all[i-1].Name)
		}
		if got, ok := instancetypes.Lookup(it.Name); !ok || got.Name != it.Name {
			t.Errorf("Lookup(%s) = %v", it.Name, ok)
		}
		if it.CardENIs(it.DefaultNetworkCard) < 1 || it.IPv4PerENI < 1 || it.MaxEFA > it.MaxENIs() ||
			(it.IPv6PerENI != 0 && it.IPv6PerENI != it.IPv4PerENI) || (!it.Trunking && it.BranchInterfaces != 0) {
			t.Errorf("%+v", it)
		}
		arch[it.Architecture]++
	}
	if arch[instancetypes.ARM64] < 300 || arch[instancetypes.X86_64] < 800 || len(arch) != 4 {
		t.Errorf("architectures %v", arch)
	}
	if _, ok := instancetypes.Lookup("m5.huge"); ok {
		t.Error("m5.huge found")
	}
	for _, c := range []struct {
		name                     string
		card0, total, ipv4, efa  int
		hypervisor, architecture string
		bareMetal                bool
	}{
		{"m5.large", 3, 3, 10, 0, "nitro", "x86_64", false},
		{"t4g.medium", 3, 3, 6, 0, "nitro", "arm64", false},
		{"m7g.16xlarge", 15, 15, 50, 1, "nitro", "arm64", false},
		{"p5.48xlarge", 2, 64, 50, 32, "nitro", "x86_64", false},
		{"c6i.32xlarge", 15, 15, 50, 1, "nitro", "x86_64", false},
		{"m6i.metal", 15, 15, 50, 1, "", "x86_64", true},
		{"m4.large", 2, 2, 10, 0, "xen", "x86_64", false},
	} {
		it, ok := instancetypes.Lookup(c.name)
		if !ok || it.CardENIs(0) != c.card0 || it.MaxENIs() != c.total || it.IPv4PerENI != c.ipv4 || it.MaxEFA != c.efa ||
			it.Hypervisor != c.hypervisor || it.Architecture != c.architecture || it.BareMetal != c.bareMetal {
			t.Errorf("%s: %+v (found %v)", c.name, it, ok)
		}
	}
}
