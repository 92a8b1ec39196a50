package operator

import (
	"maps"
	"strings"
	"sync"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/internal/intern"
	"github.com/enipam/enipam/operator/cloud"
)

// The cache holds every CiliumNode as decoded, each string its own copy:
// at 5000 nodes the ENI IDs of the pool's entries (one per address), the
// zones, subnets, VPCs, security groups and tag keys of the ENIs, and the
// label keys and values of the Nodes repeat tens of thousands of times.
// The cache's transforms make equal strings share one copy: within an
// object for what is the object's own (its ENIs' IDs, its instance), in
// the process's bounded table (package intern) for what repeats across
// objects. Only the strings' storage changes, never a value: the
// operator's writes are merge patches computed from the cached object, so
// a cached object must say exactly what the apiserver holds.

// internMap returns m with its keys, and the values of the keys value
// says to, shared; value returns the string to keep. m itself when empty.
func internMap(m map[string]string, value func(k, v string) string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if value != nil {
			v = value(k, v)
		} else {
			v = intern.String(v)
		}
		out[intern.String(k)] = v
	}
	return out
}

// slimCiliumNode is the cache's transform of CiliumNodes: managed fields
// dropped (as every object's), repeated strings and lists shared, each
// ENI's lists in arrays of their length (slim.go).
func slimCiliumNode(obj any) (any, error) {
	cn, ok := obj.(*ciliumv2.CiliumNode)
	if !ok {
		return obj, nil
	}
	cn.ManagedFields = nil
	cn.Labels = internLabels(cn.Name, cn.Labels)
	internOwners(cn)
	instance := cn.Spec.InstanceID
	e := &cn.Spec.ENI
	e.InstanceType, e.VpcID = intern.String(e.InstanceType), intern.String(e.VpcID)
	e.AvailabilityZone, e.NodeSubnetID = intern.String(e.AvailabilityZone), intern.String(e.NodeSubnetID)
	e.SecurityGroups = sharedStrings(e.SecurityGroups)

	// The node's own ENI IDs: the keys of status.eni.enis, shared by
	// each ENI's id and every pool and used entry naming it.
	ids := make(map[string]string, len(cn.Status.ENI.ENIs))
	var enis map[string]awstypes.ENI
	if cn.Status.ENI.ENIs != nil {
		enis = make(map[string]awstypes.ENI, len(cn.Status.ENI.ENIs))
	}
	for id, eni := range cn.Status.ENI.ENIs {
		ids[id] = id
		if eni.ID == id {
			eni.ID = id
		}
		eni.AvailabilityZone, eni.Description = intern.String(eni.AvailabilityZone), intern.String(eni.Description)
		eni.Subnet.ID, eni.VPC.ID = intern.String(eni.Subnet.ID), intern.String(eni.VPC.ID)
		eni.SecurityGroups = sharedStrings(eni.SecurityGroups)
		eni.VPC.CIDRs = sharedCIDRs(eni.VPC.CIDRs)
		eni.Addresses, eni.Prefixes, eni.IPv6Prefixes = exact(eni.Addresses), exact(eni.Prefixes), exact(eni.IPv6Prefixes)
		eni.Tags = internMap(eni.Tags, func(k, v string) string {
			switch {
			case k == cloud.TagInstance && v == instance:
				return instance
			case k == cloud.TagCreatedAt || k == cloud.TagInstance:
				return v // each ENI's own
			}
			return intern.String(v)
		})
		enis[id] = eni
	}
	cn.Status.ENI.ENIs = enis
	// Where status.eni.enis holds no copy (most nodes), the pool's
	// entries name the node's ENIs alone: each ID is kept once all the
	// same, the first entry's shared by the rest.
	own := func(resource string) string {
		if id, ok := ids[resource]; ok {
			return id
		}
		ids[resource] = resource
		return resource
	}
	cn.Spec.IPAM.Pool, cn.Status.IPAM.Used = packAllocations(cn.Spec.IPAM.Pool, cn.Status.IPAM.Used, own)
	cn.Spec.IPAM.IPv6Pool, cn.Status.IPAM.IPv6Used = packAllocations(cn.Spec.IPAM.IPv6Pool, cn.Status.IPAM.IPv6Used, own)
	return cn, nil
}

// packAllocations returns pool and used with the same entries, their
// Resources through own, and their keys (addresses, decoded one string
// each: 16 bytes for "10.0.1.23") as pieces of one string per node, a
// used entry's key the pool's own. At 18 pool and 5 used addresses a
// node that is ~190 bytes instead of 368. An empty map is returned as
// it is.
func packAllocations(pool, used ipamtypes.AllocationMap, own func(string) string) (ipamtypes.AllocationMap, ipamtypes.AllocationMap) {
	if len(pool) == 0 && len(used) == 0 {
		return pool, used
	}
	n := 0
	for ip := range pool {
		n += len(ip)
	}
	for ip := range used {
		if _, ok := pool[ip]; !ok {
			n += len(ip)
		}
	}
	var b strings.Builder
	b.Grow(n)
	type span struct{ from, to int }
	spans := make(map[string]span, len(pool)+len(used))
	add := func(ip string) {
		if _, ok := spans[ip]; !ok {
			spans[ip] = span{b.Len(), b.Len() + len(ip)}
			b.WriteString(ip)
		}
	}
	for ip := range pool {
		add(ip)
	}
	for ip := range used {
		add(ip)
	}
	all := b.String()
	rebuild := func(m ipamtypes.AllocationMap) ipamtypes.AllocationMap {
		if len(m) == 0 {
			return m
		}
		out := make(ipamtypes.AllocationMap, len(m))
		for ip, a := range m {
			a.Resource = own(a.Resource)
			sp := spans[ip]
			out[all[sp.from:sp.to]] = a
		}
		return out
	}
	return rebuild(pool), rebuild(used)
}

// internLabels is a Node's or CiliumNode's labels sharing keys and
// values with the other nodes': the zone, instance type, architecture and
// the like repeat on every node. A node's CiliumNode carries its Node's
// labels (Cilium's agent copies them), and an object's update mostly
// keeps them: equal labels of the objects of one name share one map
// (labelMaps).
func internLabels(name string, labels map[string]string) map[string]string {
	return labelMaps.share(name, labels)
}

// labelMapTable keeps the last labels map given for each object name, so
// that a Node and its CiliumNode, and every version of either, keep one
// map while their labels are equal: ~330 bytes a node for six labels.
// Cached objects are never changed in place, so a shared map is never
// written. The table holds the map of a node that is gone until it is
// cleared, at maxLabelMaps names: what was shared stays shared, later
// objects share again from then.
type labelMapTable struct {
	mu   sync.Mutex
	maps map[string]map[string]string
}

const maxLabelMaps = 32768

var labelMaps labelMapTable

// share returns the table's map for name when equal to labels, else
// labels with its strings interned, which becomes the table's for name.
// An empty map is returned as it is.
func (t *labelMapTable) share(name string, labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.maps[name]; ok && maps.Equal(c, labels) {
		return c
	}
	labels = internMap(labels, nil)
	if t.maps == nil || len(t.maps) >= maxLabelMaps {
		t.maps = map[string]map[string]string{}
	}
	t.maps[name] = labels
	return labels
}
