// Package v1alpha1 holds enipam's own API, group enipam.io, version
// v1alpha1: the cluster-scoped ENIPolicy that tells the operator where a
// node's ENIs and IPs come from and how large its pool is kept.
//
// +kubebuilder:object:generate=true
// +groupName=enipam.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the API group and version of every type in this package.
var GroupVersion = schema.GroupVersion{Group: "enipam.io", Version: "v1alpha1"}

// SchemeBuilder registers this package's types; AddToScheme adds them to a
// runtime.Scheme.
var (
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	AddToScheme   = SchemeBuilder.AddToScheme
)
