package catalog_test

import (
	"testing"

	"github.com/enipam/enipam/operator/catalog"
)

// TestCatalogEntriesAreValid: every entry validates, names are unique and
// sorted, Lookup finds each, and the limits a user sees in AWS's tables
// come out: m5.large 3 ENIs of 10 addresses, p5.48xlarge 2 on card 0 of
// its 32 cards, bare metal without a hypervisor but with prefixes.
func TestCatalogEntriesAreValid(t *testing.T) {
	all := catalog.All()
	if len(all) < 60 {
		t.Fatalf("%d entries", len(all))
	}
	for i, it := range all {
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
		name                string
		maxENIs, ips, cards int
		prefixes, bareMetal bool
		hypervisor          string
	}{
		{"m5.large", 3, 10, 1, true, false, "nitro"},
		{"p5.48xlarge", 2, 50, 32, true, false, "nitro"},
		{"p4d.24xlarge", 15, 50, 4, true, false, "nitro"},
		{"m5.metal", 15, 50, 1, true, true, ""},
	} {
		it, _ := catalog.Lookup(c.name)
		l := it.Limits()
		if l.MaxENIs != c.maxENIs || l.IPv4PerENI != c.ips || it.Cards() != c.cards || l.PrefixDelegation() != c.prefixes ||
			l.BareMetal != c.bareMetal || l.Hypervisor != c.hypervisor {
			t.Errorf("%s: limits %+v, cards %d, prefixes %v", c.name, l, it.Cards(), l.PrefixDelegation())
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
