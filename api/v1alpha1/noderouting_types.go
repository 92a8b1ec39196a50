package v1alpha1

import (
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Field managers of the NodeRouting's two writers. Each writes its part
// by server-side apply under its own name, so the object's managedFields
// name the one writer of every field, and a field a writer stops
// applying is removed.
const (
	// FieldManagerOperator is enipam-operator: a NodeRouting's whole spec,
	// its owner reference to the CiliumNode and NodeStaticIPFinalizer.
	FieldManagerOperator = "enipam-operator"
	// FieldManagerAgent is a node's enipam-agent: its NodeRouting's whole
	// status.
	FieldManagerAgent = "enipam-agent"
)

// NodeRouting is the contract between enipam-operator and the enipam-agent
// of one node, named after the node. One writer per field, each applying
// its whole part under its field manager:
//
//   - the operator (FieldManagerOperator) creates the object and writes
//     the spec, every field of it: what the agent must route there under
//     the node's policy, and everything the operator decides and acts on
//     (the node's capacity, its Elastic IP record, its queries). The agent
//     has no RBAC on the main resource, so it cannot change any of it;
//   - the agent of that node (FieldManagerAgent), and no other, writes the
//     status, every field of it, through the status subresource: what it
//     observed, the ENIs and addresses it has routed. The chart's
//     ValidatingAdmissionPolicy refuses the write of an agent whose
//     service-account token names another node. The operator writes
//     nothing there.
//
// An address enters the node's CiliumNode pool only once this status lists
// it on an ENI EC2 shows on the node's instance, so no pod is ever given an
// address its node cannot route yet.
//
// It lives apart from the CiliumNode because Cilium's agent rewrites that
// object's metadata on every start (nodediscovery's mutateNodeResource), so
// nothing either enipam component keeps there would survive.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nrt,categories=enipam
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Instance",type=string,JSONPath=`.spec.instanceID`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="ENIs",type=integer,JSONPath=`.status.routedENIs`
// +kubebuilder:printcolumn:name="IPs",type=integer,JSONPath=`.status.routedIPs`
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.spec.capacity.freeIPs`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.spec.capacity.usedIPs`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.capacity.maxIPs`
// +kubebuilder:printcolumn:name="Can-Grow",type=boolean,JSONPath=`.spec.capacity.canGrow`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeRouting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeRoutingSpec   `json:"spec,omitempty"`
	Status NodeRoutingStatus `json:"status,omitempty"`
}

// NodeRoutingSpec is written by enipam-operator only (FieldManagerOperator,
// one server-side apply of the whole spec per reconcile that changes it,
// the first one creating the object, and one ahead of an Elastic IP's
// association, which must be recorded before EC2 is asked; the record's
// release, which must not make a deleted object again, is a merge patch
// removing it and the finalizer under an optimistic lock): what it asks
// of the node's agent (the node's ENIs to route, and the effective values
// of the node's policy that decide which of them carry pod addresses),
// and its own word on the node (capacity, Elastic IP record), which it
// alone acts on. The addresses pods may get are in the CiliumNode's
// spec.ipam.pool.
type NodeRoutingSpec struct {
	// InstanceID is the EC2 instance the operator serves for this node.
	// +optional
	InstanceID string `json:"instanceID,omitempty"`

	// FirstInterfaceIndex is the lowest device index whose ENI carries pod
	// addresses.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=127
	FirstInterfaceIndex int32 `json:"firstInterfaceIndex"`

	// ExcludeInterfaceTags: ENIs carrying all of these tags carry no pod
	// addresses and their links are never touched.
	// +optional
	ExcludeInterfaceTags map[string]string `json:"excludeInterfaceTags,omitempty"`

	// ENIs are the instance's ENIs the node's agent routes, as EC2 shows
	// them: every ordinary ENI of network card 0 attached or attaching to
	// it (a detaching one is no longer listed), with its addresses,
	// whether pooled yet or not. This list is authoritative: the agent
	// routes it, each entry winning over an entry of the same ENI in the
	// CiliumNode's status.eni.enis. That status, Cilium's own field, holds
	// a copy only where something reads it: an agent that does not report
	// status.routesSpecENIs (an earlier version, which routes only what it
	// lists), a NodeRouting CRD without this field, or enipam-scheduler
	// where a static address concerns the node; elsewhere the operator
	// leaves it empty, and clears a copy once the agent reports routing
	// this list at a generation that lists every ENI of it. The agent
	// routes the union of both lists: an operator of an earlier version
	// writes only the status.
	// +listType=map
	// +listMapKey=id
	// +optional
	ENIs []NodeENI `json:"enis,omitempty"`

	// Capacity is how far the node's pool can grow, for schedulers and
	// people; written by the operator on every change.
	// +optional
	Capacity *NodeCapacity `json:"capacity,omitempty"`

	// StaticIP is the Elastic IP the operator associated with the node's
	// primary address for Cilium's spec.ipam.static-ip-tags, written by
	// the operator before it asks EC2, so that the association is found
	// and released whatever happens to the process (see
	// NodeStaticIPFinalizer). The operator disassociates what this names,
	// so it lives where no node can write.
	// +optional
	StaticIP *NodeStaticIP `json:"staticIP,omitempty"`

	// EndpointQueries are addresses the operator asks the node's agent
	// about: whether a pod endpoint on the node still holds them (see
	// EndpointReport). The operator lists a claimed address here only
	// while it leaves the node and after it has seen the pod that held
	// it gone from the node, so every answer observed for this
	// generation or a later one was observed after that.
	// +listType=set
	// +optional
	EndpointQueries []string `json:"endpointQueries,omitempty"`

	// RemapQueries are addresses the operator reassigned onto one of the
	// node's ENIs (AssignPrivateIpAddresses with AllowReassignment),
	// which EC2 remaps asynchronously: the agent answers in
	// status.remaps whether the instance metadata lists each on its ENI
	// (network/interfaces/macs/MAC/local-ipv4s), AWS's documented
	// confirmation that a remap is complete. The operator lists an
	// address here only after its reassignment call succeeded, so every
	// answer observed for this generation or a later one was observed
	// after the call.
	// +listType=map
	// +listMapKey=address
	// +optional
	RemapQueries []RemapQuery `json:"remapQueries,omitempty"`
}

// NodeENI is one ENI of the node's instance, with what the node's agent
// needs to route it: its link (MAC), its route table (device index), its
// subnet's gateway, the VPC's CIDRs and its addresses. It carries the
// fields of Cilium's ENI type (status.eni.enis) that routing reads.
type NodeENI struct {
	// ID is the EC2 ENI ID.
	ID string `json:"id"`
	// MAC is the address of the ENI's link on the node.
	MAC string `json:"mac"`
	// Number is the ENI's device index.
	// +kubebuilder:validation:Minimum=0
	Number int32 `json:"number"`
	// PrimaryIP is the ENI's primary private IPv4 address.
	// +optional
	PrimaryIP string `json:"primaryIP,omitempty"`
	// SubnetID and SubnetCIDR are the ENI's subnet and its IPv4 CIDR,
	// whose first host address is the gateway.
	// +optional
	SubnetID string `json:"subnetID,omitempty"`
	// +optional
	SubnetCIDR string `json:"subnetCIDR,omitempty"`
	// VPCCIDRs are the IPv4 CIDRs of the ENI's VPC, its primary CIDR
	// first.
	// +optional
	VPCCIDRs []string `json:"vpcCIDRs,omitempty"`
	// Addresses are the ENI's secondary private IPv4 addresses (and IPv6
	// addresses, where EC2 assigned single ones).
	// +optional
	Addresses []string `json:"addresses,omitempty"`
	// Prefixes are the IPv4 /28 prefixes delegated to the ENI.
	// +optional
	Prefixes []string `json:"prefixes,omitempty"`
	// IPv6Prefixes are the IPv6 /80 prefixes delegated to the ENI.
	// +optional
	IPv6Prefixes []string `json:"ipv6Prefixes,omitempty"`
	// Tags are the ENI's tags that spec.excludeInterfaceTags names, the
	// only ones routing reads.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// RemapQuery asks whether the instance metadata lists Address on the ENI
// ENI, whose MAC is MAC.
type RemapQuery struct {
	Address string `json:"address"`
	ENI     string `json:"eni"`
	MAC     string `json:"mac"`
}

// NodeRoutingStatus is written by the node's enipam-agent only
// (FieldManagerAgent, a server-side apply of the whole status through the
// status subresource, which cannot create the object): what it
// observed on the node. The operator reads it to pool addresses (only on
// ENIs EC2 shows on the node's instance) and acts on nothing else here.
// Objects written by an older operator carried its capacity and Elastic
// IP record here: those fields are no longer in the schema, so the
// apiserver prunes them when it reads the object from etcd (they are gone
// at its next write), and nothing reads them: the operator writes the
// spec's afresh, re-recording a tagged Elastic IP it finds on the node's
// primary address.
type NodeRoutingStatus struct {
	// ObservedGeneration is the spec generation the agent acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// RoutesSpecENIs is true when the agent routes the ENIs of spec.enis
	// (every agent since spec.enis exists says so in each status it
	// writes). The operator keeps the CiliumNode's status.eni.enis
	// current at once for an agent that has reported without it: an
	// earlier version routes only what that status lists.
	// +optional
	RoutesSpecENIs bool `json:"routesSpecENIs,omitempty"`

	// ENIs are the ENIs whose link, route table and rules are in place,
	// each with the addresses whose rules are installed.
	// +listType=map
	// +listMapKey=id
	// +optional
	ENIs []RoutedENI `json:"enis,omitempty"`

	// RoutedENIs and RoutedIPs count ENIs and their IPv4 addresses (a
	// prefix counting every address inside it), for kubectl get.
	// +optional
	RoutedENIs int32 `json:"routedENIs,omitempty"`
	// +optional
	RoutedIPs int32 `json:"routedIPs,omitempty"`
	// RoutedIPv6 counts the routed IPv6 addresses and RoutedIPv6Prefixes
	// the routed IPv6 prefixes (a /80 holds 2^48 addresses, too many to
	// count as addresses).
	// +optional
	RoutedIPv6 int32 `json:"routedIPv6,omitempty"`
	// +optional
	RoutedIPv6Prefixes int32 `json:"routedIPv6Prefixes,omitempty"`

	// Endpoints answers the spec's endpointQueries; absent when there
	// are none.
	// +optional
	Endpoints *EndpointReport `json:"endpoints,omitempty"`

	// Remaps answers the spec's remapQueries; absent when there are none.
	// +optional
	Remaps *RemapReport `json:"remaps,omitempty"`

	// Conditions: Ready is True when every ENI the agent must route is
	// routed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EndpointReport is the agent's answer to the spec's endpointQueries,
// read from the node's main route table. With Cilium's endpoint routes
// (endpointRoutes.enabled), Cilium keeps a /32 route to each endpoint's
// address through its lxc link from the endpoint's first regeneration
// until the endpoint is deleted (CNI DEL, or the pod's sandbox going);
// the kernel drops it with the link. So once endpoint routes are shown
// in use on the node, no such route means no running endpoint holds the
// address there.
type EndpointReport struct {
	// ObservedGeneration is the spec generation whose queries were
	// answered: the agent read that spec before it read the kernel.
	ObservedGeneration int64 `json:"observedGeneration"`
	// EndpointRoutes is true when the kernel showed Cilium's endpoint
	// routes in use and complete: at least one lxc link, and a /32 route
	// in the main table to every one of them (none half made or half
	// torn down). When false, Absent is empty: a missing route proves
	// nothing.
	EndpointRoutes bool `json:"endpointRoutes"`
	// Present are the queried addresses a route in the main table leads
	// to through a link: an endpoint may hold them.
	// +listType=set
	// +optional
	Present []string `json:"present,omitempty"`
	// Absent are the queried addresses no such route leads to, listed
	// only when EndpointRoutes is true: no endpoint on the node held them
	// when the agent looked.
	// +listType=set
	// +optional
	Absent []string `json:"absent,omitempty"`
}

// EndpointGone reports whether the report, answering generation
// generation of the spec or a later one, says no endpoint on the node
// holds ip.
func (r *EndpointReport) EndpointGone(ip string, generation int64) bool {
	if r == nil || !r.EndpointRoutes || r.ObservedGeneration < generation {
		return false
	}
	for _, a := range r.Absent {
		if a == ip {
			return true
		}
	}
	return false
}

// RemapReport is the agent's answer to the spec's remapQueries, read from
// the instance metadata (IMDS) of the node's own instance.
type RemapReport struct {
	// ObservedGeneration is the spec generation whose queries were
	// answered: the agent read that spec before it read the metadata.
	ObservedGeneration int64 `json:"observedGeneration"`
	// Landed are the queried addresses the metadata listed in the
	// local-ipv4s of the queried ENI's MAC: EC2 has completed their
	// remap onto it.
	// +listType=set
	// +optional
	Landed []string `json:"landed,omitempty"`
	// Missing are the queried addresses it did not list there (the remap
	// is not complete, or the address went elsewhere).
	// +listType=set
	// +optional
	Missing []string `json:"missing,omitempty"`
}

// RemapLanded reports whether the report, answering generation
// generation of the spec or a later one, says the metadata listed ip on
// its queried ENI.
func (r *RemapReport) RemapLanded(ip string, generation int64) bool {
	return r != nil && r.ObservedGeneration >= generation && slices.Contains(r.Landed, ip)
}

// RemapMissing reports whether the report, answering generation
// generation or a later one, says the metadata did not list ip on its
// queried ENI.
func (r *RemapReport) RemapMissing(ip string, generation int64) bool {
	return r != nil && r.ObservedGeneration >= generation && slices.Contains(r.Missing, ip)
}

// NodeStaticIPFinalizer holds a NodeRouting whose spec.staticIP names
// an Elastic IP association until enipam-operator has released it: the
// NodeRouting goes with its CiliumNode (owner reference), and the
// finalizer turns that into the moment the association is undone.
const NodeStaticIPFinalizer = "enipam.io/node-static-ip"

// NodeStaticIP is an Elastic IP the operator associates with a node's
// primary address.
type NodeStaticIP struct {
	// AllocationID names the Elastic IP; PublicIP is its address, the
	// value of the CiliumNode's status.ipam.assigned-static-ip.
	AllocationID string `json:"allocationID"`
	// +optional
	PublicIP string `json:"publicIP,omitempty"`
	// InstanceID and ENIID are where it is (to be) associated: the
	// instance's primary ENI, at its primary private address.
	InstanceID string `json:"instanceID"`
	// +optional
	ENIID string `json:"eniID,omitempty"`
	// AssociationID is EC2's once the association is made.
	// +optional
	AssociationID string `json:"associationID,omitempty"`
}

// NodeCapacity is what the operator knows of a node's room for pod
// addresses under its policy.
type NodeCapacity struct {
	// MaxIPs is the largest pool the node can reach: the address slots of
	// its usable ENIs, present and still to attach (a prefix slot counting
	// 16 under prefix delegation), less the ENIs' own primary addresses.
	MaxIPs int32 `json:"maxIPs"`
	// PoolIPs is the size of the pool now (addresses pods may get, used
	// or not), and Awaiting the addresses EC2 holds for the node that wait
	// to be routed before they join it.
	PoolIPs  int32 `json:"poolIPs"`
	Awaiting int32 `json:"awaiting,omitempty"`
	// UsedIPs counts the pool's addresses Cilium has given to pods (the
	// CiliumNode's status.ipam.used), FreeIPs those it can still give
	// (PoolIPs less UsedIPs), for kubectl get: Free, Used and Max are the
	// node's headroom. A change of only these two is written at most
	// every 10 s (they move with every pod), so they may lag Cilium's
	// status.ipam.used by that much. Objects of an older operator lack
	// them until its next write.
	// +optional
	UsedIPs int32 `json:"usedIPs"`
	// +optional
	FreeIPs int32 `json:"freeIPs"`
	// CanGrow is false when no more addresses can come: the instance is at
	// capacity, its subnets are exhausted, or it cannot be served.
	CanGrow bool `json:"canGrow"`
	// Reason says why the pool cannot grow, in words, e.g. "instance at
	// capacity (3/3 ENIs × 10 addresses)".
	// +optional
	Reason string `json:"reason,omitempty"`
	// AvailabilityZone and Subnets are where the node's pod addresses come
	// from: the zone, and the subnets of its usable ENIs and those a new
	// ENI may use.
	// +optional
	AvailabilityZone string `json:"availabilityZone,omitempty"`
	// +listType=set
	// +optional
	Subnets []string `json:"subnets,omitempty"`
	// FreeENISlots counts the device indexes where a usable ENI can still
	// be attached: a static address of any subnet of the zone fits there.
	// +optional
	FreeENISlots int32 `json:"freeENISlots,omitempty"`
	// SubnetSlots are, for each subnet of the node's usable ENIs, the
	// address slots still free on those ENIs: where a static address of
	// that subnet moving in fits without a new ENI.
	// +listType=map
	// +listMapKey=subnetID
	// +optional
	SubnetSlots []SubnetSlots `json:"subnetSlots,omitempty"`
}

// SubnetSlots is the room for single addresses of one subnet on a node's
// ENIs.
type SubnetSlots struct {
	// SubnetID is the subnet.
	SubnetID string `json:"subnetID"`
	// Free counts the address slots free on the node's usable ENIs in it.
	Free int32 `json:"free"`
}

// RoutedENI is one ENI the agent has routed.
type RoutedENI struct {
	// ID is the EC2 ENI ID.
	ID string `json:"id"`
	// MAC is the address of the ENI's link on the node.
	MAC string `json:"mac,omitempty"`
	// Number is the ENI's device index.
	Number int32 `json:"number"`
	// Table is the ENI's route table.
	Table int32 `json:"table,omitempty"`
	// IPs are the IPv4 addresses whose rules are installed.
	// +listType=set
	// +optional
	IPs []string `json:"ips,omitempty"`
	// Prefixes are delegated IPv4 /28 prefixes whose rules are installed
	// (one set each), standing for every address inside them.
	// +listType=set
	// +optional
	Prefixes []string `json:"prefixes,omitempty"`
	// IPv6 are the IPv6 addresses the node routes on the ENI: on a
	// secondary ENI those whose rules into its table are installed; on
	// the primary ENI every one of its IPv6 addresses, which the main
	// table routes with no rule of enipam's.
	// +listType=set
	// +optional
	IPv6 []string `json:"ipv6,omitempty"`
	// IPv6Prefixes are the delegated IPv6 prefixes (/80) the node routes
	// on the ENI, by the same rule as IPv6, each standing for every
	// address inside it.
	// +listType=set
	// +optional
	IPv6Prefixes []string `json:"ipv6Prefixes,omitempty"`
}

// Condition types and reasons of a NodeRouting.
const (
	// ConditionReady is True when every ENI the agent must route is routed.
	ConditionReady = "Ready"

	ReasonRouted       = "Routed"
	ReasonLinkNotFound = "LinkNotFound"
	ReasonRouteFailed  = "RouteFailed"
	ReasonAgentStopped = "AgentStopped"
)

// NodeRoutingList is a list of NodeRouting.
//
// +kubebuilder:object:root=true
type NodeRoutingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeRouting `json:"items"`
}

// Routes reports whether the status lists ip (IPv4 or IPv6) as routed on
// the ENI eniID, as a single address or inside one of its prefixes.
func (s *NodeRoutingStatus) Routes(eniID, ip string) bool {
	for i := range s.ENIs {
		e := &s.ENIs[i]
		if e.ID != eniID {
			continue
		}
		if slices.Contains(e.IPs, ip) || slices.Contains(e.IPv6, ip) {
			return true
		}
		return prefixesContain(e.Prefixes, ip) || prefixesContain(e.IPv6Prefixes, ip)
	}
	return false
}

// Routed indexes the status for lookups: it returns a function reporting
// whether ip (an address of either family or, parsed, one inside a routed
// prefix) is routed on the ENI eniID.
func (s *NodeRoutingStatus) Routed() func(eniID string, ip netip.Addr) bool {
	type key struct {
		eni string
		ip  netip.Addr
	}
	ips := map[key]bool{}
	prefixes := map[string][]netip.Prefix{}
	for i := range s.ENIs {
		e := &s.ENIs[i]
		for _, a := range slices.Concat(e.IPs, e.IPv6) {
			if addr, err := netip.ParseAddr(a); err == nil {
				ips[key{e.ID, addr}] = true
			}
		}
		for _, p := range slices.Concat(e.Prefixes, e.IPv6Prefixes) {
			if pfx, err := netip.ParsePrefix(p); err == nil {
				prefixes[e.ID] = append(prefixes[e.ID], pfx.Masked())
			}
		}
	}
	return func(eniID string, ip netip.Addr) bool {
		if ips[key{eniID, ip}] {
			return true
		}
		for _, p := range prefixes[eniID] {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
}

func prefixesContain(prefixes []string, ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, p := range prefixes {
		if pfx, err := netip.ParsePrefix(p); err == nil && pfx.Masked().Contains(addr) {
			return true
		}
	}
	return false
}
