package operator

import (
	"slices"
	"strings"
	"sync"

	ciliumip "github.com/cilium/cilium/pkg/ip"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/intern"
	"github.com/enipam/enipam/operator/poolcontroller"
)

// Besides repeated strings (intern.go), the cache's decoded objects carry
// two kinds of slack the transforms take out, again without changing a
// value: the JSON decoder grows every list by doubling, so a list of 9
// addresses sits in an array of 16; and every ENI of a VPC lists the
// VPC's CIDRs, and every ENI of a node its security groups, in lists of
// their own. Lists are given an array of their length, and equal lists of
// CIDRs and security groups share one array. Cached objects are never
// changed in place (readers get deep copies, or read only), so a shared
// array is never written.

// exact returns s in an array of its own length; s itself when it has no
// spare capacity. nil stays nil.
func exact[T any](s []T) []T {
	if cap(s) == len(s) {
		return s
	}
	return slices.Clone(s)
}

// sharedLists keeps one copy of each list that repeats across cached
// objects, bounded as package intern's table is: past maxSharedLists
// distinct lists, a list is kept as it is (exact).
type sharedLists[T any] struct {
	mu    sync.Mutex
	lists map[string][]T
}

const maxSharedLists = 1024

// share returns the table's copy of l, which key names (equal keys for
// equal lists); l itself (exact) when empty or the table is full.
func (t *sharedLists[T]) share(l []T, key string) []T {
	if len(l) == 0 {
		return l
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.lists[key]; ok {
		return c
	}
	l = exact(l)
	if t.lists == nil {
		t.lists = map[string][]T{}
	}
	if len(t.lists) < maxSharedLists {
		t.lists[strings.Clone(key)] = l
	}
	return l
}

var (
	cidrLists   sharedLists[ciliumip.Prefix]
	stringLists sharedLists[string]
)

// sharedCIDRs is cidrs as the table's copy.
func sharedCIDRs(cidrs []ciliumip.Prefix) []ciliumip.Prefix {
	if len(cidrs) == 0 {
		return cidrs
	}
	var key strings.Builder
	for _, c := range cidrs {
		key.WriteString(c.String())
		key.WriteByte(' ')
	}
	return cidrLists.share(cidrs, key.String())
}

// sharedStrings is l as the table's copy, its strings interned.
func sharedStrings(l []string) []string {
	if len(l) == 0 {
		return l
	}
	key := strings.Join(l, " ")
	if c, ok := stringLists.lookup(key); ok {
		return c
	}
	l = exact(l)
	for i, s := range l {
		l[i] = intern.String(s)
	}
	return stringLists.share(l, key)
}

// lookup returns the table's copy of the list key names.
func (t *sharedLists[T]) lookup(key string) ([]T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.lists[key]
	return c, ok
}

// slimNodeRouting is the cache's transform of NodeRoutings: managed
// fields dropped (as every object's), each list in an array of its
// length, repeated strings and lists shared.
func slimNodeRouting(obj any) (any, error) {
	nr, ok := obj.(*enipamv1alpha1.NodeRouting)
	if !ok {
		return obj, nil
	}
	nr.ManagedFields = nil
	internOwners(nr)
	spec := &nr.Spec
	spec.ExcludeInterfaceTags = internMap(spec.ExcludeInterfaceTags, nil)
	spec.ENIs = exact(spec.ENIs)
	for i := range spec.ENIs {
		e := &spec.ENIs[i]
		e.SubnetID, e.SubnetCIDR = intern.String(e.SubnetID), intern.String(e.SubnetCIDR)
		e.VPCCIDRs = sharedStrings(e.VPCCIDRs)
		e.Addresses, e.Prefixes, e.IPv6Prefixes = exact(e.Addresses), exact(e.Prefixes), exact(e.IPv6Prefixes)
		e.Tags = internMap(e.Tags, nil)
	}
	if c := spec.Capacity; c != nil {
		c.AvailabilityZone, c.Reason = intern.String(c.AvailabilityZone), intern.String(c.Reason)
		c.Subnets = sharedStrings(c.Subnets)
		c.SubnetSlots = exact(c.SubnetSlots)
		for i := range c.SubnetSlots {
			c.SubnetSlots[i].SubnetID = intern.String(c.SubnetSlots[i].SubnetID)
		}
	}
	st := &nr.Status
	st.ENIs = exact(st.ENIs)
	for i := range st.ENIs {
		e := &st.ENIs[i]
		e.IPs, e.Prefixes = exact(e.IPs), exact(e.Prefixes)
		e.IPv6, e.IPv6Prefixes = exact(e.IPv6), exact(e.IPv6Prefixes)
	}
	shareSpecAddresses(nr)
	st.Conditions = exact(st.Conditions)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Status = intern.String(c.Type), metav1.ConditionStatus(intern.String(string(c.Status)))
		c.Reason, c.Message = intern.String(c.Reason), intern.String(c.Message)
	}
	packNodeRouting(nr)
	return nr, nil
}

// shareSpecAddresses has the agent's report of an ENI share the list of
// its addresses with the operator's spec.enis entry of it where the two
// are equal, as they are on a node in shape: the operator lists an
// ENI's addresses in the order the agent reports them, so a
// NodeRouting's addresses are kept once, not twice.
func shareSpecAddresses(nr *enipamv1alpha1.NodeRouting) {
	for i := range nr.Status.ENIs {
		e := &nr.Status.ENIs[i]
		if j := specENIOf(nr, e.ID); j >= 0 && len(e.IPs) > 0 && slices.Equal(e.IPs, nr.Spec.ENIs[j].Addresses) {
			e.IPs = nr.Spec.ENIs[j].Addresses
		}
	}
}

// specENIOf is the index of the ENI id in nr's spec.enis, -1 if unlisted.
func specENIOf(nr *enipamv1alpha1.NodeRouting, id string) int {
	return slices.IndexFunc(nr.Spec.ENIs, func(e enipamv1alpha1.NodeENI) bool { return e.ID == id })
}

// packNodeRouting gives the strings nr keeps of its own (not interned:
// its name and versions, the operator's spec.enis and the agent's report
// of its ENIs, the queries and answers) one backing array
// (intern.Packer): each left an allocation of its own among the
// decoder's short-lived ones held twice the spans it fills. A report's
// list shared with spec.enis (shareSpecAddresses) is packed once, and
// its ENI's ID and MAC are the spec's.
func packNodeRouting(nr *enipamv1alpha1.NodeRouting) {
	var k intern.Packer
	k.Add(&nr.Name)
	k.Add((*string)(&nr.UID))
	k.Add(&nr.ResourceVersion)
	for i := range nr.OwnerReferences {
		k.Add(&nr.OwnerReferences[i].Name)
		k.Add((*string)(&nr.OwnerReferences[i].UID))
	}
	poolcontroller.GatherOwnWords(&k, &nr.Spec)
	for i := range nr.Spec.ENIs {
		e := &nr.Spec.ENIs[i]
		k.Add(&e.ID)
		k.Add(&e.MAC)
		k.Add(&e.PrimaryIP)
		k.AddAll(e.Addresses)
		k.AddAll(e.Prefixes)
		k.AddAll(e.IPv6Prefixes)
	}
	st := &nr.Status
	for i := range st.ENIs {
		e := &st.ENIs[i]
		spec := &enipamv1alpha1.NodeENI{}
		if j := specENIOf(nr, e.ID); j >= 0 {
			spec = &nr.Spec.ENIs[j]
		}
		if e.ID != spec.ID {
			k.Add(&e.ID)
		}
		if e.MAC != spec.MAC {
			k.Add(&e.MAC)
		}
		if len(e.IPs) == 0 || len(spec.Addresses) == 0 || &e.IPs[0] != &spec.Addresses[0] {
			k.AddAll(e.IPs)
		}
		k.AddAll(e.Prefixes)
		k.AddAll(e.IPv6)
		k.AddAll(e.IPv6Prefixes)
	}
	if r := st.Endpoints; r != nil {
		k.AddAll(r.Present)
		k.AddAll(r.Absent)
	}
	if r := st.Remaps; r != nil {
		k.AddAll(r.Landed)
		k.AddAll(r.Missing)
	}
	k.Pack()
	for i := range st.ENIs {
		e := &st.ENIs[i]
		if j := specENIOf(nr, e.ID); j >= 0 {
			e.ID = nr.Spec.ENIs[j].ID
			if e.MAC == nr.Spec.ENIs[j].MAC {
				e.MAC = nr.Spec.ENIs[j].MAC
			}
		}
	}
}

// internOwners shares the API versions and kinds of obj's owner
// references: every NodeRouting is owned by a CiliumNode, every
// CiliumNode by a Node.
func internOwners(obj client.Object) {
	refs := obj.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = intern.String(refs[i].APIVersion), intern.String(refs[i].Kind)
	}
}
