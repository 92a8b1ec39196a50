package routing

import (
	"context"
	"errors"
	"fmt"
)

// RPFilterRestorer is a Host that remembers the rp_filter values it
// replaced (kernel.Kernel with a state directory does) and can put them
// back.
type RPFilterRestorer interface {
	// RestoreRPFilter writes back the value each link had before the Host
	// first changed it, for every link that still holds the value the Host
	// wrote (a value changed since by someone else is theirs and stays),
	// then forgets every record. It returns the links written back.
	RestoreRPFilter() ([]RPFilterRestore, error)
}

// RPFilterRestore is one rp_filter written back by cleanup.
type RPFilterRestore struct {
	// Link is the link's name.
	Link string
	// From is the value enipam had set, To the one it had replaced.
	From, To int
}

// CleanupResult is what Cleanup found and removed.
type CleanupResult struct {
	// Plan is what was deleted: every owned rule and route, and the
	// connmark table if there was one.
	Plan Plan
	// RPFilter are the rp_filter values written back.
	RPFilter []RPFilterRestore
	// Ops counts every kernel operation, reads included.
	Ops Ops
}

// Empty reports whether cleanup found nothing of enipam's on the node.
func (r CleanupResult) Empty() bool { return r.Plan.Len() == 0 && len(r.RPFilter) == 0 }

// String sums the cleanup up for logs and events.
func (r CleanupResult) String() string {
	table := "no connmark table"
	if r.Plan.Connmark != nil {
		table = "the connmark table"
	}
	return fmt.Sprintf("%d rules, %d routes, %s and %d rp_filter values restored", len(r.Plan.DelRules), len(r.Plan.DelRoutes), table, len(r.RPFilter))
}

// Cleanup removes everything enipam owns on the node, as if it had never
// run: every owned rule (egress, ingress, connmark), every owned route of
// the ENI tables, the connmark table, and, if the Host remembers them, the
// rp_filter values it loosened. Nothing it does not own is touched, and
// neither are the links' MTU and state (harmless without routes, and gone
// with the ENIs). It is the converge of a node with no ENIs and connmark
// off, through the same Diff, so ownership has one definition. Rules go
// before the routes of the tables they point at. A node without anything
// of enipam's costs the reads only. Cleanup is idempotent; failing writes
// do not stop the others, and their *OpError are joined in the error.
func (c *Converger) Cleanup(ctx context.Context) (CleanupResult, error) {
	res := CleanupResult{Ops: Ops{}}
	rules, err := c.host.Rules()
	res.Ops[OpListRules]++
	if err != nil {
		return res, fmt.Errorf("listing rules, %w", err)
	}
	routes, err := c.host.Routes()
	res.Ops[OpListRoutes]++
	if err != nil {
		return res, fmt.Errorf("listing routes, %w", err)
	}
	var errs []error
	connmark, err := c.host.Connmark()
	res.Ops[OpGetConnmark]++
	keepConnmark := false
	if err != nil {
		// Rules and routes still go; the table is reported as not removed.
		errs = append(errs, fmt.Errorf("reading the connmark table, %w", err))
		keepConnmark = true
	}
	res.Plan = Diff(Desired{RPFilterAll: -1, KeepConnmark: keepConnmark}, rules, routes, connmark, c.cfg)
	f := newFailures()
	if err := c.apply(ctx, res.Plan, res.Ops, &f); err != nil {
		errs = append(errs, err)
	}
	if r, ok := c.host.(RPFilterRestorer); ok && ctx.Err() == nil {
		restored, err := r.RestoreRPFilter()
		res.RPFilter = restored
		res.Ops[OpSetRPFilter] += len(restored)
		if err != nil {
			errs = append(errs, fmt.Errorf("restoring rp_filter, %w", err))
		}
	}
	return res, errors.Join(errs...)
}
