package v1alpha1

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ENIPolicy tells the operator, for the nodes its selector matches, which
// subnets and security groups new ENIs use, how ENIs are tagged and which
// are left alone, and the default pool sizes.
//
// Precedence, per knob: a value set in the CiliumNode's own spec.ipam wins,
// then the matching ENIPolicy, then the operator's defaults. When several
// policies match one node, the one with the lowest spec.priority wins, ties
// broken by name; the others report a Conflict condition.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=enip,categories=enipam
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.matchedNodes`
// +kubebuilder:printcolumn:name="Pre-Allocate",type=integer,JSONPath=`.spec.preAllocate`,priority=1
// +kubebuilder:printcolumn:name="Headroom",type=string,JSONPath=`.spec.headroom`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ENIPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ENIPolicySpec   `json:"spec,omitempty"`
	Status ENIPolicyStatus `json:"status,omitempty"`
}

// ENIPolicySpec is what a policy asks for. Every field is optional; an
// unset field falls through to the operator's default.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minAllocate) || !has(self.maxAllocate) || self.maxAllocate == 0 || self.minAllocate <= self.maxAllocate",message="minAllocate must not exceed maxAllocate"
// +kubebuilder:validation:XValidation:rule="!has(self.preAllocate) || !has(self.maxAllocate) || self.maxAllocate == 0 || self.preAllocate <= self.maxAllocate",message="preAllocate must not exceed maxAllocate"
type ENIPolicySpec struct {
	// NodeSelector selects the nodes (by their Node labels) this policy
	// applies to. An empty selector matches every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Priority orders policies that match the same node: the lowest wins,
	// ties broken by name.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// SubnetIDs are the subnets new ENIs may use. Only subnets in the
	// node's availability zone are considered; the one with the most free
	// addresses is chosen.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	SubnetIDs []SubnetID `json:"subnetIDs,omitempty"`

	// SubnetTags selects subnets by tags (all must match) when no listed
	// subnet ID is usable. When neither yields a subnet, the node's own
	// subnet is used.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	SubnetTags map[string]string `json:"subnetTags,omitempty"`

	// SecurityGroupIDs are attached to new ENIs.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	SecurityGroupIDs []SecurityGroupID `json:"securityGroupIDs,omitempty"`

	// SecurityGroupTags select security groups by tags (all must match)
	// when no IDs are given. When neither is set, new ENIs get the security
	// groups of the instance's primary ENI.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	SecurityGroupTags map[string]string `json:"securityGroupTags,omitempty"`

	// PreAllocate is the number of free IPs kept in each node's pool ahead
	// of its pods.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	// +optional
	PreAllocate *int32 `json:"preAllocate,omitempty"`

	// MinAllocate is the pool size a node gets before anything else,
	// whatever its pods use.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MinAllocate *int32 `json:"minAllocate,omitempty"`

	// MaxAllocate caps the pool size of a node; 0 means no cap beyond the
	// instance's limits.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxAllocate *int32 `json:"maxAllocate,omitempty"`

	// MaxAboveWatermark is how many IPs beyond the pre-allocation an
	// allocation may take at once, to save later calls.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MaxAboveWatermark *int32 `json:"maxAboveWatermark,omitempty"`

	// Headroom says how many free addresses each node keeps beyond its
	// demand: the pods using an address and the pods bound to it still
	// waiting for one (the operator sees a pod when it is bound, before
	// its CNI call). Fixed keeps preAllocate, Cilium's rule. Adaptive
	// keeps what the node's own arrivals call for: the most pods bound to
	// it within one lead time (how long its last allocations took to
	// reach the pool) over the last excessIPReleaseDelay (at least a
	// minute), at least its arrival rate times the lead time, at most
	// preAllocate, each allocation taking half such a headroom (rounded
	// up) more than the need; a node that receives no pods keeps none beyond minAllocate
	// (and the addresses Cilium's agent takes for itself), and what it no
	// longer needs leaves through the release handshake.
	// +optional
	Headroom *Headroom `json:"headroom,omitempty"`

	// FirstInterfaceIndex is the lowest device index whose ENI may carry
	// pod IPs. 0 lets pods use the primary ENI; 1 keeps it for the host.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=15
	// +optional
	FirstInterfaceIndex *int32 `json:"firstInterfaceIndex,omitempty"`

	// ExcludeInterfaceTags marks ENIs (those carrying all of these tags) the operator
	// never uses for pod IPs, such as those of another network agent.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	ExcludeInterfaceTags map[string]string `json:"excludeInterfaceTags,omitempty"`

	// PrefixDelegation makes new capacity come as /28 prefixes (16
	// addresses per ENI slot) on nitro instances instead of single
	// addresses.
	// +optional
	PrefixDelegation *bool `json:"prefixDelegation,omitempty"`

	// ReleaseExcessIPs returns free IPs beyond the pool's needs to the
	// subnet, through Cilium's release handshake (an IP leaves a pool only
	// after the agent confirmed it is unused).
	// +optional
	ReleaseExcessIPs *bool `json:"releaseExcessIPs,omitempty"`

	// ExcessIPReleaseDelay is how long IPs must be in excess before they
	// are released, so short dips in use do not churn EC2.
	// +optional
	ExcessIPReleaseDelay *metav1.Duration `json:"excessIPReleaseDelay,omitempty"`

	// IPFamilies are the address families of the matched nodes' pods:
	// [IPv4] (the default when unset), [IPv6], or both in either order
	// (dual-stack), as a Service's spec.ipFamilies. For IPv6 the
	// operator asks EC2 for one /80 prefix on each node's primary ENI and
	// keeps a window of its addresses in the pool, sized by the same
	// knobs as IPv4 (each family apart, as Cilium's agent sizes them);
	// without IPv4 no IPv4 address is pooled. A node whose subnet or
	// instance type has no IPv6 keeps its IPv4 and is named in the
	// IPFamilies condition and an event.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	IPFamilies []IPFamily `json:"ipFamilies,omitempty"`

	// Consolidation gives whole secondary ENIs (and delegated /28s) back
	// once a node no longer needs them. It acts only with
	// releaseExcessIPs.
	// +optional
	Consolidation *Consolidation `json:"consolidation,omitempty"`

	// Tags are added to every ENI the operator creates for the matched
	// nodes, beside enipam's own tags (which they cannot override).
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('enipam.io/') && !k.startsWith('aws:'))",message="tag keys starting with enipam.io/ or aws: are reserved"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// Consolidation is how a node gives back the ENIs and prefixes its pool
// no longer needs. The free addresses of the node's least-used secondary
// ENI (or /28 prefix) are released first, so new pods land elsewhere and
// it drains as its pods go; a secondary ENI left without addresses for
// the delay, while the node's other ENIs have room for its headroom, is
// detached and deleted. Never the primary ENI, never an ENI holding an address in
// use or a static IP, never below the pool's floor.
type Consolidation struct {
	// Enabled turns consolidation on or off; on by default (it acts only
	// when excess addresses are released).
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Delay is how long a secondary ENI must have held no address before
	// it is detached and deleted, which happens only while the node's
	// other ENIs have room for its headroom; a node that grew an ENI
	// within it deletes none. Default 1m.
	// +optional
	Delay *metav1.Duration `json:"delay,omitempty"`
}

// Headroom is how a pool's free addresses beyond its demand are sized.
// +kubebuilder:validation:Enum=Fixed;Adaptive
type Headroom string

// Headroom policies.
const (
	// HeadroomFixed keeps preAllocate free addresses ahead of the demand.
	HeadroomFixed Headroom = "Fixed"
	// HeadroomAdaptive keeps what the node's recent arrivals call for, at
	// most preAllocate.
	HeadroomAdaptive Headroom = "Adaptive"
)

// IPFamily is an address family of pod addresses.
// +kubebuilder:validation:Enum=IPv4;IPv6
type IPFamily string

// Address families.
const (
	IPv4Family IPFamily = "IPv4"
	IPv6Family IPFamily = "IPv6"
)

// ValidateIPFamilies says what is wrong with a policy's ipFamilies, or
// nil: each must be IPv4 or IPv6, none twice, one or two of them. The
// CRD's schema refuses such values on every write; this is for objects
// stored before it did.
func ValidateIPFamilies(families []IPFamily) error {
	if len(families) > 2 {
		return fmt.Errorf("ipFamilies lists %d families, at most 2 (IPv4, IPv6)", len(families))
	}
	for i, f := range families {
		if f != IPv4Family && f != IPv6Family {
			return fmt.Errorf("ipFamilies[%d]: %q is not IPv4 or IPv6", i, f)
		}
		if slices.Contains(families[:i], f) {
			return fmt.Errorf("ipFamilies[%d]: %s listed twice", i, f)
		}
	}
	return nil
}

// WantsIPv6 reports whether a valid ipFamilies asks for IPv6 addresses.
func WantsIPv6(families []IPFamily) bool { return slices.Contains(families, IPv6Family) }

// SubnetID is an EC2 subnet ID such as subnet-0a1b2c3d.
// +kubebuilder:validation:Pattern=`^subnet-[0-9a-f]{8,17}$`
type SubnetID string

// SecurityGroupID is an EC2 security group ID such as sg-0a1b2c3d.
// +kubebuilder:validation:Pattern=`^sg-[0-9a-f]{8,17}$`
type SecurityGroupID string

// Condition types and reasons an ENIPolicy reports.
const (
	// ConditionAccepted is True when the operator uses the policy for the
	// nodes it matches.
	ConditionAccepted = "Accepted"
	// ConditionConflict is True when another policy with a higher
	// precedence matches some of this policy's nodes.
	ConditionConflict = "Conflict"
	// ConditionIPFamilies is True when the nodes' pools carry every
	// family ipFamilies asks for: False with IPv6Unavailable while some
	// of its nodes can get no IPv6 (their subnet or instance type has
	// none; the message names one), False with InvalidIPFamilies for a
	// value the schema should have refused (the pools stay IPv4).
	ConditionIPFamilies = "IPFamilies"

	ReasonValid           = "Valid"
	ReasonInvalidSelector = "InvalidSelector"
	ReasonOverlap         = "Overlap"
	ReasonNoOverlap       = "NoOverlap"
	ReasonFamiliesPooled  = "FamiliesPooled"
	ReasonIPv6Unavailable = "IPv6Unavailable"
	ReasonInvalidFamilies = "InvalidIPFamilies"
)

// ENIPolicyStatus is what the operator observed of a policy.
type ENIPolicyStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// MatchedNodes counts the nodes this policy governs (those where it
	// wins precedence).
	// +optional
	MatchedNodes int32 `json:"matchedNodes,omitempty"`

	// Conditions: Accepted, Conflict, IPFamilies.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ENIPolicyList is a list of ENIPolicy.
//
// +kubebuilder:object:root=true
type ENIPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ENIPolicy `json:"items"`
}
