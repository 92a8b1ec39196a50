package catalog_test

import (
	"testing"

	"github.com/enipam/enipam/internal/instancetypes"
	"github.com/enipam/enipam/operator/catalog"
)

// TestCatalogEntriesAreValid: the catalog is every type of the generated
// table; every entry validates, names are unique and sorted, Lookup finds
// each, and the limits a user sees in AWS's tables come out: m5.large 3
// ENIs of 10 addresses, p5.48xlarge 2 on card 0 of its 32 cards, bare
// metal without a hypervisor but with prefixes, Graviton as arm64, EFA on
// c6i and m6i's 32xlarge and metal sizes.
func TestCatalogEntriesAreValid(t *testing.T) {
	all := catalog.All()
	if len(all) != instancetypes.Len() || len(all) < 1300 {
		t.Fatalf("%d entries, the table has %d", len(all), instancetypes.Len())
	}
	for i, it := range all {
		// The catalog states one interface limit for every card: it must
		// be each card's in the table.
		src, _ := instancetypes.Lookup(it.Name)
		for _, c := range src.NetworkCards {
			if c.MaxENIs != it.MaxENIs {
				t.Errorf("%s: card %d has %d interfaces, the catalog says %d", it.Name, c.Index, c.MaxENIs, it.MaxENIs)
			}
		}
		if src.DefaultNetworkCard != 0 || it.MaxInterfaces() != src.MaxENIs() || it.Architecture != src.Architecture || it.MaxEFA != src.MaxEFA {
			t.Errorf("%s: %+v from %+v", it.Name, it, src)
		}
		if err := it.Validate(); err != nil {
			t.Errorf("%s: %v", it.Name, err)
		}
		if i > 0 && all[i-1].Name >= it.Name {
			t.Errorf("%s after %s", it.Name, all[i-1].Name)
		}
		if got, ok := catalog.Lookup(it.Name); !ok || got != it {
			t.Errorf("Lookup(%s) = %+v, %v", it.Name, got, ok)
		}
	}
	if _, ok := catalog.Lookup("m5.huge"); ok {
		t.Error("Lookup found m5.huge")
	}
	for _, c := range []struct {
		name                     string
		maxENIs, ips, cards, efa int
		prefixes, bareMetal      bool
		hypervisor, arch         string
	}{
		{"m5.large", 3, 10, 1, 0, true, false, "nitro", "x86_64"},
		{"p5.48xlarge", 2, 50, 32, 32, true, false, "nitro", "x86_64"},
		{"p4d.24xlarge", 15, 50, 4, 4, true, false, "nitro", "x86_64"},
		{"m5.metal", 15, 50, 1, 0, true, true, "", "x86_64"},
		{"c6i.32xlarge", 15, 50, 1, 1, true, false, "nitro", "x86_64"},
		{"c6i.metal", 15, 50, 1, 1, true, true, "", "x86_64"},
		{"m6i.32xlarge", 15, 50, 1, 1, true, false, "nitro", "x86_64"},
		{"m6i.metal", 15, 50, 1, 1, true, true, "", "x86_64"},
		{"m6g.large", 3, 10, 1, 0, true, false, "nitro", "arm64"},
		{"c7gn.16xlarge", 15, 50, 1, 1, true, false, "nitro", "arm64"},
		{"m4.large", 2, 10, 1, 0, false, false, "xen", "x86_64"},
	} {
		it, _ := catalog.Lookup(c.name)
		l := it.Limits()
		if l.MaxENIs != c.maxENIs || l.IPv4PerENI != c.ips || it.Cards() != c.cards || it.MaxEFA != c.efa || l.PrefixDelegation() != c.prefixes ||
			l.BareMetal != c.bareMetal || l.Hypervisor != c.hypervisor || it.Architecture != c.arch {
			t.Errorf("%s: %+v, limits %+v, cards %d, prefixes %v", c.name, it, l, it.Cards(), l.PrefixDelegation())
		}
	}
}

// TestValidateRefusesBadEntries: each rule names its field.
func TestValidateRefusesBadEntries(t *testing.T) {
	good := catalog.InstanceType{Name: "x.large", MaxENIs: 3, IPv4PerENI: 10}
	for _, bad := range []func(*catalog.InstanceType){
		func(t *catalog.InstanceType) { t.Name = "" },
		func(t *catalog.InstanceType) { t.MaxENIs = 0 },
		func(t *catalog.InstanceType) { t.IPv4PerENI = 0 },
		func(t *catalog.InstanceType) { t.IPv6PerENI = -1 },
		func(t *catalog.InstanceType) { t.Hypervisor = "kvm" },
		func(t *catalog.InstanceType) { t.NetworkCards = 65 },
		func(t *catalog.InstanceType) { t.MaxEFA = 4 },
		func(t *catalog.InstanceType) { t.Architecture = "amd64" },
	} {
		it := good
		bad(&it)
		if err := it.Validate(); err == nil {
			t.Errorf("%+v validated", it)
		}
	}
	if err := good.Validate(); err != nil {
		t.Errorf("good entry: %v", err)
	}
}
