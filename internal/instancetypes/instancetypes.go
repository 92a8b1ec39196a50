// Package instancetypes is the table of every current EC2 instance type
// with the limits enipam and ec2sim need: interfaces per network card,
// addresses per interface, hypervisor, bare metal, EFA, trunking,
// architecture, vCPUs and memory. The table is generated (go generate) from
// published data committed under data/, whose README names each source,
// its commit and its license; nothing in it is kept by hand.
//
// operator/catalog (the operator's offline catalog, enipam max-pods) and
// ec2sim (DescribeInstanceTypes) read it; it imports nothing of enipam.
package instancetypes

import (
	"slices"
	"strings"
)

//go:generate go run ./gen -data data -out zz_generated.go

// Architectures as DescribeInstanceTypes names them
// (ProcessorInfo.SupportedArchitectures).
const (
	X86_64    = "x86_64"
	ARM64     = "arm64"
	X86_64Mac = "x86_64_mac"
	ARM64Mac  = "arm64_mac"
)

// NetworkCard is one network card of a type.
type NetworkCard struct {
	Index int
	// MaxENIs is the card's MaximumNetworkInterfaces.
	MaxENIs int
}

// Type is one instance type.
type Type struct {
	Name string
	// NetworkCards lists the cards by index; DefaultNetworkCard is the
	// index of the card the primary interface is on.
	NetworkCards       []NetworkCard
	DefaultNetworkCard int
	// IPv4PerENI counts an interface's IPv4 addresses, its primary
	// included. IPv6PerENI is 0 where the type has no IPv6.
	IPv4PerENI int
	IPv6PerENI int
	// Hypervisor is "nitro", "xen", or empty where EC2 reports none (bare
	// metal, and the few old types the source lists as unknown).
	Hypervisor string
	BareMetal  bool
	// MaxEFA is EfaInfo.MaximumEfaInterfaces; 0 when the type has no EFA.
	MaxEFA int
	// Trunking is whether the type can carry a trunk interface (security
	// groups for pods); BranchInterfaces the branch interfaces it then
	// takes. EC2's API does not publish these.
	Trunking         bool
	BranchInterfaces int
	// Architecture is one of the constants above.
	Architecture string
	// VCPUs and MemoryMiB are the defaults DescribeInstanceTypes reports;
	// 0 where no source publishes them (see data/README.md).
	VCPUs     int
	MemoryMiB int
}

// MaxENIs is the instance-wide interface limit, every card's
// (NetworkInfo.MaximumNetworkInterfaces).
func (t *Type) MaxENIs() int {
	n := 0
	for _, c := range t.NetworkCards {
		n += c.MaxENIs
	}
	return n
}

// CardENIs returns the interface limit of the card with the index, 0 when
// the type has no such card.
func (t *Type) CardENIs(index int) int {
	for _, c := range t.NetworkCards {
		if c.Index == index {
			return c.MaxENIs
		}
	}
	return 0
}

// All returns every type, sorted by name; the slice is a fresh copy (its
// entries share their NetworkCards, which callers must not change).
func All() []Type { return slices.Clone(table) }

// Len is the number of types.
func Len() int { return len(table) }

// Lookup returns the named type.
func Lookup(name string) (Type, bool) {
	i, ok := slices.BinarySearchFunc(table, name, func(t Type, name string) int { return strings.Compare(t.Name, name) })
	if !ok {
		return Type{}, false
	}
	return table[i], true
}
