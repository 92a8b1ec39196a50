package poolcontroller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
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
// since (or is gone), and never creates one.
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
	r.mu.Lock()
	if m, ok := r.nodes[nr.Name]; ok {
		m.routingApplied = nr.DeepCopy()
	}
	r.mu.Unlock()
	return nil
}

// adoptLegacyWrites hands the fields an earlier operator wrote by merge
// patch or create (managedFields entries of operation Update on the main
// resource that own part of the spec, the finalizers or the owner
// references) to FieldManagerOperator's applied set, once: without it,
// those writers would share the fields, and a field the operator stops
// applying would stay. nr is the answer of an apply, which carries the
// managedFields the cache strips. A failure is logged and retried at the
// next apply.
func (r *Reconciler) adoptLegacyWrites(ctx context.Context, nr *enipamv1alpha1.NodeRouting) {
	legacy := sets.New[string]()
	for _, m := range nr.ManagedFields {
		if m.Operation == metav1.ManagedFieldsOperationUpdate && m.Subresource == "" && m.FieldsV1 != nil && ownsOperatorFields(m.FieldsV1.Raw) {
			legacy.Insert(m.Manager)
		}
	}
	if legacy.Len() == 0 {
		return
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(nr, legacy, enipamv1alpha1.FieldManagerOperator)
	if err != nil || patch == nil {
		if err != nil {
			r.log.Info("adopting earlier writers' NodeRouting fields failed", "node", nr.Name, "error", err)
		}
		return
	}
	if err := r.client.Patch(ctx, nr, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		r.log.Info("adopting earlier writers' NodeRouting fields failed", "node", nr.Name, "managers", sets.List(legacy), "error", err)
		return
	}
	r.log.Info("NodeRouting fields of earlier writers adopted by server-side apply", "node", nr.Name, "managers", sets.List(legacy))
}

// ownsOperatorFields reports whether a managedFields set (FieldsV1 JSON)
// holds any of the fields the operator applies.
func ownsOperatorFields(raw []byte) bool {
	var set struct {
		Spec     json.RawMessage `json:"f:spec"`
		Metadata struct {
			Finalizers      json.RawMessage `json:"f:finalizers"`
			OwnerReferences json.RawMessage `json:"f:ownerReferences"`
		} `json:"f:metadata"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return false
	}
	return set.Spec != nil || set.Metadata.Finalizers != nil || set.Metadata.OwnerReferences != nil
}

// takeOverRouting drops from nr the owner references of an earlier
// CiliumNode of the same name (a node deleted and registered again before
// the garbage collector ran): with its old owner's UID the garbage
// collector would delete the NodeRouting from under the new node, its
// agent's report and the operator's word with it. Those references were
// written by another life of the node, so applying without them would not
// remove them: this one merge patch of the owner references does, under
// an optimistic lock. Other owners stay.
func (r *Reconciler) takeOverRouting(ctx context.Context, nr *enipamv1alpha1.NodeRouting, want []metav1.OwnerReference) error {
	stale := slices.ContainsFunc(nr.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "CiliumNode" && !slices.ContainsFunc(want, func(w metav1.OwnerReference) bool { return w.UID == o.UID })
	})
	if !stale {
		return nil
	}
	orig := nr.DeepCopy()
	nr.OwnerReferences = slices.DeleteFunc(slices.Clone(nr.OwnerReferences), func(o metav1.OwnerReference) bool {
		return o.Kind == "CiliumNode" && !slices.ContainsFunc(want, func(w metav1.OwnerReference) bool { return w.UID == o.UID })
	})
	if err := r.client.Patch(ctx, nr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("dropping the earlier CiliumNode's owner reference from NodeRouting %s, %w", nr.Name, err)
	}
	return nil
}
