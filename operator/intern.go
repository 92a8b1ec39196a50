package operator

import (
	"unique"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
)

// The cache holds every CiliumNode as decoded, each string its own copy:
// at 5000 nodes the ENI IDs of their pool entries, the zones, subnets,
// VPCs, security groups and tag keys of their ENIs, and the label keys
// and values of their Nodes repeat tens of thousands of times. The
// cache's transforms make equal strings share one copy (unique.Make).
// Only the strings' storage changes, never a value: the operator's writes
// are merge patches computed from the cached object, so a cached object
// must say exactly what the apiserver holds.

// intern returns s's canonical copy.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internMap returns m with its keys, and the values keep says so of,
// canonical; m itself when empty.
func internMap(m map[string]string, keep func(k string) bool) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if keep == nil || keep(k) {
			v = intern(v)
		}
		out[intern(k)] = v
	}
	return out
}

// slimCiliumNode is the cache's transform of CiliumNodes: managed fields
// dropped (as every object's), the strings that repeat across the pool's
// entries, the ENIs and the nodes interned.
func slimCiliumNode(obj any) (any, error) {
	cn, ok := obj.(*ciliumv2.CiliumNode)
	if !ok {
		return obj, nil
	}
	cn.ManagedFields = nil
	cn.Labels = internMap(cn.Labels, nil)
	cn.Spec.InstanceID = intern(cn.Spec.InstanceID)
	e := &cn.Spec.ENI
	e.InstanceType, e.VpcID, e.AvailabilityZone, e.NodeSubnetID = intern(e.InstanceType), intern(e.VpcID), intern(e.AvailabilityZone), intern(e.NodeSubnetID)
	for ip, a := range cn.Spec.IPAM.Pool {
		a.Resource, a.Owner = intern(a.Resource), intern(a.Owner)
		cn.Spec.IPAM.Pool[ip] = a
	}
	for ip, a := range cn.Status.IPAM.Used {
		a.Resource = intern(a.Resource)
		cn.Status.IPAM.Used[ip] = a
	}
	enis := make(map[string]awstypes.ENI, len(cn.Status.ENI.ENIs))
	for id, eni := range cn.Status.ENI.ENIs {
		eni.ID, eni.AvailabilityZone, eni.Description = intern(eni.ID), intern(eni.AvailabilityZone), intern(eni.Description)
		eni.Subnet.ID, eni.VPC.ID = intern(eni.Subnet.ID), intern(eni.VPC.ID)
		for i, sg := range eni.SecurityGroups {
			eni.SecurityGroups[i] = intern(sg)
		}
		// The creation time is each ENI's own: not worth a canonical copy.
		eni.Tags = internMap(eni.Tags, func(k string) bool { return k != cloud.TagCreatedAt })
		enis[intern(id)] = eni
	}
	if cn.Status.ENI.ENIs != nil {
		cn.Status.ENI.ENIs = enis
	}
	return cn, nil
}

// internLabels is a Node's labels with keys and values canonical: the
// zone, instance type, architecture and the like repeat on every node.
func internLabels(labels map[string]string) map[string]string {
	return internMap(labels, nil)
}
