package staticsim

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"unsafe"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// writer applies the merge patches and updates of typed objects that
// the controllers, the extender and the agents send, with the result
// controller-runtime's fake client gives (the same stored object, the
// same answer, the same error, the same resourceVersion from the same
// global counter), at a fraction of its cost: the fake applies each
// patch twice, finds out whether it came through the status client by
// formatting the goroutine's stack, and carries status between the old
// and the new object through four JSON round trips; this takes one
// merge and one decode, and for a patch made (client.MergeFrom) from
// the very object stored, no merge: the result is the patched object.
// What it does not handle (other patch types, unstructured or partial
// objects, other subresources, unconditional updates, objects not
// found) goes to the fake client. TestWriterIsTheFakeClient holds the
// two to the same results.
type writer struct {
	tracker clienttesting.ObjectTracker
	scheme  *runtime.Scheme
	// statusKinds have a status subresource: a write through the main
	// resource keeps their stored status, one through the status
	// subresource changes their status alone.
	statusKinds map[schema.GroupVersionKind]bool
	// rv is the fake client's global resourceVersion counter, shared so
	// that writes through either path number as etcd would.
	rv *atomic.Uint64
	// generations numbers metadata.generation as kube-apiserver does
	// for a kind with a status subresource (the fake client leaves it
	// as written): 1 when created by an apply, one more on a write
	// through the main resource that changes the spec, and never
	// changed by a client otherwise. Off where the writer is held to
	// the fake client's results.
	generations bool
}

// newWriter shares fake's tracker and resourceVersion counter. fake is
// the client fake.ClientBuilder built, WithGlobalResourceVersionCounter.
func newWriter(fake client.WithWatch, tracker clienttesting.ObjectTracker, scheme *runtime.Scheme, statusObjs ...client.Object) (*writer, error) {
	v := reflect.ValueOf(fake)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("the fake client is a %T, not the fake package's struct", fake)
	}
	tracked := v.Elem().FieldByName("tracker")
	if !tracked.IsValid() || tracked.Kind() != reflect.Struct {
		return nil, errors.New("the fake client keeps no tracker where this controller-runtime keeps it")
	}
	counter := tracked.FieldByName("resourceVersionCounter")
	if !counter.IsValid() || counter.Type() != reflect.TypeFor[*atomic.Uint64]() || counter.IsNil() {
		return nil, errors.New("the fake client has no global resourceVersion counter where this controller-runtime keeps it")
	}
	wr := &writer{tracker: tracker, scheme: scheme, statusKinds: map[schema.GroupVersionKind]bool{},
		rv: (*atomic.Uint64)(unsafe.Pointer(counter.Pointer()))}
	for _, o := range statusObjs {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return nil, err
		}
		wr.statusKinds[gvk] = true
	}
	return wr, nil
}

// typed returns obj's kind and resource when the writer handles it: a
// typed object of the scheme, written through the status subresource
// only if its kind has one (the fake client writes the others' status
// as it pleases).
func (wr *writer) typed(obj client.Object, status bool) (schema.GroupVersionKind, schema.GroupVersionResource, bool) {
	switch obj.(type) {
	case runtime.Unstructured, *metav1.PartialObjectMetadata:
		return schema.GroupVersionKind{}, schema.GroupVersionResource{}, false
	}
	gvk, err := apiutil.GVKForObject(obj, wr.scheme)
	if err != nil {
		return schema.GroupVersionKind{}, schema.GroupVersionResource{}, false
	}
	if _, hasStatus := reflect.TypeOf(obj).Elem().FieldByName("Status"); (wr.statusKinds[gvk] || status) && !hasStatus ||
		status && !wr.statusKinds[gvk] {
		return schema.GroupVersionKind{}, schema.GroupVersionResource{}, false
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return gvk, gvr, true
}

// patch applies a merge patch as the fake client's Patch does (status:
// through the status subresource). handled is false for what it leaves
// to the fake client.
func (wr *writer) patch(obj client.Object, patch client.Patch, status bool) (handled bool, _ error) {
	if patch.Type() != types.MergePatchType {
		return false, nil
	}
	gvk, gvr, ok := wr.typed(obj, status)
	if !ok {
		return false, nil
	}
	cur, err := wr.tracker.Get(gvr, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return false, nil // the fake client's answer (NotFound)
	}
	curMeta := cur.(client.Object)
	old, err := json.Marshal(cur)
	if err != nil {
		return true, err
	}
	var next client.Object
	if base, lock := mergeBase(patch); base != nil && reflect.DeepEqual(base, cur) && (!lock || base.GetResourceVersion() != "") {
		// The patch was made from the stored object itself: merged
		// onto it, it gives obj (through JSON); the optimistic lock
		// puts the base's resourceVersion in the patch.
		if next, err = wr.decodeLike(obj, curMeta); err != nil {
			return true, err
		}
		if lock {
			next.SetResourceVersion(base.GetResourceVersion())
		}
	} else {
		data, err := patch.Data(obj)
		if err != nil {
			return true, err
		}
		merged, err := jsonpatch.MergePatch(old, data)
		if err != nil {
			return true, err
		}
		next = reflect.New(reflect.TypeOf(cur).Elem()).Interface().(client.Object)
		if err := json.Unmarshal(merged, next); err != nil {
			return true, err
		}
	}
	if !deletionTimestampEqual(next, curMeta) {
		return true, errors.New("rejected patch, metadata.deletionTimestamp immutable")
	}
	next, err = wr.carryStatus(gvk, old, next, status)
	if err != nil {
		return true, err
	}
	if next.GetResourceVersion() == "" {
		next.SetResourceVersion(curMeta.GetResourceVersion())
	}
	return true, wr.store(gvr, curMeta, next, obj, !status && wr.statusKinds[gvk])
}

// apply takes a server-side apply of the main resource of a typed kind
// with a status subresource, as its one applier makes it: the sole
// owner of every field it applies (enipam-operator and a NodeRouting's
// spec, finalizers and owner references). The applied spec and metadata
// lists replace the stored ones, so a field no longer applied goes, and
// the status stays; a resourceVersion in the configuration is a
// precondition on the stored object; every apply makes a new version,
// as the fake client's do. An object not found is created from the
// configuration, as the fake client does (ignoring any resourceVersion),
// but numbered, as the apiserver does (the fake stores it with none).
// TestWriterAppliesAsTheFakeClient holds this to the fake client's
// field-managed apply for that one applier.
func (wr *writer) apply(obj client.Object, patch client.Patch) (handled bool, _ error) {
	if patch.Type() != types.ApplyPatchType {
		return false, nil
	}
	gvk, gvr, ok := wr.typed(obj, false)
	if !ok || !wr.statusKinds[gvk] {
		return false, nil
	}
	data, err := patch.Data(obj)
	if err != nil {
		return true, err
	}
	cfg := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if err := json.Unmarshal(data, cfg); err != nil {
		return true, err
	}
	cur, err := wr.tracker.Get(gvr, cfg.GetNamespace(), cfg.GetName())
	if apierrors.IsNotFound(err) {
		cfg.SetResourceVersion(strconv.FormatUint(wr.rv.Add(1), 10))
		reflect.ValueOf(cfg).Elem().FieldByName("Status").SetZero()
		if wr.generations {
			cfg.SetGeneration(1)
		}
		if err := wr.tracker.Create(gvr, cfg, cfg.GetNamespace()); err != nil {
			return true, err
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(cfg.DeepCopyObject()).Elem())
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		return true, nil
	}
	if err != nil {
		return true, err
	}
	curMeta := cur.(client.Object)
	if rv := cfg.GetResourceVersion(); rv != "" && rv != curMeta.GetResourceVersion() {
		return true, apierrors.NewConflict(gvr.GroupResource(), cfg.GetName(), errors.New("object was modified"))
	}
	next := cur.DeepCopyObject().(client.Object)
	reflect.ValueOf(next).Elem().FieldByName("Spec").Set(reflect.ValueOf(cfg).Elem().FieldByName("Spec"))
	next.SetFinalizers(cfg.GetFinalizers())
	next.SetOwnerReferences(cfg.GetOwnerReferences())
	return true, wr.store(gvr, curMeta, next, obj, true)
}

// mergeBase returns the object a client.MergeFrom patch was made from
// and whether it takes the optimistic lock; nil for any other patch.
func mergeBase(patch client.Patch) (client.Object, bool) {
	v := reflect.ValueOf(patch)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	t := v.Elem().Type()
	if t.Name() != "mergeFromPatch" || t.PkgPath() != "sigs.k8s.io/controller-runtime/pkg/client" {
		return nil, false
	}
	from, opts := v.Elem().FieldByName("from"), v.Elem().FieldByName("opts")
	if !from.IsValid() || !opts.IsValid() || from.Type() != reflect.TypeFor[client.Object]() || opts.Type() != reflect.TypeFor[client.MergeFromOptions]() {
		return nil, false
	}
	base, _ := reflect.NewAt(from.Type(), unsafe.Pointer(from.UnsafeAddr())).Elem().Interface().(client.Object)
	lock := reflect.NewAt(opts.Type(), unsafe.Pointer(opts.UnsafeAddr())).Elem().Interface().(client.MergeFromOptions).OptimisticLock
	return base, lock
}

// update replaces an object as the fake client's Update does (status:
// through the status subresource).
func (wr *writer) update(obj client.Object, status bool) (handled bool, _ error) {
	gvk, gvr, ok := wr.typed(obj, status)
	if !ok || obj.GetResourceVersion() == "" {
		return false, nil // an unconditional update, as the fake client rules it
	}
	cur, err := wr.tracker.Get(gvr, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return false, nil // the fake client's answer (NotFound, or a create)
	}
	next := obj
	if wr.statusKinds[gvk] {
		old, err := json.Marshal(cur)
		if err != nil {
			return true, err
		}
		// The fake client's status copy passes the new object through
		// JSON too.
		if next, err = wr.decodeLike(obj, obj); err != nil {
			return true, err
		}
		if next, err = wr.carryStatus(gvk, old, next, status); err != nil {
			return true, err
		}
	}
	if err := wr.store(gvr, cur.(client.Object), next, obj, !status && wr.statusKinds[gvk]); err != nil {
		return true, err
	}
	return true, nil
}

// carryStatus is what the fake's versionedTracker does with status:
// through the status subresource, the stored object with next's status
// (and next's resourceVersion); through the main resource of a kind with
// a status subresource, next with the stored status. old is the stored
// object's JSON.
func (wr *writer) carryStatus(gvk schema.GroupVersionKind, old []byte, next client.Object, status bool) (client.Object, error) {
	if !wr.statusKinds[gvk] {
		return next, nil
	}
	stored := reflect.New(reflect.TypeOf(next).Elem()).Interface().(client.Object)
	if err := json.Unmarshal(old, stored); err != nil {
		return nil, err
	}
	if status {
		reflect.ValueOf(stored).Elem().FieldByName("Status").Set(reflect.ValueOf(next).Elem().FieldByName("Status"))
		stored.SetResourceVersion(next.GetResourceVersion())
		stored.SetManagedFields(next.GetManagedFields())
		return stored, nil
	}
	reflect.ValueOf(next).Elem().FieldByName("Status").Set(reflect.ValueOf(stored).Elem().FieldByName("Status"))
	return next, nil
}

// decodeLike is obj through JSON, into a new object of like's type.
func (wr *writer) decodeLike(obj, like client.Object) (client.Object, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := reflect.New(reflect.TypeOf(like).Elem()).Interface().(client.Object)
	return out, json.Unmarshal(b, out)
}

// store checks next's resourceVersion against cur's, numbers it, and
// stores it (or deletes the object, when next is being deleted with no
// finalizer left); into is the caller's object, which gets what was
// stored, as the fake client answers. specWrite is a write through the
// main resource of a kind with a status subresource: with generations
// on, it numbers next's generation (a status write carries the stored
// one already, carryStatus).
func (wr *writer) store(gvr schema.GroupVersionResource, cur, next, into client.Object, specWrite bool) error {
	if next.GetResourceVersion() != cur.GetResourceVersion() {
		return apierrors.NewConflict(gvr.GroupResource(), next.GetName(), errors.New("object was modified"))
	}
	if wr.generations && specWrite {
		next.SetGeneration(nextGeneration(cur, next))
	}
	next.SetResourceVersion(strconv.FormatUint(wr.rv.Add(1), 10))
	if !deletionTimestampEqual(next, cur) {
		return fmt.Errorf("error: Unable to edit %s: metadata.deletionTimestamp field is immutable", next.GetName())
	}
	if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 {
		if err := wr.tracker.Delete(gvr, next.GetNamespace(), next.GetName()); err != nil {
			return err
		}
	} else if err := wr.tracker.Update(gvr, next, next.GetNamespace()); err != nil {
		return err
	}
	if next != into {
		reflect.ValueOf(into).Elem().Set(reflect.ValueOf(next.DeepCopyObject()).Elem())
	}
	into.SetManagedFields(nil)
	into.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return nil
}

// nextGeneration is kube-apiserver's generation for next, written over
// cur through the main resource of a kind with a status subresource:
// cur's, plus one when the spec changed (a client's own generation is
// ignored).
func nextGeneration(cur, next client.Object) int64 {
	before, after := reflect.ValueOf(cur).Elem().FieldByName("Spec"), reflect.ValueOf(next).Elem().FieldByName("Spec")
	if !before.IsValid() || !after.IsValid() {
		return cur.GetGeneration()
	}
	// Through JSON, as stored: the specs hold types reflection cannot
	// compare (unexported fields).
	b, errB := json.Marshal(before.Interface())
	a, errA := json.Marshal(after.Interface())
	if errB == nil && errA == nil && bytes.Equal(a, b) {
		return cur.GetGeneration()
	}
	return cur.GetGeneration() + 1
}

// deletionTimestampEqual is the fake client's: equal within a second (a
// patch truncates it to the second).
func deletionTimestampEqual(a, b metav1.Object) bool {
	at, bt := a.GetDeletionTimestamp(), b.GetDeletionTimestamp()
	if at == nil || bt == nil {
		return at == bt
	}
	return at.Sub(bt.Time).Abs() < 1e9
}

// hasStatus reports whether obj is of a kind with a status subresource.
func (wr *writer) hasStatus(obj client.Object) bool {
	gvk, err := apiutil.GVKForObject(obj, wr.scheme)
	return err == nil && wr.statusKinds[gvk]
}
