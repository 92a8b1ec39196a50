// Package waiting is the one model of pods waiting for an address, shared
// by enipam-operator's demand watch (operator/demand: how many addresses a
// node's pool must make room for) and enipam-scheduler's tracker
// (scheduler/tracker: how many of a node's free addresses are promised).
//
// A pod waits for an address while it has none and has not finished; the
// apiserver sends only such pods (Selector, BoundSelector), and an
// informer keeps of each only a Pod (Slim). A pod leaves the watch (a
// delete event) when it gets its address, ends or is deleted; one that
// got its address keeps waiting, as far as the pool is concerned, until
// Cilium's agent lists it in status.ipam.used, which it rewrites at most
// once per ipam.ciliumNodeUpdateRate (15 s by default): Started keeps
// those for a grace period.
//
// Nothing here locks: each user guards its Set and Started with its own
// mutex.
package waiting

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// unaddressed selects the pods that may still take a pool address: not
// on the host network, no address yet, not finished (Kubernetes 1.37.1,
// pkg/registry/core/pod/strategy.go ToSelectableFields lists the fields a
// Pod can be selected by: spec.nodeName, spec.hostNetwork, status.podIP
// and status.phase among them).
var unaddressed = []fields.Selector{
	fields.OneTermEqualSelector("spec.hostNetwork", "false"),
	fields.OneTermEqualSelector("status.podIP", ""),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
}

// Selector is the field selector of the pods waiting for an address,
// bound to a node or not (the scheduler also counts pods nominated for a
// node).
var Selector = fields.AndSelectors(unaddressed...).String()

// BoundSelector is Selector for the pods already bound to a node.
var BoundSelector = fields.AndSelectors(append([]fields.Selector{fields.OneTermNotEqualSelector("spec.nodeName", "")}, unaddressed...)...).String()

// Pod is all that is kept of a pod waiting for an address: its identity,
// whether it is being deleted, the node it is bound to or nominated for,
// and what it asks of a static address. About 0.6 KB with an informer's
// indexes, against several KB for a whole Pod.
type Pod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Node is spec.nodeName, and Nominated status.nominatedNodeName (set
	// by preemption, and by the scheduler while a slow bind is under way).
	Node, Nominated string
	// Intent is what the pod asks of a static address, from its
	// annotations and controller.
	Intent Intent
}

// Intent is a pod's request for a static address (v1alpha1's
// StaticIPAnnotation), as the scheduler's bind verb needs it to create the
// claim.
type Intent struct {
	// Static is the annotation's value ("" when absent): "true" or a
	// reclaim policy.
	Static string
	// UnusedTTL is StaticIPUnusedTTLAnnotation's value.
	UnusedTTL string
	// PublicIP is PublicIPAnnotation's value.
	PublicIP string
	// StatefulSet names the pod's controlling StatefulSet, and SetUID its
	// UID; empty otherwise.
	StatefulSet string
	SetUID      types.UID
}

// DeepCopyObject makes Pod a runtime.Object for an informer.
func (p *Pod) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// Owner is the pod's owner in Cilium's pool entries: "namespace/name".
func (p *Pod) Owner() string { return p.Namespace + "/" + p.Name }

// Target is the node that will give the pod its address: the one it is
// bound to, else the one it is nominated for ("" if neither).
func (p *Pod) Target() string {
	if p.Node != "" {
		return p.Node
	}
	return p.Nominated
}

// Deleting reports whether the pod has a deletion timestamp.
func (p *Pod) Deleting() bool { return p.DeletionTimestamp != nil }

// Static reports whether the pod asks for a static address
// (enipam.io/static-ip): it gets an owner-stamped address of its own,
// outside the dynamic pool.
func (p *Pod) Static() bool { return p.Intent.Static != "" }

// Slim is an informer's transform: a *corev1.Pod becomes a *Pod; anything
// else (a tombstone) passes unchanged.
func Slim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp,
		},
		Node:      p.Spec.NodeName,
		Nominated: p.Status.NominatedNodeName,
		Intent: Intent{
			Static:    p.Annotations[enipamv1alpha1.StaticIPAnnotation],
			UnusedTTL: p.Annotations[enipamv1alpha1.StaticIPUnusedTTLAnnotation],
			PublicIP:  p.Annotations[enipamv1alpha1.PublicIPAnnotation],
		},
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "StatefulSet" {
		out.Intent.StatefulSet, out.Intent.SetUID = ref.Name, ref.UID
	}
	return out, nil
}

// Set holds the pods waiting for an address, by UID and by the node they
// wait on (Target). A node's pods are a list, not a map: most nodes have
// one or none, and a map per node cost 256 bytes for one pod.
type Set struct {
	pods   map[types.UID]*Pod
	byNode map[string][]*Pod
}

// NewSet returns an empty Set.
func NewSet() *Set {
	return &Set{pods: map[types.UID]*Pod{}, byNode: map[string][]*Pod{}}
}

// Put files p under its UID and its target node, replacing the pod of
// the same UID, which it returns (nil if none).
func (s *Set) Put(p *Pod) (old *Pod) {
	old = s.Remove(p.UID)
	s.pods[p.UID] = p
	if node := p.Target(); node != "" {
		s.byNode[node] = append(s.byNode[node], p)
	}
	return old
}

// Remove forgets the pod of uid and returns it (nil if none).
func (s *Set) Remove(uid types.UID) *Pod {
	p, ok := s.pods[uid]
	if !ok {
		return nil
	}
	delete(s.pods, uid)
	if node := p.Target(); node != "" {
		on := slices.DeleteFunc(s.byNode[node], func(q *Pod) bool { return q.UID == uid })
		if len(on) == 0 {
			delete(s.byNode, node)
		} else {
			s.byNode[node] = on
		}
	}
	return p
}

// Get returns the pod of uid.
func (s *Set) Get(uid types.UID) (*Pod, bool) {
	p, ok := s.pods[uid]
	return p, ok
}

// On returns the pods waiting on node, each once; the list is the Set's
// own, to read only, and valid until the Set next changes.
func (s *Set) On(node string) []*Pod { return s.byNode[node] }

// Len returns how many pods the Set holds.
func (s *Set) Len() int { return len(s.pods) }

// Started holds the pods that left the watch with an address, by node
// and owner ("namespace/name"), until Cilium's agent lists them or Grace
// passes.
type Started struct {
	// Grace bounds how long a started pod counts. Keep it above the
	// agent's update interval (ipam.ciliumNodeUpdateRate, 15 s by
	// default).
	Grace time.Duration
	at    map[string]map[string]time.Time
}

// NewStarted returns an empty Started with grace.
func NewStarted(grace time.Duration) *Started {
	return &Started{Grace: grace, at: map[string]map[string]time.Time{}}
}

// Add records that owner left the watch on node at at.
func (s *Started) Add(node, owner string, at time.Time) {
	if s.at[node] == nil {
		s.at[node] = map[string]time.Time{}
	}
	s.at[node][owner] = at
}

// Count returns how many pods started on node still count at now: within
// Grace and not listed by the agent. It forgets the others.
func (s *Started) Count(node string, now time.Time, listed func(owner string) bool) int {
	s.Forget(node, func(owner string) bool { return now.Sub(s.at[node][owner]) > s.Grace || listed(owner) })
	return len(s.at[node])
}

// Forget drops the pods started on node for which gone holds (the agent
// lists them).
func (s *Started) Forget(node string, gone func(owner string) bool) {
	for owner := range s.at[node] {
		if gone(owner) {
			delete(s.at[node], owner)
		}
	}
	if len(s.at[node]) == 0 {
		delete(s.at, node)
	}
}

// Sweep forgets every pod started longer than Grace before now.
func (s *Started) Sweep(now time.Time) {
	for node := range s.at {
		s.Forget(node, func(owner string) bool { return now.Sub(s.at[node][owner]) > s.Grace })
	}
}

// Len returns how many started pods are held, on every node.
func (s *Started) Len() int {
	n := 0
	for _, owners := range s.at {
		n += len(owners)
	}
	return n
}
