package routing

import (
	"cmp"
	"slices"
)

// sortRoutesForDelete orders stale routes by table, default routes before
// the link routes their gateways rely on, so that a table is taken apart
// in the reverse of the order it was built in, and the plan is stable.
func sortRoutesForDelete(rs []Route) {
	slices.SortFunc(rs, func(a, b Route) int {
		return cmp.Or(
			cmp.Compare(a.Table, b.Table),
			cmp.Compare(a.Dst.Bits(), b.Dst.Bits()),
			a.Dst.Addr().Compare(b.Dst.Addr()),
			cmp.Compare(a.Metric, b.Metric),
			cmp.Compare(a.LinkIndex, b.LinkIndex),
		)
	})
}
