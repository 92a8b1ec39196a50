// Package fieldowners hands fields that earlier writers wrote by create,
// update or patch to a writer that now writes them by server-side apply.
//
// A field stays in an object while any manager owns it: when a writer
// moves to server-side apply, the fields its earlier versions wrote are
// still owned by their Update entries too, so a field it stops applying
// would stay. Kubernetes' csaupgrade moves a whole Update entry; this
// moves only the parts of the entries under the roots the applier owns
// (say the spec, or the finalizers), leaving whatever else an earlier
// writer touched (a label, another owner reference) to it.
package fieldowners

import (
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Transfer is a move of fields from earlier writers to an applier.
type Transfer struct {
	// Manager is the applier, writing Subresource ("" for the main
	// resource) by server-side apply.
	Manager, Subresource string
	// Roots are the paths, in the FieldsV1 format, of the fields moved
	// from every entry of operation Update on Subresource, such as
	// {"f:spec"} or {"f:metadata", "f:finalizers"}.
	Roots [][]string
	// Create: when the applier has no entry yet, one is made; else
	// nothing moves until it has one.
	Create bool
}

// Adoption returns a JSON patch carrying out the transfers on obj's
// managedFields, and the managers it takes fields from. The patch is nil
// when there is nothing to move. obj is the answer of a write, which
// carries the managedFields (caches strip them). The patch sets the
// resourceVersion obj has, so it fails with a conflict, and changes
// nothing, if the object changed since. The apiserver takes
// managedFields from a write of the main resource only: a write through
// a subresource cannot carry the patch.
func Adoption(obj metav1.Object, transfers ...Transfer) ([]byte, []string, error) {
	entries := slices.Clone(obj.GetManagedFields())
	var from []string
	for _, t := range transfers {
		var err error
		var moved []string
		if entries, moved, err = transfer(entries, t); err != nil {
			return nil, nil, err
		}
		from = append(from, moved...)
	}
	if len(from) == 0 {
		return nil, nil, nil
	}
	entries = slices.DeleteFunc(entries, func(m metav1.ManagedFieldsEntry) bool {
		return m.FieldsV1 != nil && m.FieldsV1.GetRawString() == "{}"
	})
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": entries},
		// replace, not test: a stale version is then etcd's conflict.
		{"op": "replace", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()},
	})
	return patch, from, err
}

// transfer carries out t on entries.
func transfer(entries []metav1.ManagedFieldsEntry, t Transfer) ([]metav1.ManagedFieldsEntry, []string, error) {
	to := slices.IndexFunc(entries, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == t.Manager && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == t.Subresource
	})
	manager, subresource, roots := t.Manager, t.Subresource, t.Roots
	target := map[string]any{}
	if to >= 0 {
		var err error
		if target, err = decode(entries[to]); err != nil {
			return nil, nil, err
		}
	} else if !t.Create {
		return entries, nil, nil
	}
	var from []string
	apiVersion := ""
	for i := range entries {
		m := &entries[i]
		if m.Operation != metav1.ManagedFieldsOperationUpdate || m.Subresource != subresource || m.FieldsV1 == nil {
			continue
		}
		set, err := decode(*m)
		if err != nil {
			return nil, nil, err
		}
		moved := false
		for _, root := range roots {
			if part, ok := take(set, root); ok {
				put(target, root, part)
				moved = true
			}
		}
		if !moved {
			continue
		}
		from = append(from, m.Manager)
		apiVersion = m.APIVersion
		if err := encode(m, set); err != nil {
			return nil, nil, err
		}
	}
	if len(from) == 0 {
		return entries, nil, nil
	}
	if to < 0 {
		entries = append(entries, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: apiVersion, FieldsType: "FieldsV1", Subresource: subresource})
		to = len(entries) - 1
	}
	if err := encode(&entries[to], target); err != nil {
		return nil, nil, err
	}
	return entries, from, nil
}

func decode(m metav1.ManagedFieldsEntry) (map[string]any, error) {
	set := map[string]any{}
	if m.FieldsV1 == nil {
		return set, nil
	}
	if err := json.Unmarshal(m.FieldsV1.GetRawBytes(), &set); err != nil {
		return nil, fmt.Errorf("reading the fields of manager %s, %w", m.Manager, err)
	}
	return set, nil
}

func encode(m *metav1.ManagedFieldsEntry, set map[string]any) error {
	raw, err := json.Marshal(set)
	if err != nil {
		return err
	}
	m.FieldsV1 = metav1.NewFieldsV1(string(raw))
	return nil
}

// take removes the subtree at path from set, and the maps left empty on
// the way; ok when there was one.
func take(set map[string]any, path []string) (any, bool) {
	sub, ok := set[path[0]]
	if !ok {
		return nil, false
	}
	if len(path) == 1 {
		delete(set, path[0])
		return sub, true
	}
	m, isMap := sub.(map[string]any)
	if !isMap {
		return nil, false
	}
	part, ok := take(m, path[1:])
	if ok && len(m) == 0 {
		delete(set, path[0])
	}
	return part, ok
}

// put merges part into set at path: the union of two field sets.
func put(set map[string]any, path []string, part any) {
	if len(path) > 1 {
		m, ok := set[path[0]].(map[string]any)
		if !ok {
			m = map[string]any{}
			set[path[0]] = m
		}
		put(m, path[1:], part)
		return
	}
	have, ok := set[path[0]].(map[string]any)
	add, isMap := part.(map[string]any)
	if !ok || !isMap {
		set[path[0]] = part
		return
	}
	for k, v := range add {
		put(have, []string{k}, v)
	}
}
