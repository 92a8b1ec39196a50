package inventory

import (
	"context"
	"fmt"

	"github.com/enipam/enipam/operator/catalog"
	"github.com/enipam/enipam/operator/cloud"
)

// InstanceType returns the limits of an instance type: from the cache,
// else from DescribeInstanceTypes (concurrent callers share one call),
// else from the built-in catalog (package catalog, the table ec2sim
// emulates) when EC2 cannot tell.
func (inv *Inventory) InstanceType(ctx context.Context, name string) (cloud.InstanceType, error) {
	if t, ok := inv.cachedType(name); ok {
		return t, nil
	}
	err := shared(&inv.typeGet, name, ctx, func(ctx context.Context) error {
		types, err := inv.api.InstanceTypes(ctx, []string{name})
		if err != nil {
			return err
		}
		inv.mu.Lock()
		defer inv.mu.Unlock()
		for _, t := range types {
			inv.types[t.Name] = t
		}
		return nil
	})
	if t, ok := inv.cachedType(name); ok {
		return t, nil
	}
	if t, ok := catalog.Lookup(name); ok {
		inv.log.Warn("instance type limits from the built-in catalog", "instanceType", name, "describeError", err)
		return t.Limits(), nil
	}
	if err != nil {
		return cloud.InstanceType{}, fmt.Errorf("instance type %s, %w", name, err)
	}
	return cloud.InstanceType{}, fmt.Errorf("instance type %s: %w", name, cloud.ErrNotFound)
}

func (inv *Inventory) cachedType(name string) (cloud.InstanceType, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	t, ok := inv.types[name]
	return t, ok
}
