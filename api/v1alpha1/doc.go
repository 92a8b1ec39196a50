// Package v1alpha1 holds enipam's own API, group enipam.io, version
// v1alpha1: the cluster-scoped ENIPolicy that tells the operator where a
// node's ENIs and IPs come from and how large its pool is kept.
//
// +kubebuilder:object:generate=true
// +groupName=enipam.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every type in this package.
var GroupVersion = schema.GroupVersion{Group: "enipam.io", Version: "v1alpha1"}

// AddToScheme adds this package's types to a runtime.Scheme.
func AddToScheme(s *runtime.Scheme) error { return addKnownTypes(s) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ENIPolicy{}, &ENIPolicyList{}, &NodeRouting{}, &NodeRoutingList{},
		&StaticIPClaim{}, &StaticIPClaimList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
