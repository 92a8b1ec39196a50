package cloud

import (
	"context"
	"net/netip"
)

// API is what the operator needs from EC2. Every method is one logical
// call (paginated describes count as one), safe for concurrent use, and
// returns a *Error carrying one of this package's sentinel errors when EC2
// refused.
type API interface {
	// DescribeVPC returns the VPC with its CIDR blocks.
	DescribeVPC(ctx context.Context, vpcID string) (VPC, error)
	// ListSubnets returns every subnet of the VPC.
	ListSubnets(ctx context.Context, vpcID string) ([]Subnet, error)
	// ListSecurityGroups returns every security group of the VPC.
	ListSecurityGroups(ctx context.Context, vpcID string) ([]SecurityGroup, error)
	// ListInstances returns the pending and running instances of the VPC.
	// known, when not nil, gives the caller's own view of an instance by
	// ID, as ListENIs' does of an ENI: an instance described Equal to it
	// is returned as that view, sharing its tags.
	ListInstances(ctx context.Context, vpcID string, known func(instanceID string) (Instance, bool)) ([]Instance, error)
	// ListENIs returns every ENI of the VPC. known, when not nil, gives
	// the caller's own view of an ENI by ID: an ENI described Equal to
	// it is returned as that view, sharing its lists and map, so that
	// while the list of a VPC whose ENIs did not change is built it holds
	// no second copy of them (the caller must not change a view it gave).
	ListENIs(ctx context.Context, vpcID string, known func(eniID string) (ENI, bool)) ([]ENI, error)
	// GetInstances returns the named instances that exist (unknown IDs are
	// left out, not an error), every ENI attached to them, and the
	// unattached ENIs tagged (TagInstance) for them.
	GetInstances(ctx context.Context, instanceIDs []string) ([]Instance, []ENI, error)
	// GetENIs describes the named ENIs; IDs EC2 does not know (or not
	// yet, under eventual consistency) are left out, not an error.
	GetENIs(ctx context.Context, eniIDs []string) ([]ENI, error)
	// InstanceTypes returns the limits of the named types; unknown names
	// are left out of the result.
	InstanceTypes(ctx context.Context, names []string) ([]InstanceType, error)

	// CreateENI creates an ENI (status available, not attached).
	CreateENI(ctx context.Context, req CreateENIRequest) (ENI, error)
	// AttachENI attaches an ENI at deviceIndex and returns the attachment
	// ID; the attachment completes asynchronously.
	AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error)
	// SetDeleteOnTermination makes EC2 delete the ENI with its instance.
	SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string) error
	// DetachENI starts detaching an ENI from its instance (EC2 completes
	// it asynchronously: the ENI is detaching, then available); it
	// returns ErrNotFound if the attachment is already gone.
	DetachENI(ctx context.Context, attachmentID string) error
	// DeleteENI deletes an unattached ENI; it returns ErrNotFound if the
	// ENI is already gone.
	DeleteENI(ctx context.Context, eniID string) error
	// AssignIPs assigns count new secondary addresses to the ENI and
	// returns them.
	AssignIPs(ctx context.Context, eniID string, count int) ([]netip.Addr, error)
	// AssignPrefixes delegates count new /28 prefixes to the ENI and
	// returns them.
	AssignPrefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error)
	// AssignAddresses assigns the named secondary addresses to the ENI,
	// all or none. With allowReassignment, an address another ENI holds
	// as a secondary address moves to this one (EC2's AllowReassignment:
	// one call, never on two ENIs); without, such an address is refused
	// with ErrInUse. An address the ENI already holds is refused with
	// ErrInvalid.
	AssignAddresses(ctx context.Context, eniID string, ips []netip.Addr, allowReassignment bool) error
	// UnassignIPs removes secondary addresses from the ENI. Addresses the
	// ENI no longer holds are not an error: the call is idempotent.
	UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error
	// UnassignPrefixes removes delegated prefixes from the ENI, whole.
	// Prefixes the ENI no longer holds are not an error.
	UnassignPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) error
	// AssignIPv6Prefixes delegates count new IPv6 /80 prefixes to the ENI
	// and returns them (AssignIpv6Addresses with Ipv6PrefixCount). A
	// subnet without an IPv6 CIDR, or a type without IPv6, is ErrInvalid;
	// past the type's IPv6PerENI, ErrIPLimit.
	AssignIPv6Prefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error)
	// AssignIPv6s assigns count new IPv6 addresses to the ENI and returns
	// them, for types that take no prefixes; errors as AssignIPv6Prefixes.
	AssignIPv6s(ctx context.Context, eniID string, count int) ([]netip.Addr, error)
	// UnassignIPv6Prefixes removes IPv6 prefixes from the ENI, whole.
	// Prefixes the ENI no longer holds are not an error.
	UnassignIPv6Prefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) error
	// UnassignIPv6s removes IPv6 addresses from the ENI. Addresses the
	// ENI no longer holds are not an error.
	UnassignIPv6s(ctx context.Context, eniID string, ips []netip.Addr) error

	// ListAddresses returns every Elastic IP of the account in the region
	// (DescribeAddresses has no pages).
	ListAddresses(ctx context.Context) ([]Address, error)
	// AssociateAddress maps the Elastic IP to privateIP on the ENI and
	// returns the association's ID. Unless reassociate is set, an address
	// already associated anywhere is refused with ErrInUse, so two writers
	// can never take the same address from each other.
	AssociateAddress(ctx context.Context, allocationID, eniID string, privateIP netip.Addr, reassociate bool) (string, error)
	// DisassociateAddress breaks an association; it returns ErrNotFound
	// if the association is already gone.
	DisassociateAddress(ctx context.Context, associationID string) error
	// AllocateAddress allocates a new Elastic IP carrying tags (tagged at
	// creation, in the same call); ErrAddressLimit when the account's
	// quota is reached. EC2 takes no idempotency token for it: a caller
	// that may lose the answer records its intent first and finds the
	// address again by its tags.
	AllocateAddress(ctx context.Context, tags map[string]string) (Address, error)
	// ReleaseAddress returns an Elastic IP to AWS; ErrNotFound if it is
	// already gone, ErrInUse while it is associated.
	ReleaseAddress(ctx context.Context, allocationID string) error
}
