// Package routing turns the ENIs and pool IPs of one node into the links,
// route tables and policy rules that make secondary-ENI pod IPs work, and
// converges the kernel towards them.
//
// The package is split in three steps, so that the logic is pure and
// tested without a kernel:
//
//   - Desired (desired.go) computes what the node should look like from a
//     Node and the links the kernel shows.
//   - Diff (plan.go) compares that with what the kernel has and what enipam
//     owns (ownership.go), and yields a Plan: the minimal set of changes.
//   - Converger (converge.go) reads the kernel through a Host, plans, and
//     applies the plan through the same Host.
//
// Layout on the node, for an ENI with device number n on a subnet whose
// gateway is g, and each pool IP p living on that ENI:
//
//	table 10+n:  g/32 dev <link> scope link        proto enipam
//	             default via g dev <link>          proto enipam
//	rule:        from p/32 lookup 10+n  (egress priority,  proto enipam)
//	rule:        to p/32 lookup main    (ingress priority, proto enipam; optional)
//
// enipam owns a route or rule iff it carries enipam's protocol number and
// lives in enipam's table range (or is an ingress rule into main); nothing
// else is ever changed or removed.
package routing
