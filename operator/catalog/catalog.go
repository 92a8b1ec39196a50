// Package catalog is the table of EC2 instance types enipam knows without
// asking EC2: their vCPUs, memory, network cards, interfaces per card,
// addresses per interface and EFA support, as DescribeInstanceTypes
// publishes them. It is the one source of these figures for ec2sim (which
// emulates the types), enipam-operator (which falls back to them when
// DescribeInstanceTypes cannot answer) and enipam-max-pods.
package catalog

import (
	_ "embed"
	"fmt"
	"slices"
	"sort"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/enipam/enipam/operator/cloud"
)

//go:embed catalog.yaml
var catalogYAML []byte

// InstanceType is one entry of the catalog.
type InstanceType struct {
	Name      string `json:"name"`
	VCPUs     int    `json:"vcpus"`
	MemoryMiB int    `json:"memoryMiB"`
	// MaxENIs is the interface limit of each network card
	// (NetworkCards[].MaximumNetworkInterfaces); every card of a type in
	// the catalog has the same.
	MaxENIs int `json:"maxENIs"`
	// IPv4PerENI counts an ENI's IPv4 addresses, its primary included; a
	// delegated /28 takes one of them.
	IPv4PerENI int `json:"ipv4PerENI"`
	IPv6PerENI int `json:"ipv6PerENI"`
	// Hypervisor is "nitro" or "xen"; empty for bare metal.
	Hypervisor string `json:"hypervisor,omitempty"`
	BareMetal  bool   `json:"bareMetal,omitempty"`
	// NetworkCards is the number of network cards; 0 means 1.
	NetworkCards int `json:"networkCards,omitempty"`
	// MaxEFA is EfaInfo.MaximumEfaInterfaces; 0 when the type has no EFA.
	MaxEFA int `json:"maxEFA,omitempty"`
}

// Cards returns the number of network cards, at least 1.
func (t *InstanceType) Cards() int { return max(t.NetworkCards, 1) }

// MaxInterfaces is the instance-wide interface limit EC2 reports as
// NetworkInfo.MaximumNetworkInterfaces: every card's.
func (t *InstanceType) MaxInterfaces() int { return t.MaxENIs * t.Cards() }

// Validate says what is wrong with the entry, or nil.
func (t *InstanceType) Validate() error {
	switch {
	case t.Name == "":
		return fmt.Errorf("name is empty")
	case t.MaxENIs < 1 || t.MaxENIs > 128:
		return fmt.Errorf("maxENIs %d outside 1..128", t.MaxENIs)
	case t.IPv4PerENI < 1 || t.IPv4PerENI > 1000:
		return fmt.Errorf("ipv4PerENI %d outside 1..1000", t.IPv4PerENI)
	case t.IPv6PerENI < 0:
		return fmt.Errorf("ipv6PerENI %d is negative", t.IPv6PerENI)
	case t.Hypervisor != "" && t.Hypervisor != "nitro" && t.Hypervisor != "xen":
		return fmt.Errorf("hypervisor %q is neither nitro nor xen", t.Hypervisor)
	case t.NetworkCards < 0 || t.NetworkCards > 64:
		return fmt.Errorf("networkCards %d outside 0..64", t.NetworkCards)
	case t.MaxEFA < 0 || t.MaxEFA > t.MaxInterfaces():
		return fmt.Errorf("maxEFA %d outside 0..%d (the type's interfaces)", t.MaxEFA, t.MaxInterfaces())
	}
	return nil
}

// Limits returns the entry as the operator's domain type: the limits of
// network card 0, the only card enipam puts pod addresses on.
func (t *InstanceType) Limits() cloud.InstanceType {
	return cloud.InstanceType{
		Name: t.Name, MaxENIs: t.MaxENIs, IPv4PerENI: t.IPv4PerENI, IPv6PerENI: t.IPv6PerENI,
		Hypervisor: t.Hypervisor, BareMetal: t.BareMetal, VCPUs: t.VCPUs,
	}
}

// parsed decodes the embedded catalog once; it is read-only.
var parsed = sync.OnceValue(func() []InstanceType {
	var types []InstanceType
	if err := yaml.UnmarshalStrict(catalogYAML, &types); err != nil {
		// The catalog is compiled in and covered by tests.
		panic(fmt.Sprintf("catalog: embedded catalog.yaml: %v", err))
	}
	sort.Slice(types, func(i, j int) bool { return types[i].Name < types[j].Name })
	return types
})

// All returns every entry, sorted by name; the slice is a fresh copy.
func All() []InstanceType { return slices.Clone(parsed()) }

// Lookup returns the entry of the named type.
func Lookup(name string) (InstanceType, bool) {
	types := parsed()
	i, ok := slices.BinarySearchFunc(types, name, func(t InstanceType, name string) int {
		switch {
		case t.Name < name:
			return -1
		case t.Name > name:
			return 1
		}
		return 0
	})
	if !ok {
		return InstanceType{}, false
	}
	return types[i], true
}
