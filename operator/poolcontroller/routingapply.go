package poolcontroller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/fieldowners"
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
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := r.client.Patch(ctx, nr, client.RawPatch(types.ApplyPatchType, data),
		client.FieldOwner(enipamv1alpha1.FieldManagerOperator), client.ForceOwnership); err != nil {
		return err
	}
	r.adoptLegacyWrites(ctx, nr)
	r.rememberApplied(nr)
	return nil
}

// rememberApplied keeps what the base of the node's next apply needs of
// nr, as the apiserver answered this process's write of it, while the
// cache has not seen it: its identity, generation, finalizers and spec
// (a node this process has forgotten keeps nothing). Not the rest: every
// node keeps one, and the answer's managed fields and the agent's status
// were a second copy of every NodeRouting (14 MiB at 5000 nodes).
func (r *Reconciler) rememberApplied(nr *enipamv1alpha1.NodeRouting) {
	kept := &enipamv1alpha1.NodeRouting{
		ObjectMeta: metav1.ObjectMeta{Name: nr.Name, UID: nr.UID, Generation: nr.Generation, Finalizers: slices.Clone(nr.Finalizers)},
		Spec:       *nr.Spec.DeepCopy(),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.nodes[nr.Name]; ok {
		m.routingApplied = kept
	}
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
