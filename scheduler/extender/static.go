package extender

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/room"
)

// static reports whether pod is a static-IP pod (it carries
// StaticIPAnnotation, or a StaticIPClaim of its name exists) and its
// claim. The error says why its claim cannot be placed yet (being
// released, not checked by enipam-operator yet): filter answers it as an
// error, so kube-scheduler retries the pod with backoff.
func (e *Extender) static(pod *corev1.Pod) (room.Claim, bool, error) {
	c, ok := e.state.Claim(pod.Namespace, pod.Name)
	if !ok {
		return room.Claim{}, pod.Annotations[enipamv1alpha1.StaticIPAnnotation] != "", nil
	}
	switch {
	case c.Deleting:
		return c, true, fmt.Errorf("static IP claim %s/%s is being released; the pod waits until it is gone", pod.Namespace, pod.Name)
	case !c.Checked:
		return c, true, fmt.Errorf("static IP claim %s/%s is not checked by enipam-operator yet", pod.Namespace, pod.Name)
	}
	return c, true, nil
}

// filterStatic keeps the nodes that can hold the static address a pod's
// claim already has (room.AssessStatic), refusing every node with the
// claim's reason when the operator found it invalid (counted
// static_invalid: no node lacks anything then). Such a pod takes no free
// pool address, so it is never held against a node.
func (e *Extender) filterStatic(args *extenderv1.ExtenderArgs, pod *corev1.Pod, names []string, c *room.Claim) *extenderv1.ExtenderFilterResult {
	owner := pod.Namespace + "/" + pod.Name
	failed := extenderv1.FailedNodesMap{}
	if c.Invalid != "" {
		for _, n := range names {
			failed[n] = "static IP claim " + owner + ": " + c.Invalid
		}
		e.metrics.refusals.WithLabelValues("static_invalid").Add(float64(len(names)))
		return filterResult(args, nil, failed)
	}
	var passed []string
	nodes, _ := e.state.View(pod, names, e.now())
	for i := range nodes {
		v := room.AssessStatic(&nodes[i], owner, c)
		if v.Kind.Fits() {
			passed = append(passed, nodes[i].Name)
			continue
		}
		failed[nodes[i].Name] = v.Reason
		e.metrics.refusals.WithLabelValues(v.Kind.String()).Inc()
	}
	passed = e.keepMoveTarget(owner, c, passed, failed)
	return filterResult(args, passed, failed)
}

// keepMoveTarget narrows the nodes that passed to the claim's target
// while its address moves there: the last bind asked the claim for that
// node (spec.nodeName), the operator reassigned the address onto its ENIs
// (status.nodeName names it) and has not stamped it there yet. A bind
// retry onto another node would ask the claim elsewhere mid-move, and the
// operator would move the address again as soon as it landed. Only while
// the target itself passes (kube-scheduler's filters included: a cordoned
// or vanished target lets every other node through).
func (e *Extender) keepMoveTarget(owner string, c *room.Claim, passed []string, failed extenderv1.FailedNodesMap) []string {
	t := c.Target
	if t == "" || c.Holder != t || !slices.Contains(passed, t) {
		return passed
	}
	if ip, _ := e.state.Settled(t, owner); ip != "" {
		return passed
	}
	for _, n := range passed {
		if n != t {
			failed[n] = fmt.Sprintf("static IP %s is moving onto node %s", c.Address, t)
			e.metrics.refusals.WithLabelValues("static_moving").Inc()
		}
	}
	return []string{t}
}

// rememberedIntent is a static-IP pod's intent as filter saw it.
type rememberedIntent struct {
	intent waiting.Intent
	at     time.Time
}

// intentTTL bounds how long filter's memory of a pod's intent is kept.
const intentTTL = 10 * time.Minute

// remember keeps what a static-IP pod asks, from the pod filter was given:
// bind reads it when the tracker has not seen the pod yet (its watch
// lags kube-scheduler's own).
func (e *Extender) remember(pod *corev1.Pod) {
	now := e.now()
	in := waiting.Intent{
		Static:    pod.Annotations[enipamv1alpha1.StaticIPAnnotation],
		UnusedTTL: pod.Annotations[enipamv1alpha1.StaticIPUnusedTTLAnnotation],
		PublicIP:  pod.Annotations[enipamv1alpha1.PublicIPAnnotation],
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "StatefulSet" {
		in.StatefulSet, in.SetUID = ref.Name, ref.UID
	}
	e.intents.Store(pod.UID, rememberedIntent{intent: in, at: now})
	e.intents.Range(func(k, v any) bool {
		if now.Sub(v.(rememberedIntent).at) > intentTTL {
			e.intents.Delete(k)
		}
		return true
	})
}

// intent returns what a pod asks of a static address: the tracker's word,
// else filter's memory.
func (e *Extender) intent(uid types.UID) waiting.Intent {
	if in, ok := e.state.Intent(uid); ok {
		return in
	}
	if v, ok := e.intents.Load(uid); ok {
		return v.(rememberedIntent).intent
	}
	return waiting.Intent{}
}
