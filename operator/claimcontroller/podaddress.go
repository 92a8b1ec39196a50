package claimcontroller

import (
	"context"
	"fmt"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// EventWrongAddress is the event of a claim whose pod started with
// another address than the claim's.
const EventWrongAddress = "WrongAddress"

var wrongAddressDesc = prometheus.NewDesc("enipam_static_ip_wrong_address_total",
	"Static-IP pods found running with another address than their claim's (Cilium's agent saw the claim's stamp too late); each is deleted so its StatefulSet recreates it, and the new pod gets its own.",
	nil, nil)

// checkPodAddress finds a claim's pod that runs on the claim's node with
// another address than the claim's, as Cilium's agent reports it
// (status.ipam.used): the agent hands a stamped entry to its owner first,
// but a pod started before the agent saw the stamp got any free address.
// Such a pod is deleted (that pod only: its UID is a precondition) when a
// StatefulSet controls it, so the recreated pod gets the stamped address;
// st says so, with an event, and the count is kept. stamps are the
// claim's stamps; a pod that already holds its stamped address is not
// read.
//
// A claim no bind asked a node of (spec.nodeName empty: made for a pod
// that was bound already, or whose earlier claim was deleted while it
// ran) may have its pod running on any node, with an address it got
// before the claim existed: the pod is read to learn its node.
func (r *Reconciler) checkPodAddress(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, st *enipamv1alpha1.StaticIPClaimStatus, stamps []stamp) {
	node := c.Spec.NodeName
	if st.Address == "" {
		return
	}
	for _, s := range stamps {
		if s.ip == st.Address && s.used {
			return
		}
	}
	if node == "" {
		pod := &corev1.Pod{}
		if err := r.pods().Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, pod); err != nil {
			return
		}
		node = pod.Spec.NodeName
	}
	if node == "" {
		return
	}
	// The node's report first (cached): the pod is read only when the
	// agent lists another address for its owner.
	cn := &ciliumv2.CiliumNode{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: node}, cn); err != nil {
		return
	}
	other := false
	for ip, e := range cn.Status.IPAM.Used {
		other = other || (e.Owner == c.Owner() && ip != st.Address)
	}
	if !other {
		return
	}
	pod := &corev1.Pod{}
	if err := r.pods().Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, pod); err != nil {
		return
	}
	// The pod read must be the one holding it: a pod recreated under the
	// same name may start while the old one's entry is still listed.
	ip := pod.Status.PodIP
	if pod.Spec.NodeName != node || ip == "" || ip == st.Address || pod.DeletionTimestamp != nil || cn.Status.IPAM.Used[ip].Owner != c.Owner() {
		return
	}
	msg := fmt.Sprintf("pod %s runs on node %s with %s, not with its claim's %s", c.Owner(), node, ip, st.Address)
	ref := metav1.GetControllerOf(pod)
	restart := ref != nil && ref.Kind == "StatefulSet"
	if restart {
		err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			msg += "; the pod was deleted so its StatefulSet recreates it with its own address"
		default:
			msg += fmt.Sprintf("; deleting the pod failed: %v", err)
		}
	} else {
		msg += "; no StatefulSet controls the pod: delete it so it starts again with its own address"
	}
	r.wrongAddress.Add(1)
	r.events.Eventf(c, nil, corev1.EventTypeWarning, EventWrongAddress, "Check", "%s", msg)
	r.log.Warn("static-IP pod runs with another address", "claim", c.Owner(), "node", node, "ip", ip, "want", st.Address, "restarted", restart)
	setReady(st, metav1.ConditionFalse, enipamv1alpha1.ReasonPodHasOtherAddress, msg)
}

// pods is where single pods are read: uncached (Options.Pods).
func (r *Reconciler) pods() client.Reader {
	if r.opts.Pods != nil {
		return r.opts.Pods
	}
	return r.client
}
