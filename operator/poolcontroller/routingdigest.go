package poolcontroller

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// The operator's cache keeps no NodeRouting's spec.enis: every node's
// ENIs are also in its CiliumNode's status.eni.enis (the copy the
// operator writes once the node has joined), which the cache keeps, and
// in the base of the node's next apply while the status is not yet
// their copy (memory.routingApplied, trimApplied). The cache's transform
// drops the list and keeps its digest (DropSpecENIs); a reconcile gives
// the list back before it decides on it (restoreSpecENIs): from the
// apply base or from the status, whichever has that digest, and else
// from the apiserver, uncached. No apply is ever made from a list the
// cache dropped: an apply without spec.enis would unroute the node.

// DropSpecENIs is the operator cache's transform of a NodeRouting's
// spec.enis: the list is dropped and its digest (16 bytes) kept in
// spec.ENIsDigest.
func DropSpecENIs(nr *enipamv1alpha1.NodeRouting) {
	if len(nr.Spec.ENIs) == 0 {
		return
	}
	nr.Spec.ENIsDigest = digestSpecENIs(nr.Spec.ENIs)
	nr.Spec.ENIs = nil
}

// digestSpecENIs is the digest of a spec.enis list: equal for lists that
// say the same as their JSON would (sameNodeENIs: an empty list or map
// is one left out), the entries in their order.
func digestSpecENIs(list []enipamv1alpha1.NodeENI) string {
	h := sha256.New()
	var buf []byte
	str := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	strs := func(l []string) {
		buf = binary.AppendUvarint(buf, uint64(len(l)))
		for _, s := range l {
			str(s)
		}
	}
	buf = binary.AppendUvarint(make([]byte, 0, 512), uint64(len(list)))
	for i := range list {
		e := &list[i]
		str(e.ID)
		str(e.MAC)
		buf = binary.AppendVarint(buf, int64(e.Number))
		str(e.PrimaryIP)
		str(e.SubnetID)
		str(e.SubnetCIDR)
		strs(e.VPCCIDRs)
		strs(e.Addresses)
		strs(e.Prefixes)
		strs(e.IPv6Prefixes)
		buf = binary.AppendUvarint(buf, uint64(len(e.Tags)))
		for _, k := range slices.Sorted(maps.Keys(e.Tags)) {
			str(k)
			str(e.Tags[k])
		}
		if len(buf) > 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	var sum [sha256.Size]byte
	return string(h.Sum(sum[:0])[:16])
}

// statusSpecENIs is spec.enis as wantRoutingENIs makes it from enis, the
// CiliumNode's status.eni.enis, with none kept for the consistency grace:
// one entry per ENI, sorted by ID.
func statusSpecENIs(enis map[string]awstypes.ENI, exclude map[string]string) []enipamv1alpha1.NodeENI {
	out := make([]enipamv1alpha1.NodeENI, 0, len(enis))
	for _, id := range slices.Sorted(maps.Keys(enis)) {
		e := enis[id]
		out = append(out, specENI(&e, exclude))
	}
	return out
}

// restoreSpecENIs gives nr, read from the cache, the spec.enis the cache
// dropped (spec.ENIsDigest): the list of the node's apply base when it
// has the digest, or the one the CiliumNode's status.eni.enis makes when
// it has it (a node whose status is the copy, every node in shape), or
// else nr read again from the apiserver, uncached, whose list is then
// kept as the node's base until the status is its copy (trimApplied). An
// object that already has its list (an answer decoded into it, or a read
// without the cache's transform) is left as it is.
func (s *nodeSync) restoreSpecENIs(ctx context.Context, nr *enipamv1alpha1.NodeRouting) error {
	d := nr.Spec.ENIsDigest
	nr.Spec.ENIsDigest = ""
	if d == "" || len(nr.Spec.ENIs) > 0 {
		return nil
	}
	if a := s.mem.routingApplied; a != nil && a.UID == nr.UID && len(a.Spec.ENIs) > 0 && digestSpecENIs(a.Spec.ENIs) == d {
		// Shared, as copyRouting shares it: no reconcile changes an
		// entry in place.
		nr.Spec.ENIs = a.Spec.ENIs
		return nil
	}
	if list := statusSpecENIs(s.orig.Status.ENI.ENIs, s.cfg.ExcludeTags); len(list) > 0 && digestSpecENIs(list) == d {
		nr.Spec.ENIs = list
		return nil
	}
	live := &enipamv1alpha1.NodeRouting{}
	if err := s.r.routings().Get(ctx, types.NamespacedName{Name: nr.Name}, live); err != nil {
		return fmt.Errorf("reading NodeRouting %s for its spec.enis, %w", nr.Name, err)
	}
	if s.r.metrics != nil {
		s.r.metrics.specENIsReads.Inc()
	}
	*nr = *live
	nr.Spec.ENIsDigest = ""
	if len(nr.Spec.ENIs) > 0 {
		s.r.rememberApplied(nr)
	}
	return nil
}

// routings is where single NodeRoutings are read uncached
// (Options.Routings).
func (r *Reconciler) routings() client.Reader {
	if r.opts.Routings != nil {
		return r.opts.Routings
	}
	return r.client
}
