package staticsim

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/enipam/enipam/operator/claims"
)

// store reads the fake apiserver's objects straight from its tracker:
// typed deep copies, without the JSON round trip of the fake client's
// reads. The simulation's own actors and checks read through it (as
// informer caches would); the controllers read through the client.
type store struct {
	tracker clienttesting.ObjectTracker
	scheme  *runtime.Scheme
	// lists holds the last list of each kind: it stands until the next
	// write of that kind (wrote).
	lists map[schema.GroupVersionResource]runtime.Object
	// indexes are the cache indexes (cacheIndexes).
	indexes map[indexKey]client.IndexerFunc
}

// list fills list with every object of its kind (a copy the caller owns).
func (s store) list(list client.ObjectList) {
	reflect.ValueOf(list).Elem().Set(reflect.ValueOf(s.listed(list).DeepCopyObject()).Elem())
}

// view fills list with every object of its kind, shared with the store:
// read only, and only until the next write.
func (s store) view(list client.ObjectList) {
	reflect.ValueOf(list).Elem().Set(reflect.ValueOf(s.listed(list)).Elem())
}

// listed is the list of list's kind as of the last write of that kind.
func (s store) listed(list client.ObjectList) runtime.Object {
	gvk, err := apiutil.GVKForObject(list, s.scheme)
	if err != nil {
		panic(err)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	if l, ok := s.lists[gvr]; ok {
		return l
	}
	got, err := s.tracker.List(gvr, gvk, "")
	if err != nil {
		panic(err)
	}
	s.lists[gvr] = got
	return got
}

// get fills obj with the named object; false if there is none.
func (s store) get(key client.ObjectKey, obj client.Object) bool {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		panic(err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	got, err := s.tracker.Get(gvr, key.Namespace, key.Name)
	if err != nil {
		return false
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(got).Elem())
	return true
}

// cachedList serves a List as the operator's informer cache would: from
// the store, filtered by the cache indexes of package claims (the only
// field selectors the controllers use) and by namespace.
func (s store) cachedList(list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if o.FieldSelector == nil && o.Namespace == "" && o.LabelSelector == nil {
		s.list(list)
		return nil
	}
	// Filtered from the store's own list; what is kept, copied.
	s.view(list)
	if o.LabelSelector != nil && !o.LabelSelector.Empty() {
		return fmt.Errorf("the simulation's cache has no label selectors (%s)", o.LabelSelector)
	}
	var field, value string
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		reqs := o.FieldSelector.Requirements()
		if len(reqs) != 1 {
			return fmt.Errorf("the simulation's cache takes one field selector, not %s", o.FieldSelector)
		}
		field, value = reqs[0].Field, reqs[0].Value
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	var keep []runtime.Object
	for _, item := range items {
		obj := item.(client.Object)
		if o.Namespace != "" && obj.GetNamespace() != o.Namespace {
			continue
		}
		if field != "" && !slices.Contains(s.indexed(obj, field), value) {
			continue
		}
		keep = append(keep, item.DeepCopyObject())
	}
	return meta.SetList(list, keep)
}

// indexed returns the values of the named index for obj.
func (s store) indexed(obj client.Object, field string) []string {
	gvk, _ := apiutil.GVKForObject(obj, s.scheme)
	if extract, ok := s.indexes[indexKey{gvk, field}]; ok {
		return extract(obj)
	}
	panic("no index " + field + " for " + gvk.Kind)
}

// indexKey names one cache index: its kind and field.
type indexKey struct {
	gvk   schema.GroupVersionKind
	field string
}

// cacheIndexes are the cache indexes of package claims, by kind and field.
func cacheIndexes(scheme *runtime.Scheme) (map[indexKey]client.IndexerFunc, error) {
	out := map[indexKey]client.IndexerFunc{}
	for _, idx := range claims.Indexes() {
		gvk, err := apiutil.GVKForObject(idx.Object, scheme)
		if err != nil {
			return nil, err
		}
		out[indexKey{gvk, idx.Field}] = idx.Extract
	}
	return out, nil
}

// wrote records a write of obj's kind: the store's list of that kind
// is stale from now on.
func (s store) wrote(obj client.Object) {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		clear(s.lists) // a kind the scheme does not name: every list
		return
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	delete(s.lists, gvr)
}
