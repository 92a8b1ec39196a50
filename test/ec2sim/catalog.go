package ec2sim

import (
	_ "embed"
	"fmt"
	"slices"
	"sort"
	"sync"

	"sigs.k8s.io/yaml"
)

//go:embed catalog.yaml
var catalogYAML []byte

// InstanceType is one entry of the instance-type catalog: the limits EC2
// enforces on network card 0 and the facts DescribeInstanceTypes reports.
type InstanceType struct {
	Name       string `json:"name"`
	VCPUs      int    `json:"vcpus"`
	MemoryMiB  int    `json:"memoryMiB"`
	MaxENIs    int    `json:"maxENIs"`
	IPv4PerENI int    `json:"ipv4PerENI"`
	IPv6PerENI int    `json:"ipv6PerENI"`
	// Hypervisor is "nitro" or "xen"; empty for bare metal.
	Hypervisor string `json:"hypervisor,omitempty"`
	BareMetal  bool   `json:"bareMetal,omitempty"`
}

func (t InstanceType) validate() error {
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
	}
	return nil
}

// parsedCatalog decodes the embedded catalog once; it is read-only.
var parsedCatalog = sync.OnceValue(func() []InstanceType {
	var types []InstanceType
	if err := yaml.UnmarshalStrict(catalogYAML, &types); err != nil {
		// The catalog is compiled in and covered by tests.
		panic(fmt.Sprintf("ec2sim: embedded catalog: %v", err))
	}
	sort.Slice(types, func(i, j int) bool { return types[i].Name < types[j].Name })
	return types
})

// Catalog returns the built-in instance types, sorted by name. The slice is
// a fresh copy on each call.
func Catalog() []InstanceType { return slices.Clone(parsedCatalog()) }

// buildCatalog merges extra entries over the built-in catalog.
func buildCatalog(extra []InstanceType) (map[string]*InstanceType, error) {
	out := map[string]*InstanceType{}
	for _, t := range append(Catalog(), extra...) {
		if err := t.validate(); err != nil {
			return nil, fmt.Errorf("instance type %q: %w", t.Name, err)
		}
		out[t.Name] = &t
	}
	return out, nil
}
