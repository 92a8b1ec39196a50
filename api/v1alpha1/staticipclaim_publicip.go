package v1alpha1

import (
	"fmt"
	"strings"
)

// PublicIPAnnotation on a pod (set it on a StatefulSet's pod template,
// beside StaticIPAnnotation) asks for an Elastic IP in the StaticIPClaim
// enipam-scheduler creates: "allocate" (spec.publicIP.allocate), or
// "tags:<key>=<value>[,<key>=<value>...]" for a free Elastic IP of yours
// carrying those tags (spec.publicIP.poolTags). A claim made up front by a
// user takes precedence.
const PublicIPAnnotation = "enipam.io/public-ip"

// PublicIPRequest says where a claim's Elastic IP comes from: exactly one
// of its fields is set.
//
// enipam-operator associates the Elastic IP with the claim's address on
// the ENI EC2 has it on, once the address is stamped for the claim's pod
// (Bound): never while a pool could hand the address to another pod. When
// the address moves to another node, EC2 moves the association with it
// (AssignPrivateIpAddresses with AllowReassignment moves "any Elastic IP
// address that is associated with the IP address", EC2 API reference);
// the operator checks it there and associates again if it is not. When
// the claim goes (its reclaim policy, or its deletion), the Elastic IP is
// disassociated before the address goes back to the pool, then an
// allocated one is released to AWS; one of yours stays allocated.
//
// +kubebuilder:validation:XValidation:rule="((has(self.allocate) && self.allocate) ? 1 : 0) + (has(self.poolTags) ? 1 : 0) + (has(self.allocationID) ? 1 : 0) == 1",message="set exactly one of allocate: true, poolTags, allocationID"
type PublicIPRequest struct {
	// Allocate: enipam-operator allocates an Elastic IP for the claim,
	// tagged enipam.io/cluster=<cluster>, enipam.io/claim=<namespace>/<name>
	// and enipam.io/claim-uid, and releases it to AWS when the claim goes.
	// +optional
	Allocate bool `json:"allocate,omitempty"`

	// PoolTags takes a free (unassociated) Elastic IP carrying all these
	// tags: a pool you allocated and tagged beforehand. It is
	// disassociated, never released, when the claim goes. Keys under
	// enipam.io/ are enipam's own.
	// +optional
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('enipam.io/'))",message="poolTags keys under enipam.io/ are reserved"
	PoolTags map[string]string `json:"poolTags,omitempty"`

	// AllocationID takes this Elastic IP of yours; it must be free or
	// already associated with the claim's address. It is disassociated,
	// never released, when the claim goes.
	// +optional
	// +kubebuilder:validation:Pattern=`^eipalloc-[0-9a-f]+$`
	AllocationID string `json:"allocationID,omitempty"`
}

// ClaimPublicIP is enipam-operator's record of a claim's Elastic IP. It is
// written before each EC2 call that could leave something behind
// (AllocateAddress, AssociateAddress), so an operator killed at any point
// finds what it did: an allocation by its tags, an association by its
// address.
type ClaimPublicIP struct {
	// AllocationID and PublicIP name the Elastic IP; both empty while
	// enipam allocates one.
	// +optional
	AllocationID string `json:"allocationID,omitempty"`
	// +optional
	PublicIP string `json:"publicIP,omitempty"`
	// Allocated: enipam-operator allocated it for this claim and
	// releases it to AWS with the claim.
	// +optional
	Allocated bool `json:"allocated,omitempty"`
	// ENIID is the ENI it is associated with (or being associated with)
	// on the claim's address; AssociationID once EC2 confirmed.
	// +optional
	ENIID string `json:"eniID,omitempty"`
	// +optional
	AssociationID string `json:"associationID,omitempty"`
}

// Condition type and reasons of a claim's Elastic IP.
const (
	// ClaimPublicIPReady is True when the Elastic IP is associated with
	// the claim's address on the ENI EC2 has the address on.
	ClaimPublicIPReady = "PublicIPReady"

	ReasonPublicIPAssociated  = "Associated"
	ReasonPublicIPWaiting     = "WaitingForAddress"
	ReasonPublicIPAssociating = "Associating"
	ReasonPublicIPUnavailable = "PublicIPUnavailable"
	ReasonPublicIPNotFound    = "PublicIPNotFound"
	ReasonPublicIPTaken       = "PublicIPTaken"
	ReasonPublicIPReleasing   = "Releasing"
)

// ParsePublicIPAnnotation reads PublicIPAnnotation's value: nil for "",
// an error naming the annotation for anything it cannot read.
func ParsePublicIPAnnotation(value string) (*PublicIPRequest, error) {
	switch {
	case value == "":
		return nil, nil
	case value == "allocate":
		return &PublicIPRequest{Allocate: true}, nil
	case strings.HasPrefix(value, "tags:"):
		tags := map[string]string{}
		for _, kv := range strings.Split(strings.TrimPrefix(value, "tags:"), ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" || strings.HasPrefix(k, "enipam.io/") {
				return nil, fmt.Errorf("annotation %s=%q: want tags:<key>=<value>[,...], keys outside enipam.io/", PublicIPAnnotation, value)
			}
			tags[k] = v
		}
		return &PublicIPRequest{PoolTags: tags}, nil
	}
	return nil, fmt.Errorf("annotation %s=%q: want allocate or tags:<key>=<value>[,...]", PublicIPAnnotation, value)
}
