package inventory

import (
	"context"
	"fmt"

	"github.com/enipam/enipam/operator/cloud"
)

// InstanceType returns the limits of an instance type: from the cache,
// else from DescribeInstanceTypes (concurrent callers share one call),
// else from the built-in table when EC2 cannot tell.
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
	if t, ok := fallbackTypes[name]; ok {
		inv.log.Warn("instance type limits from the built-in table", "instanceType", name, "describeError", err)
		return t, nil
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

// fallbackTypes are the network limits (card 0) of common instance types,
// used only when DescribeInstanceTypes cannot answer.
var fallbackTypes = func() map[string]cloud.InstanceType {
	m := map[string]cloud.InstanceType{}
	for _, t := range []cloud.InstanceType{
		{Name: "t3.micro", MaxENIs: 2, IPv4PerENI: 2, IPv6PerENI: 2},
		{Name: "t3.small", MaxENIs: 3, IPv4PerENI: 4, IPv6PerENI: 4},
		{Name: "t3.medium", MaxENIs: 3, IPv4PerENI: 6, IPv6PerENI: 6},
		{Name: "t3.large", MaxENIs: 3, IPv4PerENI: 12, IPv6PerENI: 12},
		{Name: "t3.xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "t3.2xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "m5.large", MaxENIs: 3, IPv4PerENI: 10, IPv6PerENI: 10},
		{Name: "m5.xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "m5.2xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "m5.4xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
		{Name: "m5.8xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
		{Name: "m5.12xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
		{Name: "m5.16xlarge", MaxENIs: 15, IPv4PerENI: 50, IPv6PerENI: 50},
		{Name: "m5.24xlarge", MaxENIs: 15, IPv4PerENI: 50, IPv6PerENI: 50},
		{Name: "m6i.large", MaxENIs: 3, IPv4PerENI: 10, IPv6PerENI: 10},
		{Name: "m6i.xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "m6i.2xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "m6i.4xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
		{Name: "m6i.8xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
		{Name: "m6i.16xlarge", MaxENIs: 15, IPv4PerENI: 50, IPv6PerENI: 50},
		{Name: "m6i.32xlarge", MaxENIs: 15, IPv4PerENI: 50, IPv6PerENI: 50},
		{Name: "c5.large", MaxENIs: 3, IPv4PerENI: 10, IPv6PerENI: 10},
		{Name: "c5.xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "c5.2xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "c5.4xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
		{Name: "c5.9xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
		{Name: "c5.18xlarge", MaxENIs: 15, IPv4PerENI: 50, IPv6PerENI: 50},
		{Name: "c6i.large", MaxENIs: 3, IPv4PerENI: 10, IPv6PerENI: 10},
		{Name: "c6i.xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "c6i.2xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "c6i.4xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
		{Name: "r5.large", MaxENIs: 3, IPv4PerENI: 10, IPv6PerENI: 10},
		{Name: "r5.xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "r5.2xlarge", MaxENIs: 4, IPv4PerENI: 15, IPv6PerENI: 15},
		{Name: "r5.4xlarge", MaxENIs: 8, IPv4PerENI: 30, IPv6PerENI: 30},
	} {
		t.Hypervisor = "nitro"
		m[t.Name] = t
	}
	return m
}()
