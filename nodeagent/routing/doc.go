// Package routing turns the ENIs and pod addresses of one node into the
// links, route tables and policy rules that make them work, and converges
// the kernel towards them.
//
// The package is split in three steps, so that the logic is pure and
// tested without a kernel:
//
//   - ComputeDesired (desired.go) computes what the node should look like
//     from a Node and the links the kernel shows.
//   - Diff (plan.go) compares that with what the kernel has and what enipam
//     owns (ownership.go), and yields a Plan: the minimal set of changes.
//   - Converger (converge.go) reads the kernel through a Host, plans,
//     applies the plan through the same Host, and reports what is routed.
//
// Layout on the node, for an ENI with device number n on a subnet whose
// gateway is g, and each address or delegated prefix p living on it:
//
//	table 10+n:  g/32 dev <link> scope link        proto enipam
//	             default via g dev <link>          proto enipam
//	rule:        from p lookup 10+n               (egress priority, egress mode all)
//	             from p to <vpc cidr> lookup 10+n (egress priority, one per VPC CIDR, egress mode vpc)
//	rule:        to p lookup main                  (ingress priority; optional)
//	rule:        fwmark 0x80/0x80 lookup main      (egress priority - 2; connmark on)
//
// An IPv6 address or delegated /80 prefix p on a secondary ENI n gets the
// same table and rules in the IPv6 lists, with the VPC's IPv6 router
// (IPv6Gateway, fe80:ec2::1) as next hop; its egress rule is always
// `from p lookup 10+n`, whatever the egress mode (IPv6 is not
// masqueraded on AWS). The table's IPv6 routes exist only while the ENI
// routes an IPv6 address:
//
//	table 10+n:  fe80:ec2::1/128 dev <link>        proto enipam metric 1024
//	             default via fe80:ec2::1 dev <link> proto enipam metric 1024
//	rule:        from p lookup 10+n                (egress priority)
//	rule:        to p lookup main                  (ingress priority; optional)
//
// The primary ENI's IPv6 addresses and prefixes get nothing: the main
// table's default route (learned from the router advertisement on the
// primary interface) already sends them out of the ENI that holds them,
// as the VPC CNI's IPv6 mode relies on. The connmark return path is IPv4
// only.
//
// Secondary ENI links get the MTU, are brought up and get loose rp_filter;
// the primary ENI (n = 0, table 10) gets its table and rules only, and,
// with connmark on, its link's rp_filter loosened if it is strict.
//
// enipam owns a route or rule iff it carries enipam's protocol number and
// lives in enipam's table range (or is an ingress or fwmark rule into
// main), and the nf_tables table "enipam" whole; nothing else is ever
// changed or removed.
package routing
