package claimcontroller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
)

// status computes the claim's status from the spec, the pools, EC2 (the
// inventory) and the pool controller's note (status.placement, when it is
// about the claim as it is), and how soon to look again.
func (r *Reconciler) status(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, pod *podLook) (st *enipamv1alpha1.StaticIPClaimStatus, requeue time.Duration) {
	st = c.Status.DeepCopy()
	st.ObservedGeneration = c.Generation
	owner := c.Owner()
	note := claims.CurrentNote(c, r.opts.Term)

	stamps, err := r.stampedOn(ctx, owner)
	if err != nil {
		return st, time.Second
	}
	// A pod that holds its address in a pool exists; only the others are
	// asked about. Nothing in the cache changes when such a pod goes (no
	// pod is cached), so while one exists without its address, or cannot
	// be read, the claim is looked at again on the recheck interval.
	exists := slices.ContainsFunc(stamps, func(s stamp) bool { return s.used })
	if !exists {
		exists, err = r.lookAtPod(ctx, c, pod)
		if err != nil || exists {
			defer func() {
				if requeue == 0 || requeue > r.opts.Recheck {
					requeue = r.opts.Recheck
				}
			}()
		}
	}
	switch {
	case err != nil:
	case exists:
		st.LastUsed = nil
	case st.LastUsed == nil:
		st.LastUsed = &metav1.Time{Time: r.now()}
	}
	var addr netip.Addr
	if c.Spec.Address != "" {
		var why, reason string
		addr, reason, why = r.check(ctx, c)
		if why != "" {
			st.Address, st.SubnetID, st.AvailabilityZone, st.NodeName, st.ENIID = c.Spec.Address, "", "", "", ""
			return invalid(st, reason, why), r.opts.Recheck
		}
	} else {
		addr, _ = netip.ParseAddr(st.Address)
		if note != nil && note.Reason == enipamv1alpha1.ReasonAddressTaken && !slices.ContainsFunc(stamps, func(s stamp) bool { return s.ip == st.Address }) {
			addr = netip.Addr{} // taken before its stamp held: another is picked
		}
		if addr.IsValid() && r.precededBy(ctx, c, addr) != "" {
			addr = netip.Addr{} // another claim keeps it: another is picked
		}
		if len(stamps) > 0 && !addr.IsValid() {
			addr, _ = netip.ParseAddr(stamps[0].ip)
		}
		if c.Spec.SubnetID != "" {
			if _, ok := r.inv.Subnet(c.Spec.SubnetID); !ok {
				return invalid(st, enipamv1alpha1.ReasonAddressOutside, fmt.Sprintf("subnet %s is not one of the VPCs enipam serves", c.Spec.SubnetID)), r.opts.Recheck
			}
		}
	}

	st.Address, st.SubnetID, st.AvailabilityZone, st.NodeName, st.ENIID = "", c.Spec.SubnetID, "", "", ""
	if sub, ok := r.inv.Subnet(c.Spec.SubnetID); ok {
		st.AvailabilityZone = sub.AZ
	}
	if addr.IsValid() {
		st.Address = addr.String()
		if sub, ok := r.inv.SubnetOf(addr); ok {
			st.SubnetID, st.AvailabilityZone = sub.ID, sub.AZ
		}
		if loc := r.inv.Locate(addr); loc.Found {
			st.ENIID = loc.ENI.ID
			st.NodeName = r.nodeOf(ctx, loc.ENI.InstanceID)
		}
	}

	target := c.Spec.NodeName
	var bound *stamp
	for i := range stamps {
		if s := &stamps[i]; s.ip == st.Address && !s.handshake && !s.other && (target == "" || target == s.node) {
			bound = s
		}
	}
	switch {
	case bound != nil:
		st.NodeName, st.Phase = bound.node, enipamv1alpha1.ClaimBound
		setReady(st, metav1.ConditionTrue, enipamv1alpha1.ReasonBound, fmt.Sprintf("%s is stamped for pod %s in node %s's pool (%s)", st.Address, owner, bound.node, bound.eni))
		return st, 0
	case target == "":
		st.Phase = enipamv1alpha1.ClaimPending
		msg := "no pod of this claim has been bound yet"
		if st.Address != "" {
			msg = fmt.Sprintf("%s is kept for pod %s; %s", st.Address, owner, msg)
		}
		setReady(st, metav1.ConditionFalse, enipamv1alpha1.ReasonWaitingForNode, msg)
		return st, 0
	}
	st.Phase = enipamv1alpha1.ClaimPlacing
	reason, msg := enipamv1alpha1.ReasonPlacing, fmt.Sprintf("placing the address on node %s", target)
	cn := &ciliumv2.CiliumNode{}
	switch err := r.client.Get(ctx, types.NamespacedName{Name: target}, cn); {
	case err != nil:
		reason, msg = enipamv1alpha1.ReasonNodeUnknown, fmt.Sprintf("node %s has no CiliumNode: %v", target, err)
	case st.AvailabilityZone != "" && cn.Spec.ENI.AvailabilityZone != "" && cn.Spec.ENI.AvailabilityZone != st.AvailabilityZone:
		reason, msg = enipamv1alpha1.ReasonWrongZone, fmt.Sprintf("node %s is in %s; %s lives in %s, %s", target, cn.Spec.ENI.AvailabilityZone, st.Address, st.SubnetID, st.AvailabilityZone)
	case note != nil:
		reason, msg = note.Reason, note.Message
	}
	setReady(st, metav1.ConditionFalse, reason, msg)
	return st, r.opts.Recheck
}

// check finds what is wrong with a requested address, if anything: the
// reason and message of an Invalid claim, or "".
func (r *Reconciler) check(ctx context.Context, c *enipamv1alpha1.StaticIPClaim) (netip.Addr, string, string) {
	addr, err := netip.ParseAddr(c.Spec.Address)
	if err != nil || !addr.Is4() {
		return addr, enipamv1alpha1.ReasonAddressOutside, fmt.Sprintf("%q is not an IPv4 address", c.Spec.Address)
	}
	sub, ok := r.inv.SubnetOf(addr)
	if !ok {
		return addr, enipamv1alpha1.ReasonAddressOutside, fmt.Sprintf("%s is in no subnet of the VPCs enipam serves", addr)
	}
	first, last := sub.CIDR.Masked().Addr(), lastAddr(sub.CIDR)
	if addr.Less(first.Next().Next().Next().Next()) || addr == last {
		return addr, enipamv1alpha1.ReasonAddressOutside, fmt.Sprintf("%s is reserved by AWS in %s (%s)", addr, sub.ID, sub.CIDR)
	}
	if c.Spec.SubnetID != "" && c.Spec.SubnetID != sub.ID {
		return addr, enipamv1alpha1.ReasonAddressOutside, fmt.Sprintf("%s is in %s, not in %s", addr, sub.ID, c.Spec.SubnetID)
	}
	if o := r.precededBy(ctx, c, addr); o != "" {
		return addr, enipamv1alpha1.ReasonAddressTaken, fmt.Sprintf("%s is claimed by %s", addr, o)
	}
	loc := r.inv.Locate(addr)
	switch {
	case loc.Primary:
		return addr, enipamv1alpha1.ReasonAddressTaken, fmt.Sprintf("%s is the primary address of %s", addr, loc.ENI.ID)
	case loc.InPrefix:
		return addr, enipamv1alpha1.ReasonAddressTaken, fmt.Sprintf("%s lies in a /28 prefix delegated to %s", addr, loc.ENI.ID)
	case loc.Found && loc.ENI.Tags[cloud.TagCluster] != r.opts.Cluster && r.nodeOf(ctx, loc.ENI.InstanceID) == "":
		return addr, enipamv1alpha1.ReasonAddressTaken, fmt.Sprintf("%s is held by %s, an ENI enipam does not manage", addr, loc.ENI.ID)
	}
	if nodes, err := claims.PoolNodes(ctx, r.client, addr.String()); err == nil {
		for _, cn := range nodes {
			key := addr.String()
			if o := cn.Spec.IPAM.Pool[key].Owner; o != "" && o != c.Owner() {
				return addr, enipamv1alpha1.ReasonAddressTaken, fmt.Sprintf("%s is kept for %s in node %s's pool", addr, o, cn.Name)
			}
			if o := cn.Status.IPAM.Used[key].Owner; o != "" && o != c.Owner() {
				return addr, enipamv1alpha1.ReasonAddressTaken, fmt.Sprintf("%s is in use by pod %s on node %s", addr, o, cn.Name)
			}
		}
	}
	return addr, "", ""
}

// precededBy names the claim that keeps addr before c (claims.Precedes),
// "" if none: an address is taken as soon as another claim records it,
// in its spec or its status. The cache's index cannot fail but on a
// missing index; then "".
func (r *Reconciler) precededBy(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, addr netip.Addr) string {
	var others enipamv1alpha1.StaticIPClaimList
	if err := r.client.List(ctx, &others, client.MatchingFields{claims.IndexClaimAddress: addr.String()}); err != nil {
		return ""
	}
	for i := range others.Items {
		o := &others.Items[i]
		if o.Owner() != c.Owner() && claims.Records(o, addr.String()) && claims.Precedes(o, c, addr.String()) {
			return o.Owner()
		}
	}
	return ""
}

// nodeOf names the node running an instance, "" if none.
func (r *Reconciler) nodeOf(ctx context.Context, instanceID string) string {
	if instanceID == "" {
		return ""
	}
	var nodes ciliumv2.CiliumNodeList
	if err := r.client.List(ctx, &nodes, client.MatchingFields{claims.IndexInstance: instanceID}, client.UnsafeDisableDeepCopy); err != nil || len(nodes.Items) == 0 {
		return ""
	}
	return nodes.Items[0].Name
}

// invalid makes st say the claim cannot be honoured; nothing moves.
func invalid(st *enipamv1alpha1.StaticIPClaimStatus, reason, msg string) *enipamv1alpha1.StaticIPClaimStatus {
	st.Phase = enipamv1alpha1.ClaimInvalid
	setReady(st, metav1.ConditionFalse, reason, msg)
	return st
}

func setReady(st *enipamv1alpha1.StaticIPClaimStatus, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: enipamv1alpha1.ClaimReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: st.ObservedGeneration,
	})
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := 32 - p.Bits()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= (1 << host) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// statefulSetOf splits a StatefulSet pod's name into its set and ordinal.
func statefulSetOf(name string) (string, int, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return name[:i], n, true
}

// sameStatus compares two statuses as the apiserver stores them; a
// condition's transition time changes only with its status.
func sameStatus(a, b *enipamv1alpha1.StaticIPClaimStatus) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
