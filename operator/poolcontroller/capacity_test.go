package poolcontroller

import (
	"testing"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestCountsOnly: a capacity that moved only in its used and free counts
// waits for the next counts write; any other change is written at once,
// counts or not.
func TestCountsOnly(t *testing.T) {
	base := enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 8, UsedIPs: 2, FreeIPs: 6, CanGrow: true, Subnets: []string{"subnet-a"}}
	for _, tc := range []struct {
		name string
		edit func(*enipamv1alpha1.NodeCapacity)
		want bool
	}{
		{"same", func(*enipamv1alpha1.NodeCapacity) {}, true},
		{"a pod started", func(c *enipamv1alpha1.NodeCapacity) { c.UsedIPs, c.FreeIPs = 3, 5 }, true},
		{"the pool grew", func(c *enipamv1alpha1.NodeCapacity) { c.PoolIPs, c.FreeIPs = 12, 10 }, false},
		{"addresses await routing", func(c *enipamv1alpha1.NodeCapacity) { c.Awaiting, c.UsedIPs = 4, 3 }, false},
		{"cannot grow", func(c *enipamv1alpha1.NodeCapacity) { c.CanGrow = false }, false},
		{"another subnet", func(c *enipamv1alpha1.NodeCapacity) { c.Subnets = []string{"subnet-b"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := base
			b.Subnets = append([]string(nil), base.Subnets...)
			tc.edit(&b)
			if got := countsOnly(&base, &b); got != tc.want {
				t.Errorf("countsOnly = %v, want %v", got, tc.want)
			}
		})
	}
}
