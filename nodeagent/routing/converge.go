package routing

import (
	"context"
	"errors"
	"fmt"
)

// Names of the kernel operations, as counted in Ops and named in OpError.
const (
	OpListLinks    = "list_links"
	OpListRules    = "list_rules"
	OpListRoutes   = "list_routes"
	OpGetRPFilter  = "get_rp_filter"
	OpSetMTU       = "set_mtu"
	OpSetUp        = "set_up"
	OpSetRPFilter  = "set_rp_filter"
	OpReplaceRoute = "replace_route"
	OpDelRoute     = "del_route"
	OpAddRule      = "add_rule"
	OpDelRule      = "del_rule"
)

// Ops counts the kernel operations of one converge, by Op* name.
type Ops map[string]int

// Total is the number of kernel operations, reads included.
func (o Ops) Total() int {
	n := 0
	for _, v := range o {
		n += v
	}
	return n
}

// Netlink is the number of netlink requests: everything but the rp_filter
// sysctls.
func (o Ops) Netlink() int {
	return o.Total() - o[OpGetRPFilter] - o[OpSetRPFilter]
}

// Writes is the number of kernel changes attempted.
func (o Ops) Writes() int {
	return o.Total() - o[OpListLinks] - o[OpListRules] - o[OpListRoutes] - o[OpGetRPFilter]
}

// Result is what one converge found and did.
type Result struct {
	// ENIs is the number of managed ENIs whose link was found and set up.
	ENIs int
	// Rules and Routes are how many enipam-owned rules and routes the node
	// should now hold.
	Rules, Routes int
	// Missing are the managed ENIs whose link the kernel does not show.
	Missing []ENI
	// Problems are ENIs that cannot be routed (*ENIError).
	Problems []error
	// Plan is what was applied.
	Plan Plan
	// Ops counts every kernel operation, reads included.
	Ops Ops
}

// Converger brings the kernel in line with a Node. It is not safe for
// concurrent use: one agent runs one converge at a time.
type Converger struct {
	host Host
	cfg  Config
}

// NewConverger returns a Converger acting on host; cfg must be valid.
func NewConverger(host Host, cfg Config) *Converger {
	return &Converger{host: host, cfg: cfg}
}

// Converge reads links, rules and routes (three netlink dumps) and the
// managed links' rp_filter (one sysctl visit), computes the desired state of
// node, and applies the difference. A node already in shape costs those
// four reads and nothing else; one new pool IP costs one
// more write per rule it needs. Failing writes do not stop the others: the
// error joins an *OpError per failure, and the Result still says what was
// attempted. Reading errors stop the converge before any change.
func (c *Converger) Converge(ctx context.Context, node Node) (Result, error) {
	res := Result{Ops: Ops{}}
	links, err := c.host.Links()
	res.Ops[OpListLinks]++
	if err != nil {
		return res, fmt.Errorf("listing links, %w", err)
	}
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

	d := ComputeDesired(node, links, c.cfg)
	if len(d.Links) > 0 {
		names := make([]string, len(d.Links))
		for i, w := range d.Links {
			names[i] = w.Link.Name
		}
		rp, err := c.host.RPFilter(names)
		res.Ops[OpGetRPFilter]++
		if err != nil {
			return res, fmt.Errorf("reading rp_filter, %w", err)
		}
		for i := range d.Links {
			if v, ok := rp[d.Links[i].Link.Name]; ok {
				d.Links[i].Link.RPFilter = v
			}
		}
	}
	res.ENIs, res.Rules, res.Routes = len(d.Links), len(d.Rules), len(d.Routes)
	res.Missing, res.Problems = d.Missing, d.Problems
	res.Plan = Diff(d, rules, routes, c.cfg)
	return res, c.apply(ctx, res.Plan, res.Ops)
}

// apply runs the plan in its order, counting each write in ops.
func (c *Converger) apply(ctx context.Context, p Plan, ops Ops) error {
	var errs []error
	do := func(op, object string, tolerated error, f func() error) {
		if ctx.Err() != nil {
			return
		}
		ops[op]++
		if err := f(); err != nil && (tolerated == nil || !errors.Is(err, tolerated)) {
			errs = append(errs, &OpError{Op: op, Object: object, Err: err})
		}
	}
	for _, l := range p.Links {
		obj := fmt.Sprintf("link %s (ENI %s)", l.Link.Name, l.ENI)
		if l.MTU != 0 {
			do(OpSetMTU, obj, nil, func() error { return c.host.SetLinkMTU(l.Link, l.MTU) })
		}
		if l.Up {
			do(OpSetUp, obj, nil, func() error { return c.host.SetLinkUp(l.Link) })
		}
		if l.RPFilter >= 0 {
			do(OpSetRPFilter, obj, nil, func() error { return c.host.SetRPFilter(l.Link, l.RPFilter) })
		}
	}
	for _, r := range p.ReplaceRoutes {
		do(OpReplaceRoute, r.String(), nil, func() error { return c.host.ReplaceRoute(r) })
	}
	for _, r := range p.AddRules {
		do(OpAddRule, r.String(), ErrExist, func() error { return c.host.AddRule(r) })
	}
	for _, r := range p.DelRules {
		do(OpDelRule, r.String(), ErrNotFound, func() error { return c.host.DelRule(r) })
	}
	for _, r := range p.DelRoutes {
		do(OpDelRoute, r.String(), ErrNotFound, func() error { return c.host.DelRoute(r) })
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
