// Package catalog is the table of EC2 instance types enipam knows without
// asking EC2: every current type (Graviton included) with its vCPUs,
// memory, network cards, interfaces per card, addresses per interface,
// EFA support and architecture, as DescribeInstanceTypes publishes them.
// Its figures are internal/instancetypes' table, generated from published
// data (internal/instancetypes/data/README.md), never kept by hand. It is
// the one source of these figures for ec2sim (which emulates the types),
// enipam-operator (which falls back to them when DescribeInstanceTypes
// cannot answer) and enipam max-pods.
package catalog

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/enipam/enipam/internal/instancetypes"
	"github.com/enipam/enipam/operator/cloud"
)

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
	// Architecture is ProcessorInfo.SupportedArchitectures' one entry:
	// x86_64, arm64, x86_64_mac or arm64_mac; empty means x86_64.
	Architecture string `json:"architecture,omitempty"`
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
	case !slices.Contains(architectures, t.Architecture):
		return fmt.Errorf("architecture %q is none of x86_64, arm64, x86_64_mac, arm64_mac", t.Architecture)
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

var architectures = []string{"", instancetypes.X86_64, instancetypes.ARM64, instancetypes.X86_64Mac, instancetypes.ARM64Mac}

// fromTable is a type of the generated table as a catalog entry. Every
// card of a type in the table has as many interfaces as its default card
// (catalog_test checks it), which MaxENIs stands for.
func fromTable(t *instancetypes.Type) InstanceType {
	it := InstanceType{
		Name: t.Name, VCPUs: t.VCPUs, MemoryMiB: t.MemoryMiB,
		MaxENIs: t.CardENIs(t.DefaultNetworkCard), IPv4PerENI: t.IPv4PerENI, IPv6PerENI: t.IPv6PerENI,
		Hypervisor: t.Hypervisor, BareMetal: t.BareMetal, MaxEFA: t.MaxEFA, Architecture: t.Architecture,
	}
	if n := len(t.NetworkCards); n > 1 {
		it.NetworkCards = n
	}
	return it
}

// entries converts the generated table once; it is read-only and sorted by
// name, as the table is.
var entries = sync.OnceValue(func() []InstanceType {
	all := instancetypes.All()
	out := make([]InstanceType, len(all))
	for i := range all {
		out[i] = fromTable(&all[i])
	}
	return out
})

// All returns every entry, sorted by name; the slice is a fresh copy.
func All() []InstanceType { return slices.Clone(entries()) }

// Lookup returns the entry of the named type.
func Lookup(name string) (InstanceType, bool) {
	types := entries()
	i, ok := slices.BinarySearchFunc(types, name, func(t InstanceType, name string) int { return strings.Compare(t.Name, name) })
	if !ok {
		return InstanceType{}, false
	}
	return types[i], true
}
