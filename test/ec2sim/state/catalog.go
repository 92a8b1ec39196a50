package state

import (
	"fmt"

	"github.com/enipam/enipam/operator/catalog"
)

// InstanceType is one entry of the instance-type catalog: the limits EC2
// enforces per network card and the facts DescribeInstanceTypes reports.
// It is package catalog's type, so the emulator and enipam-operator's
// built-in fallback read the same figures.
type InstanceType = catalog.InstanceType

// Catalog returns the built-in instance types, every current EC2 type
// (internal/instancetypes' generated table), sorted by name. The slice is a
// fresh copy on each call.
func Catalog() []InstanceType { return catalog.All() }

// buildCatalog merges extra entries over the built-in catalog.
func buildCatalog(extra []InstanceType) (map[string]*InstanceType, error) {
	out := map[string]*InstanceType{}
	for _, t := range append(Catalog(), extra...) {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("instance type %q: %w", t.Name, err)
		}
		out[t.Name] = &t
	}
	return out, nil
}
