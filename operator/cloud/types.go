// Package cloud is the operator's port to the cloud: the domain types of
// EC2's networking (instances, ENIs, subnets, security groups, instance
// types), the API the operator needs from it, and the typed errors that API
// returns. Only the adapter (package ec2) sees SDK types; the scheduler and
// the node agent may import this package.
package cloud

import (
	"maps"
	"net/netip"
	"slices"
)

// InstanceType holds the networking limits of one EC2 instance type, for
// network card 0.
type InstanceType struct {
	Name string
	// MaxENIs is the number of ENIs the instance may have, the primary
	// included.
	MaxENIs int
	// IPv4PerENI is the number of private IPv4 addresses one ENI may hold,
	// its primary address included; a /28 prefix takes one of these slots.
	IPv4PerENI int
	// IPv6PerENI is the number of IPv6 addresses one ENI may hold
	// (Ipv6AddressesPerInterface); a /80 prefix takes one of these slots.
	// Zero: the type has no IPv6 (Ipv6Supported false).
	IPv6PerENI int
	// Hypervisor is "nitro" or "xen"; empty for bare metal.
	Hypervisor string
	BareMetal  bool
	// VCPUs is the default vCPU count; pod density recommendations scale
	// with it (enipam max-pods).
	VCPUs int
}

// PrefixDelegation reports whether EC2 delegates /28 prefixes to the
// type's ENIs: nitro and bare metal instances, the rule of Cilium's
// (*Node).IsPrefixDelegated in pkg/aws/ipam/node.go.
func (t *InstanceType) PrefixDelegation() bool { return t.Hypervisor == "nitro" || t.BareMetal }

// Instance is an EC2 instance as the operator needs it.
type Instance struct {
	ID        string
	Type      string
	AZ        string
	VPCID     string
	SubnetID  string
	PrivateIP netip.Addr
	// State is EC2's instance state name: pending, running, stopping,
	// stopped, shutting-down, terminated.
	State string
	Tags  map[string]string
}

// Equal reports whether i and o describe the same instance in every
// field (a nil and an empty map being the same).
func (i *Instance) Equal(o *Instance) bool {
	return i.ID == o.ID && i.Type == o.Type && i.AZ == o.AZ && i.VPCID == o.VPCID && i.SubnetID == o.SubnetID &&
		i.PrivateIP == o.PrivateIP && i.State == o.State && maps.Equal(i.Tags, o.Tags)
}

// Untagged is i without its tags, as the inventory keeps an instance:
// nothing reads an instance's tags (a Name tag alone cost ~330 bytes an
// instance).
func (i Instance) Untagged() Instance {
	i.Tags = nil
	return i
}

// Live reports whether the instance can carry pods (pending or running).
func (i *Instance) Live() bool { return i.State == "pending" || i.State == "running" }

// ENI statuses as EC2 reports them.
const (
	ENIAvailable = "available"
	ENIInUse     = "in-use"
	ENIAttaching = "attaching"
	ENIDetaching = "detaching"
)

// Attachment states as EC2 reports them.
const (
	AttachmentAttaching = "attaching"
	AttachmentAttached  = "attached"
	AttachmentDetaching = "detaching"
)

// ENI is an elastic network interface.
type ENI struct {
	ID          string
	MAC         string
	Description string
	SubnetID    string
	VPCID       string
	AZ          string
	// Status is available, attaching, in-use or detaching.
	Status string
	// InstanceID, DeviceIndex and AttachmentID describe the attachment;
	// InstanceID is empty when the ENI is not attached.
	InstanceID          string
	DeviceIndex         int
	AttachmentID        string
	DeleteOnTermination bool
	// RequesterManaged ENIs belong to an AWS service; never touch them.
	// (Next to DeleteOnTermination: the two flags share a word, and the
	// struct fits 352 bytes instead of 384.)
	RequesterManaged bool
	// AttachmentStatus is EC2's attachment state: attaching, attached,
	// detaching; empty when not attached. Addresses of an ENI reach pods
	// only once it is attached (and routed on the node).
	AttachmentStatus string
	// PrimaryIP is the ENI's own address; it never carries pods.
	PrimaryIP netip.Addr
	// IPs are the secondary private IPv4 addresses.
	IPs []netip.Addr
	// Prefixes are delegated IPv4 prefixes (/28).
	Prefixes []netip.Prefix
	// IPv6s are the ENI's IPv6 addresses and IPv6Prefixes its delegated
	// IPv6 prefixes (/80); both count against the type's IPv6PerENI.
	IPv6s          []netip.Addr
	IPv6Prefixes   []netip.Prefix
	SecurityGroups []string
	Tags           map[string]string
	// InterfaceType is EC2's interfaceType: "interface" (or empty) for an
	// ordinary ENI; efa, trunk, branch and the others never carry pod
	// addresses.
	InterfaceType string
	// NetworkCard is the attachment's network card index; enipam uses
	// card 0 only.
	NetworkCard int
}

// Ordinary reports whether the ENI is a plain ENI (interface type
// "interface") on network card 0, the only kind that carries pod
// addresses.
func (e *ENI) Ordinary() bool {
	return (e.InterfaceType == "" || e.InterfaceType == "interface") && e.NetworkCard == 0
}

// Slots is how many of the ENI's IPv4 slots are taken: the primary
// address, each secondary address and each prefix.
func (e *ENI) Slots() int { return 1 + len(e.IPs) + len(e.Prefixes) }

// IPv6Slots is how many of the ENI's IPv6 slots are taken: each IPv6
// address and each /80 prefix.
func (e *ENI) IPv6Slots() int { return len(e.IPv6s) + len(e.IPv6Prefixes) }

// HasIP reports whether ip is one of the ENI's secondary addresses or lies
// in one of its prefixes, of either family.
func (e *ENI) HasIP(ip netip.Addr) bool {
	if slices.Contains(e.IPs, ip) || slices.Contains(e.IPv6s, ip) {
		return true
	}
	for _, p := range e.Prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	for _, p := range e.IPv6Prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Equal reports whether e and o describe the same ENI in every field (a
// nil and an empty list or map being the same).
func (e *ENI) Equal(o *ENI) bool {
	return e.ID == o.ID && e.MAC == o.MAC && e.Description == o.Description &&
		e.SubnetID == o.SubnetID && e.VPCID == o.VPCID && e.AZ == o.AZ && e.Status == o.Status &&
		e.InstanceID == o.InstanceID && e.DeviceIndex == o.DeviceIndex && e.AttachmentID == o.AttachmentID &&
		e.DeleteOnTermination == o.DeleteOnTermination && e.AttachmentStatus == o.AttachmentStatus &&
		e.PrimaryIP == o.PrimaryIP && slices.Equal(e.IPs, o.IPs) && slices.Equal(e.Prefixes, o.Prefixes) &&
		slices.Equal(e.IPv6s, o.IPv6s) && slices.Equal(e.IPv6Prefixes, o.IPv6Prefixes) &&
		slices.Equal(e.SecurityGroups, o.SecurityGroups) && maps.Equal(e.Tags, o.Tags) &&
		e.RequesterManaged == o.RequesterManaged && e.InterfaceType == o.InterfaceType && e.NetworkCard == o.NetworkCard
}

// Clone returns a deep copy.
func (e ENI) Clone() ENI {
	e.IPs = slices.Clone(e.IPs)
	e.Prefixes = slices.Clone(e.Prefixes)
	e.IPv6s = slices.Clone(e.IPv6s)
	e.IPv6Prefixes = slices.Clone(e.IPv6Prefixes)
	e.SecurityGroups = slices.Clone(e.SecurityGroups)
	e.Tags = maps.Clone(e.Tags)
	return e
}

// Subnet is a VPC subnet.
type Subnet struct {
	ID    string
	VPCID string
	AZ    string
	CIDR  netip.Prefix
	// IPv6CIDR is the subnet's IPv6 /64; not valid (IsValid false) when
	// the subnet has none, and then its ENIs can hold no IPv6.
	IPv6CIDR netip.Prefix
	// Available is EC2's availableIpAddressCount (IPv4).
	Available int
	Tags      map[string]string
}

// SecurityGroup is a VPC security group.
type SecurityGroup struct {
	ID    string
	Name  string
	VPCID string
	Tags  map[string]string
}

// VPC is a virtual private cloud with its IPv4 CIDR blocks, primary first,
// and its associated IPv6 CIDR blocks (none for an IPv4-only VPC).
type VPC struct {
	ID        string
	CIDRs     []netip.Prefix
	IPv6CIDRs []netip.Prefix
}

// CreateENIRequest asks for a new ENI carrying its pod addresses.
type CreateENIRequest struct {
	SubnetID       string
	SecurityGroups []string
	Description    string
	Tags           map[string]string
	// SecondaryIPs or Prefixes (not both) are assigned at creation, so a
	// new ENI costs no extra Assign call.
	SecondaryIPs int
	Prefixes     int
	// IPv6Addresses or IPv6Prefixes (/80s; not both) are assigned at
	// creation too, in a subnet with an IPv6 CIDR.
	IPv6Addresses int
	IPv6Prefixes  int
	// ClientToken makes the call idempotent: a retry with the same token
	// returns the ENI the first attempt created.
	ClientToken string
}

// MatchTags reports whether tags holds every key of want with its value;
// an empty want matches nothing (a filter that selects nothing by accident
// would select everything).
func MatchTags(tags, want map[string]string) bool {
	if len(want) == 0 {
		return false
	}
	for k, v := range want {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Address is an Elastic IP: a public IPv4 address of the account, mapped
// (associated) to at most one private address of one ENI.
type Address struct {
	// AllocationID names the Elastic IP (eipalloc-...).
	AllocationID string
	PublicIP     netip.Addr
	// AssociationID is set while the address is associated; ENIID,
	// PrivateIP and InstanceID (when the ENI is attached) name where.
	AssociationID string
	ENIID         string
	PrivateIP     netip.Addr
	InstanceID    string
	Tags          map[string]string
}

// Associated reports whether the address is mapped to an ENI.
func (a *Address) Associated() bool { return a.AssociationID != "" }
