package ec2

// Action is an EC2 API action the adapter calls. Every call passes the
// chokepoint with one of these constants, its bucket and its metrics are
// keyed by it, and the IAM policy docs/iam/policy.json grants exactly Actions()
// (test/chart holds the two together).
type Action string

// The EC2 actions the adapter calls.
const (
	DescribeVpcs                    Action = "DescribeVpcs"
	DescribeSubnets                 Action = "DescribeSubnets"
	DescribeSecurityGroups          Action = "DescribeSecurityGroups"
	DescribeInstances               Action = "DescribeInstances"
	DescribeNetworkInterfaces       Action = "DescribeNetworkInterfaces"
	DescribeInstanceTypes           Action = "DescribeInstanceTypes"
	CreateNetworkInterface          Action = "CreateNetworkInterface"
	AttachNetworkInterface          Action = "AttachNetworkInterface"
	ModifyNetworkInterfaceAttribute Action = "ModifyNetworkInterfaceAttribute"
	// DetachNetworkInterface detaches a secondary ENI a node no longer
	// needs (consolidation), before it is deleted.
	DetachNetworkInterface Action = "DetachNetworkInterface"
	DeleteNetworkInterface Action = "DeleteNetworkInterface"
	// AssignPrivateIpAddresses adds addresses and prefixes, and moves a
	// static address between ENIs (AllowReassignment).
	AssignPrivateIpAddresses   Action = "AssignPrivateIpAddresses"
	UnassignPrivateIpAddresses Action = "UnassignPrivateIpAddresses"
	// AssignIpv6Addresses delegates IPv6 /80 prefixes (or addresses, on
	// types without prefix delegation) to dual-stack and IPv6 nodes' ENIs.
	AssignIpv6Addresses   Action = "AssignIpv6Addresses"
	UnassignIpv6Addresses Action = "UnassignIpv6Addresses"
	// The Elastic IPs of Cilium's node static IP and of static-IP claims.
	DescribeAddresses   Action = "DescribeAddresses"
	AssociateAddress    Action = "AssociateAddress"
	DisassociateAddress Action = "DisassociateAddress"
	// Elastic IPs allocated for static-IP claims (spec.publicIP.allocate),
	// and released with them.
	AllocateAddress Action = "AllocateAddress"
	ReleaseAddress  Action = "ReleaseAddress"
)

// actions are the EC2 actions the adapter calls.
var actions = []Action{
	DescribeVpcs, DescribeSubnets, DescribeSecurityGroups, DescribeInstances,
	DescribeNetworkInterfaces, DescribeInstanceTypes,
	CreateNetworkInterface, AttachNetworkInterface, ModifyNetworkInterfaceAttribute, DetachNetworkInterface,
	DeleteNetworkInterface, AssignPrivateIpAddresses, UnassignPrivateIpAddresses,
	AssignIpv6Addresses, UnassignIpv6Addresses,
	DescribeAddresses, AssociateAddress, DisassociateAddress,
	AllocateAddress, ReleaseAddress,
}

// Actions returns every EC2 action the adapter calls: what its IAM policy
// must allow.
func Actions() []Action { return append([]Action(nil), actions...) }
