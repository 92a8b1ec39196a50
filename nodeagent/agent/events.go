package agent

import (
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
)

// Reasons of the events the agent records on its CiliumNode. They are part
// of enipam's interface: alerts and runbooks match on them.
const (
	// ReasonRoutingReady (Normal): a converge succeeded with every managed
	// ENI's link present, for the first time or after a failure.
	ReasonRoutingReady = "RoutingReady"
	// ReasonRoutingFailed (Warning): the kernel refused a read or a change;
	// the message carries the error. Retried with backoff.
	ReasonRoutingFailed = "RoutingFailed"
	// ReasonLinkNotFound (Warning): a listed ENI (spec.enis, status.eni.enis) has had no
	// link with its MAC for longer than --link-wait-timeout.
	ReasonLinkNotFound = "LinkNotFound"
	// ReasonInvalidENI (Warning): part of the CiliumNode cannot be routed
	// (a malformed MAC or subnet, a pool IP on an unknown ENI, two ENIs
	// with one device number).
	ReasonInvalidENI = "InvalidENI"
	// ReasonNodeRoutingMissing (Warning): the node has no NodeRouting
	// (enipam-operator has not taken it on); the agent routes nothing new
	// and removes nothing until it appears. Recorded on the CiliumNode, or
	// on the Node when there is no CiliumNode either.
	ReasonNodeRoutingMissing = "NodeRoutingMissing"
	// ReasonStartupTaintRemoved (Normal): routing turned ready and the
	// start-up taint was removed from the Node.
	ReasonStartupTaintRemoved = "StartupTaintRemoved"
	// ReasonRoutingRemoved (Normal): the NodeRouting carries the cleanup
	// annotation (enipam being uninstalled) and the agent removed
	// everything it owned from the node's kernel; the message counts it.
	ReasonRoutingRemoved = "RoutingRemoved"
)

// reference names the CiliumNode as an event's involved object.
func reference(cn *ciliumv2.CiliumNode) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: ciliumv2.SchemeGroupVersion.String(),
		Kind:       "CiliumNode",
		Name:       cn.Name,
		UID:        cn.UID,
	}
}
