package tracker

import (
	"net/netip"
	"slices"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/scheduler/room"
)

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
	// The pool controller's note is the claim controller's to read; the
	// Ready condition says what placement needs of it.
	out.Status.Conditions, out.Status.Placement = nil, nil
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

// stripNodeRouting keeps the operator's capacity report (spec.capacity)
// and, of spec.enis, what Digest reads: each ENI's ID (an ENI listed
// there wins over the CiliumNode's status.eni.enis copy of it, even with
// nothing else kept), its secondary addresses (a stamped entry settles
// only on the ENI holding its address; which entries are stamped, the
// CiliumNode says, so all are kept) and its /28 prefixes.
func stripNodeRouting(obj any) (any, error) {
	nr, ok := obj.(*enipamv1alpha1.NodeRouting)
	if !ok {
		return obj, nil
	}
	out := &enipamv1alpha1.NodeRouting{
		ObjectMeta: metav1.ObjectMeta{Name: nr.Name, ResourceVersion: nr.ResourceVersion},
		Spec:       enipamv1alpha1.NodeRoutingSpec{Capacity: nr.Spec.Capacity},
	}
	if len(nr.Spec.ENIs) > 0 {
		out.Spec.ENIs = make([]enipamv1alpha1.NodeENI, len(nr.Spec.ENIs))
		for i, e := range nr.Spec.ENIs {
			out.Spec.ENIs[i] = enipamv1alpha1.NodeENI{ID: e.ID, Addresses: slices.Clone(e.Addresses), Prefixes: slices.Clone(e.Prefixes)}
		}
	}
	return out, nil
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
