package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StaticIPAnnotation on a pod (set it on a StatefulSet's pod template) asks
// for a static address: enipam-scheduler creates the pod's StaticIPClaim
// at the first bind if none exists. The value is "true", or a reclaim
// policy name (Retain, WithStatefulSet, AfterUnused) for the claim it
// creates. A claim made up front by a user takes precedence.
const StaticIPAnnotation = "enipam.io/static-ip"

// StaticIPUnusedTTLAnnotation sets spec.unusedTTL of a claim created from
// StaticIPAnnotation with the AfterUnused policy (a Go duration, e.g. "1h").
const StaticIPUnusedTTLAnnotation = "enipam.io/static-ip-unused-ttl"

// StaticIPClaimFinalizer is kept on every claim by enipam-operator until
// the claim's address is back to an ordinary pool address.
const StaticIPClaimFinalizer = "enipam.io/static-ip"

// StaticIPClaim reserves one VPC address for the pod of the same name in
// the same namespace, wherever that pod is scheduled. StatefulSet pods keep
// their names, so a StatefulSet pod keeps its address across reschedules.
//
// The contract between the three writers:
//
//   - Users (or enipam-scheduler, from StaticIPAnnotation) create the claim
//     and own spec.address, spec.subnetID, spec.reclaimPolicy and
//     spec.unusedTTL.
//   - enipam-scheduler's bind verb writes spec.nodeName: the node the pod
//     is being bound to. It then waits until that node's CiliumNode has the
//     address in spec.ipam.pool with owner "<namespace>/<name>" (Cilium's
//     agent in ipam: crd mode gives that entry to that pod and to no other,
//     pkg/ipam/crd.go allocateNext), and only then creates the Binding.
//   - enipam-operator writes status and moves the address: it takes it out
//     of the old node's pool (never while the old node's status.ipam.used
//     lists it for a pod of this name that still runs there), reassigns it
//     in EC2 to an ENI of spec.nodeName's instance in the same subnet, waits
//     until that node's agent has routed it, and stamps the owner in the new
//     node's pool. An owner-stamped address is never counted as free,
//     offered for release, or collected.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sipc,categories=enipam
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Public IP",type=string,JSONPath=`.status.publicIP.publicIP`
// +kubebuilder:printcolumn:name="Allocation",type=string,JSONPath=`.status.publicIP.allocationID`,priority=1
// +kubebuilder:printcolumn:name="ENI",type=string,JSONPath=`.status.eniID`,priority=1
// +kubebuilder:printcolumn:name="Subnet",type=string,JSONPath=`.status.subnetID`,priority=1
// +kubebuilder:printcolumn:name="AZ",type=string,JSONPath=`.status.availabilityZone`,priority=1
// +kubebuilder:printcolumn:name="Reclaim",type=string,JSONPath=`.spec.reclaimPolicy`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StaticIPClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StaticIPClaimSpec   `json:"spec,omitempty"`
	Status StaticIPClaimStatus `json:"status,omitempty"`
}

// ReclaimPolicy says when a claim's address goes back to being an ordinary
// pool address.
// +kubebuilder:validation:Enum=Retain;WithStatefulSet;AfterUnused
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the address until the claim is deleted.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimWithStatefulSet releases the address (and deletes the claim)
	// when the StatefulSet that owns the pod of the claim's name is deleted,
	// or scaled below that pod's ordinal.
	ReclaimWithStatefulSet ReclaimPolicy = "WithStatefulSet"
	// ReclaimAfterUnused releases the address (and deletes the claim) once
	// no pod of the claim's name has existed for spec.unusedTTL.
	ReclaimAfterUnused ReclaimPolicy = "AfterUnused"
)

// StaticIPClaimSpec is what is asked.
// +kubebuilder:validation:XValidation:rule="self.reclaimPolicy != 'AfterUnused' || has(self.unusedTTL)",message="unusedTTL is required with reclaimPolicy AfterUnused"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.address) || (has(self.address) && self.address == oldSelf.address)",message="address cannot be changed once set"
type StaticIPClaimSpec struct {
	// Address asks for this IPv4 address. It must lie in a subnet enipam
	// uses and be free (on no ENI, or on an ENI enipam manages and in no
	// pod's use). Empty: the operator picks a free pool address of the first
	// node the pod is bound to, and records it in status.address.
	// +optional
	// +kubebuilder:validation:Format=ipv4
	Address string `json:"address,omitempty"`

	// SubnetID asks for an address of this subnet when Address is empty.
	// +optional
	// +kubebuilder:validation:Pattern=`^subnet-[0-9a-f]+$`
	SubnetID string `json:"subnetID,omitempty"`

	// ReclaimPolicy: when the address goes back to the pool.
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// UnusedTTL is how long the claim may go without a pod of its name
	// before the AfterUnused policy releases it.
	// +optional
	UnusedTTL *metav1.Duration `json:"unusedTTL,omitempty"`

	// NodeName is the node the address must be placed on: written by
	// enipam-scheduler's bind verb for the pod being bound. Users leave it
	// empty.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// PublicIP asks for an Elastic IP mapped to the address, wherever its
	// pod runs (see PublicIPRequest). Removing it releases the Elastic IP
	// as the claim's deletion would.
	// +optional
	PublicIP *PublicIPRequest `json:"publicIP,omitempty"`
}

// ClaimPhase is where a claim's address is.
// +kubebuilder:validation:Enum=Pending;Placing;Bound;Releasing;Invalid
type ClaimPhase string

const (
	// ClaimPending: no address chosen yet, or no node asked for.
	ClaimPending ClaimPhase = "Pending"
	// ClaimPlacing: the address is on its way to spec.nodeName (leaving the
	// old pool, being reassigned in EC2, or waiting to be routed).
	ClaimPlacing ClaimPhase = "Placing"
	// ClaimBound: the address is in status.nodeName's pool, stamped with
	// the claim's owner.
	ClaimBound ClaimPhase = "Bound"
	// ClaimReleasing: the reclaim policy (or the claim's deletion) returns
	// the address to the pool.
	ClaimReleasing ClaimPhase = "Releasing"
	// ClaimInvalid: the spec cannot be honoured; the Ready condition says
	// why. Nothing is moved.
	ClaimInvalid ClaimPhase = "Invalid"
)

// Condition types and reasons of a StaticIPClaim.
const (
	// ClaimReady is True when the address is Bound on spec.nodeName (or,
	// with no node asked for, reserved).
	ClaimReady = "Ready"

	ReasonBound             = "Bound"
	ReasonWaitingForNode    = "WaitingForNode"
	ReasonPlacing           = "Placing"
	ReasonWaitingForOldPod  = "WaitingForOldPod"
	ReasonAwaitingRouting   = "AwaitingRouting"
	ReasonNoSlot            = "NoSlotInSubnet"
	ReasonAddressOutside    = "AddressOutsideSubnets"
	ReasonAddressTaken      = "AddressTaken"
	ReasonWrongZone         = "NodeInOtherZone"
	ReasonNodeUnknown       = "NodeUnknown"
	ReasonReleasing         = "Releasing"
	ReasonUnschedulableZone = "NoEligibleNode"
	// ReasonPodHasOtherAddress: the claim's pod runs with another address
	// than the claim's (Cilium's agent saw the stamp too late).
	ReasonPodHasOtherAddress = "PodHasOtherAddress"
)

// StaticIPClaimStatus is the operator's report. Each field has one
// writer: enipam-operator's claim controller writes every field but
// Placement, which is the pool controller's alone (the one writer of the
// pools). Both write by merge patches of the fields they change, so
// neither overwrites the other's.
type StaticIPClaimStatus struct {
	// Address is the claimed address once chosen. Writer: the claim
	// controller.
	// +optional
	Address string `json:"address,omitempty"`
	// SubnetID and AvailabilityZone are the address's subnet and its zone:
	// the pod can only run in that zone. Writer: the claim controller.
	// +optional
	SubnetID string `json:"subnetID,omitempty"`
	// +optional
	AvailabilityZone string `json:"availabilityZone,omitempty"`
	// NodeName is the node whose instance has the address on an ENI (its
	// pool holds the address stamped with the claim's owner once Bound);
	// ENIID the ENI EC2 has it on. Writer: the claim controller.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// +optional
	ENIID string `json:"eniID,omitempty"`
	// Phase summarizes the conditions. Writer: the claim controller.
	// +optional
	Phase ClaimPhase `json:"phase,omitempty"`
	// LastUsed is when the pod of the claim's name was last seen: set
	// when it goes, cleared while one exists (the AfterUnused policy
	// counts its TTL from it). Writer: the claim controller.
	// +optional
	LastUsed *metav1.Time `json:"lastUsed,omitempty"`
	// PublicIP is the claim's Elastic IP and where it is associated,
	// recorded before EC2 is asked for anything. Writer: the claim
	// controller (it serves the Elastic IPs).
	// +optional
	PublicIP *ClaimPublicIP `json:"publicIP,omitempty"`
	// ObservedGeneration is the spec generation this status describes.
	// Writer: the claim controller.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (ClaimReady). Writer: the claim controller;
	// while the claim is Placing, it copies reason and message from
	// Placement when that note is about the claim as it is.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Placement is the pool controller's word on the placement under way.
	// Writer: the pool controller, alone; the claim controller reads it.
	// +optional
	Placement *PlacementNote `json:"placement,omitempty"`
}

// PlacementNote is enipam-operator's pool controller's word on a claim's
// placement: what it did with the claim's address on a node, or why it
// cannot. It is about the claim as the pool controller read it (Address,
// ObservedGeneration), in one term of the operator (Term). The claim
// controller reads it for the Ready condition while the claim is Placing,
// and drops an address it picked itself that the note finds taken; it
// ignores a note about another address, another generation of the spec
// or another term: such a note may describe a state that has since
// changed, and nothing rewrites it until the pool controller looks at the
// claim again.
type PlacementNote struct {
	// Address is the claim's address the note is about: spec.address,
	// else status.address, as the pool controller read them; empty for a
	// first placement (no address recorded yet: the note is about the
	// address the placement chooses, which the claim records next).
	// +optional
	Address string `json:"address,omitempty"`
	// Node is the node whose pool the note speaks of.
	// +optional
	Node string `json:"node,omitempty"`
	// ObservedGeneration is the claim's generation the note is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Term names the operator's leadership term that wrote the note
	// (random, new with each process and each time a replica leads): a
	// note of an earlier term was written by controllers that are gone.
	// +optional
	Term string `json:"term,omitempty"`
	// Reason is one of the claim reasons (Placing, AwaitingRouting,
	// WaitingForOldPod, AddressTaken, NoSlotInSubnet, ...).
	Reason string `json:"reason"`
	// Message says it for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// Owner is the pool-entry owner Cilium's CNI plugin asks for when it
// allocates for this claim's pod: "<namespace>/<name>"
// (plugins/cilium-cni/cmd allocateIPsWithCiliumAgent).
func (c *StaticIPClaim) Owner() string { return c.Namespace + "/" + c.Name }

// +kubebuilder:object:root=true

// StaticIPClaimList is a list of StaticIPClaims.
type StaticIPClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StaticIPClaim `json:"items"`
}
