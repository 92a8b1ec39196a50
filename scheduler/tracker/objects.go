package tracker

import (
	"net/netip"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/scheduler/room"
)

// notStartedSelector asks the apiserver for the pods that may still take
// a pool address: not on the host network, no address yet, not
// finished. A pod leaves the watch (a delete event) when it gets its
// address, ends or is deleted.
var notStartedSelector = fields.AndSelectors(
	fields.OneTermEqualSelector("spec.hostNetwork", "false"),
	fields.OneTermEqualSelector("status.podIP", ""),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
).String()

// pendingPod is all the tracker keeps of a pod without an address: its
// identity, whether it is being deleted, and the node it is bound to or
// nominated for. About 0.6 KB with the informer's indexes, against several
// KB for a whole Pod.
type pendingPod struct {
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
// StaticIPAnnotation), as the bind verb needs it to create the claim.
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

// DeepCopyObject makes pendingPod a runtime.Object for the informer.
func (p *pendingPod) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// owner is the pod's owner in Cilium's pool entries: "namespace/name".
func (p *pendingPod) owner() string { return p.Namespace + "/" + p.Name }

// target is the node that will give the pod its address: the one it is
// bound to, else the one it is nominated for.
func (p *pendingPod) target() string {
	if p.Node != "" {
		return p.Node
	}
	return p.Nominated
}

// stripPod is the pod informer's transform.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone
	}
	out := &pendingPod{
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

// stripClaim keeps what placement reads of a StaticIPClaim.
func stripClaim(obj any) (any, error) {
	c, ok := obj.(*enipamv1alpha1.StaticIPClaim)
	if !ok {
		return obj, nil
	}
	out := &enipamv1alpha1.StaticIPClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Name, Namespace: c.Namespace, UID: c.UID, ResourceVersion: c.ResourceVersion,
			Generation: c.Generation, DeletionTimestamp: c.DeletionTimestamp,
		},
		Spec:   c.Spec,
		Status: c.Status,
	}
	out.Status.Conditions = nil
	if r := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady); r != nil {
		out.Status.Conditions = []metav1.Condition{*r}
	}
	return out, nil
}

// ClaimOf is a claim as placement sees it.
func ClaimOf(c *enipamv1alpha1.StaticIPClaim) room.Claim {
	out := room.Claim{
		Address: c.Spec.Address, Subnet: c.Status.SubnetID, Zone: c.Status.AvailabilityZone,
		Holder: c.Status.NodeName, Target: c.Spec.NodeName,
		Checked:  c.Status.ObservedGeneration == c.Generation && c.Status.Phase != "",
		Deleting: c.DeletionTimestamp != nil,
	}
	if out.Address == "" {
		out.Address = c.Status.Address
	}
	if out.Subnet == "" {
		out.Subnet = c.Spec.SubnetID
	}
	if r := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady); r != nil {
		out.Status = r.Reason + ": " + r.Message
	}
	if c.Status.Phase == enipamv1alpha1.ClaimInvalid {
		out.Invalid = out.Status
		if out.Invalid == "" {
			out.Invalid = "the claim is invalid"
		}
	}
	return out
}

type ipEntry = ipamtypes.AllocationIP

// stripCiliumNode keeps what Digest reads: each pool and used entry's
// owner, the ENI of a stamped entry only, the release handshake, and of
// status.eni.enis the delegated prefixes and the stamped addresses.
func stripCiliumNode(obj any) (any, error) {
	cn, ok := obj.(*ciliumv2.CiliumNode)
	if !ok {
		return obj, nil
	}
	out := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: cn.Name, ResourceVersion: cn.ResourceVersion}}
	stamped := map[netip.Addr]bool{}
	if pool := cn.Spec.IPAM.Pool; pool != nil {
		out.Spec.IPAM.Pool = make(map[string]ipEntry, len(pool))
		for ip, e := range pool {
			kept := ipEntry{Owner: e.Owner}
			if e.Owner != "" {
				kept.Resource = e.Resource
				if a, err := netip.ParseAddr(ip); err == nil {
					stamped[a] = true
				}
			}
			out.Spec.IPAM.Pool[ip] = kept
		}
	}
	for id, e := range cn.Status.ENI.ENIs {
		kept := awstypes.ENI{ID: id, Prefixes: e.Prefixes}
		for _, a := range e.Addresses {
			if stamped[a.Addr] {
				kept.Addresses = append(kept.Addresses, a)
			}
		}
		if len(kept.Prefixes)+len(kept.Addresses) == 0 {
			continue
		}
		if out.Status.ENI.ENIs == nil {
			out.Status.ENI.ENIs = map[string]awstypes.ENI{}
		}
		out.Status.ENI.ENIs[id] = kept
	}
	if used := cn.Status.IPAM.Used; used != nil {
		out.Status.IPAM.Used = make(map[string]ipEntry, len(used))
		for ip, e := range used {
			out.Status.IPAM.Used[ip] = ipEntry{Owner: e.Owner}
		}
	}
	out.Status.IPAM.ReleaseIPs = cn.Status.IPAM.ReleaseIPs
	return out, nil
}

// stripNodeRouting keeps the operator's capacity report (spec.capacity).
func stripNodeRouting(obj any) (any, error) {
	nr, ok := obj.(*enipamv1alpha1.NodeRouting)
	if !ok {
		return obj, nil
	}
	return &enipamv1alpha1.NodeRouting{
		ObjectMeta: metav1.ObjectMeta{Name: nr.Name, ResourceVersion: nr.ResourceVersion},
		Spec:       enipamv1alpha1.NodeRoutingSpec{Capacity: nr.Spec.Capacity},
	}, nil
}

// NewScheme returns a scheme with the types the tracker reads: core
// Kubernetes, Cilium's v2 and enipam's.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ciliumv2.AddToScheme, enipamv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
