package poolcontroller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/fieldowners"
	"github.com/enipam/enipam/internal/intern"
)

// The operator writes a NodeRouting by server-side apply alone, under
// FieldManagerOperator: every apply carries its whole word (the spec,
// its owner reference to the CiliumNode, and NodeStaticIPFinalizer while
// spec.staticIP names an association), so a field it no longer sends is
// removed, and the managedFields show it as the spec's one writer.

// routingApply is the operator's applied configuration of a NodeRouting.
type routingApply struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Metadata   routingApplyMeta               `json:"metadata"`
	Spec       enipamv1alpha1.NodeRoutingSpec `json:"spec"`
}

type routingApplyMeta struct {
	Name            string                  `json:"name"`
	ResourceVersion string                  `json:"resourceVersion,omitempty"`
	Finalizers      []string                `json:"finalizers,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
}

// applyRouting applies nr's spec, its CiliumNode owner references and the
// static IP's finalizer (present exactly while spec.staticIP is set) as
// the operator's whole word, creating the NodeRouting when it does not
// exist; nr is updated from the answer. With lock, the apply carries
// nr's resourceVersion: it fails with a conflict if the object changed
// since (the apiserver ignores it when the apply creates the object).
func (r *Reconciler) applyRouting(ctx context.Context, nr *enipamv1alpha1.NodeRouting, lock bool) error {
	cfg := routingApply{APIVersion: enipamv1alpha1.GroupVersion.String(), Kind: "NodeRouting", Spec: nr.Spec}
	cfg.Metadata.Name = nr.Name
	if lock {
		cfg.Metadata.ResourceVersion = nr.ResourceVersion
	}
	if nr.Spec.StaticIP != nil {
		cfg.Metadata.Finalizers = []string{enipamv1alpha1.NodeStaticIPFinalizer}
	}
	for _, o := range nr.OwnerReferences {
		if o.Kind == "CiliumNode" {
			cfg.Metadata.OwnerReferences = append(cfg.Metadata.OwnerReferences, o)
		}
	}
	if r.withoutSpecENIs() {
		cfg.Spec.ENIs = nil
	}
	// The answer is decoded into nr: into a spec.enis of its own, not the
	// one a copy of nr may share (copyRouting). A refused apply leaves nr
	// as it was.
	enis := nr.Spec.ENIs
	err := r.patchRouting(ctx, nr, &cfg)
	if err != nil && len(cfg.Spec.ENIs) > 0 && refusedForSchema(err, specENIsPath) {
		// The NodeRouting CRD is an earlier one (its chart upgraded
		// without the CRDs, which Helm never upgrades): the apply goes
		// without spec.enis, and the node's ENIs reach its agent through
		// status.eni.enis, copied at once (eniCopyWanted).
		r.refusedSpecENIs(err)
		cfg.Spec.ENIs = nil
		err = r.patchRouting(ctx, nr, &cfg)
	}
	if err != nil {
		nr.Spec.ENIs = enis
		return err
	}
	r.adoptLegacyWrites(ctx, nr)
	r.rememberApplied(nr)
	return nil
}

// patchRouting sends cfg as the operator's apply of nr, decoding the
// answer into nr.
func (r *Reconciler) patchRouting(ctx context.Context, nr *enipamv1alpha1.NodeRouting, cfg *routingApply) error {
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	nr.Spec.ENIs = nil
	return r.client.Patch(ctx, nr, client.RawPatch(types.ApplyPatchType, data),
		client.FieldOwner(enipamv1alpha1.FieldManagerOperator), client.ForceOwnership)
}

// specENIsPath is the path of spec.enis as the apiserver names a field
// its stored schema does not declare.
const specENIsPath = ".spec.enis"

// specENIsRetry is how long the NodeRouting applies go without
// spec.enis after the apiserver refused it, before the next apply tries
// it again (the CRDs may have been upgraded meanwhile).
const specENIsRetry = 10 * time.Minute

// refusedForSchema tells whether err is the apiserver's refusal of an
// apply naming the field at path as not declared in the stored schema.
func refusedForSchema(err error, path string) bool {
	return err != nil && strings.Contains(err.Error(), path+": field not declared in schema")
}

// withoutSpecENIs tells whether the NodeRouting applies go without
// spec.enis: the apiserver refused it less than specENIsRetry ago. The
// nodes' agents are then taken for ones that route status.eni.enis only.
func (r *Reconciler) withoutSpecENIs() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.noSpecENIs.IsZero() && r.now().Sub(r.noSpecENIs) < specENIsRetry
}

// refusedSpecENIs notes the apiserver's refusal of spec.enis, logged the
// first time.
func (r *Reconciler) refusedSpecENIs(err error) {
	r.mu.Lock()
	r.noSpecENIs = r.now()
	logged := r.noSpecENIsLogged
	r.noSpecENIsLogged = true
	r.mu.Unlock()
	if !logged {
		r.log.Warn("the NodeRouting CRD has no spec.enis (its chart was upgraded without the CRDs); "+
			"the nodes' ENIs go to their agents through the CiliumNodes' status.eni.enis alone until the CRDs are upgraded",
			"error", err.Error(), "retry", specENIsRetry)
	}
}

// rememberApplied keeps what the base of the node's next apply needs of
// nr, as the apiserver answered this process's write of it, while the
// cache has not seen it: its UID, generation, finalizers and spec
// (appliedRouting; a node this process has forgotten keeps nothing). Not
// the rest: every node keeps one, and the answer's managed fields and
// the agent's status were a second copy of every NodeRouting (14 MiB at
// 5000 nodes).
func (r *Reconciler) rememberApplied(nr *enipamv1alpha1.NodeRouting) {
	kept := appliedBase(nr)
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.nodes[nr.Name]; ok {
		m.routingApplied = kept
	}
}

// appliedRouting is the base of a node's next NodeRouting apply
// (memory.routingApplied): the fields of the apiserver's answer that
// readRouting and writeRouting read, no more. Not a NodeRouting:
// every node keeps one, and a NodeRouting (496 bytes, Go's 512-byte
// class) carries object meta and a status the base never reads, in the
// size class of every NodeRouting decoded and dropped beside it, whose
// spans the kept ones held in use; this is 184 bytes.
type appliedRouting struct {
	UID        types.UID
	Generation int64
	Finalizers []string
	Spec       enipamv1alpha1.NodeRoutingSpec
}

// appliedBase is what the base of the node's next apply keeps of nr
// (rememberApplied), its strings packed (packApplied).
func appliedBase(nr *enipamv1alpha1.NodeRouting) *appliedRouting {
	kept := &appliedRouting{UID: nr.UID, Generation: nr.Generation, Finalizers: slices.Clone(nr.Finalizers)}
	nr.Spec.DeepCopyInto(&kept.Spec)
	packApplied(kept)
	return kept
}

// packApplied gives the strings of an apply base (rememberApplied) no
// allocation of the answer it was decoded from: the values shared across
// nodes (zones, subnets, the tags' keys and values, the finalizer) are
// interned, the node's own are packed in one backing array, and
// spec.enis' in another, which trimApplied lets go with the list. The
// answer's other strings (its managed fields, the agent's status) are
// collected at once; those the base kept, each an allocation of its
// own, held their spans in use for as long as the node lives.
func packApplied(a *appliedRouting) {
	var own, enis intern.Packer
	own.Add((*string)(&a.UID))
	for i := range a.Finalizers {
		a.Finalizers[i] = intern.String(a.Finalizers[i])
	}
	spec := &a.Spec
	GatherOwnWords(&own, spec)
	spec.ExcludeInterfaceTags = internTags(spec.ExcludeInterfaceTags)
	if c := spec.Capacity; c != nil {
		c.AvailabilityZone, c.Reason = intern.String(c.AvailabilityZone), intern.String(c.Reason)
		for i := range c.Subnets {
			c.Subnets[i] = intern.String(c.Subnets[i])
		}
		for i := range c.SubnetSlots {
			c.SubnetSlots[i].SubnetID = intern.String(c.SubnetSlots[i].SubnetID)
		}
	}
	for i := range spec.ENIs {
		e := &spec.ENIs[i]
		enis.Add(&e.ID)
		enis.Add(&e.MAC)
		enis.Add(&e.PrimaryIP)
		e.SubnetID, e.SubnetCIDR = intern.String(e.SubnetID), intern.String(e.SubnetCIDR)
		for j := range e.VPCCIDRs {
			e.VPCCIDRs[j] = intern.String(e.VPCCIDRs[j])
		}
		enis.AddAll(e.Addresses)
		enis.AddAll(e.Prefixes)
		enis.AddAll(e.IPv6Prefixes)
		e.Tags = internTags(e.Tags)
	}
	own.Pack()
	enis.Pack()
}

// GatherOwnWords gathers into k the strings of spec that are the node's
// own (its instance, the Elastic IP record, the endpoint and remap
// queries), for the cache's transform and the apply base to pack; not
// spec.enis, which each keeps its own way.
func GatherOwnWords(k *intern.Packer, spec *enipamv1alpha1.NodeRoutingSpec) {
	k.Add(&spec.InstanceID)
	if a := spec.StaticIP; a != nil {
		k.Add(&a.AllocationID)
		k.Add(&a.PublicIP)
		k.Add(&a.InstanceID)
		k.Add(&a.ENIID)
		k.Add(&a.AssociationID)
	}
	k.AddAll(spec.EndpointQueries)
	for i := range spec.RemapQueries {
		q := &spec.RemapQueries[i]
		k.Add(&q.Address)
		k.Add(&q.ENI)
		k.Add(&q.MAC)
	}
}

// internTags is m with its keys and values interned (nil stays nil).
func internTags(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern.String(k)] = intern.String(v)
	}
	return out
}

// legacyWriters are the moves of fields earlier versions of enipam wrote
// by create and merge patch (managedFields entries of operation Update)
// to the writers that now apply them: the spec and the finalizers to the
// operator, the status to the agent. Owner references stay with whoever
// wrote them: the operator never removes its own by an apply
// (takeOverRouting drops an earlier node's).
var legacyWriters = []fieldowners.Transfer{
	{Manager: enipamv1alpha1.FieldManagerOperator, Roots: [][]string{{"f:spec"}, {"f:metadata", "f:finalizers"}}},
	{Manager: enipamv1alpha1.FieldManagerAgent, Subresource: "status", Roots: [][]string{{"f:status"}}, Create: true},
}

// adoptLegacyWrites hands the fields earlier writers wrote by create or
// merge patch to the writers that now apply them (legacyWriters), once:
// without it, those writers would share the fields, and a field its
// applier stops applying (a query answered, a record released with its
// finalizer, an ENI no longer routed) would stay. The operator does it
// for the agent too: the apiserver takes managedFields from a write of
// the main resource only, which the agent may not make. nr is the answer
// of an apply, which carries the managedFields the cache strips. A
// failure is logged and retried at the next apply.
func (r *Reconciler) adoptLegacyWrites(ctx context.Context, nr *enipamv1alpha1.NodeRouting) {
	patch, from, err := fieldowners.Adoption(nr, legacyWriters...)
	if err == nil && patch != nil {
		err = r.client.Patch(ctx, nr, client.RawPatch(types.JSONPatchType, patch))
	}
	if err != nil {
		r.log.Info("adopting earlier writers' NodeRouting fields failed", "node", nr.Name, "managers", from, "error", err)
		return
	}
	if patch != nil {
		r.log.Info("NodeRouting fields of earlier writers adopted for server-side apply", "node", nr.Name, "managers", from)
	}
}

// takeOverRouting drops from nr, the NodeRouting as read, the owner
// references stale names (an earlier CiliumNode's of the same name,
// which decideRouting decided to take over); nr is updated from the
// answer. Those references were written by another life of the node,
// so applying without them would not remove them: this one merge patch
// of the owner references does, under an optimistic lock, ahead of the
// reconcile's apply (writeRouting). Other owners stay.
func (r *Reconciler) takeOverRouting(ctx context.Context, nr *enipamv1alpha1.NodeRouting, stale []metav1.OwnerReference) error {
	orig := nr.DeepCopy()
	nr.OwnerReferences = slices.DeleteFunc(slices.Clone(nr.OwnerReferences), func(o metav1.OwnerReference) bool {
		return slices.ContainsFunc(stale, func(x metav1.OwnerReference) bool { return x.UID == o.UID })
	})
	if err := r.client.Patch(ctx, nr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("dropping the earlier CiliumNode's owner reference from NodeRouting %s, %w", nr.Name, err)
	}
	return nil
}
