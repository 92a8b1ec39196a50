package ciliumnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/policy"
)

// fill writes what the operator knows into the desired object: the
// instance and its ENIs, the effective values the node agent needs, and
// the operator-status.
func (s *nodeSync) fill() {
	cn := s.cn
	msg := ""
	if s.opErr != nil {
		msg = s.opErr.Error()
	}
	cn.Status.IPAM.OperatorStatus.Error = msg
	if !s.haveSnap {
		return
	}
	in := &s.snap.Instance
	if cn.Spec.InstanceID == "" {
		cn.Spec.InstanceID = in.ID
	}
	eni := &cn.Spec.ENI
	eni.InstanceType, eni.VpcID, eni.AvailabilityZone, eni.NodeSubnetID = in.Type, in.VPCID, in.AZ, in.SubnetID

	// The agent needs the effective first index and exclude tags; record
	// what was written so it is not read back as the user's choice.
	written := policy.ReadWritten(cn)
	userIndex := eni.FirstInterfaceIndex != nil && !(written.FirstInterfaceIndex != nil && *written.FirstInterfaceIndex == *eni.FirstInterfaceIndex)
	if !userIndex {
		idx := s.cfg.FirstInterfaceIndex
		eni.FirstInterfaceIndex, written.FirstInterfaceIndex = &idx, &idx
	}
	userTags := len(eni.ExcludeInterfaceTags) > 0 && !maps.Equal(eni.ExcludeInterfaceTags, written.ExcludeInterfaceTags)
	if !userTags {
		eni.ExcludeInterfaceTags = maps.Clone(s.cfg.ExcludeTags)
		written.ExcludeInterfaceTags = maps.Clone(s.cfg.ExcludeTags)
	}
	if cn.Annotations == nil {
		cn.Annotations = map[string]string{}
	}
	cn.Annotations[policy.DefaultsAnnotation] = written.Encode()

	var vpc awstypes.AwsVPC
	if v, ok := s.r.inv.VPC(in.VPCID); ok {
		vpc.ID = v.ID
		for i, c := range v.CIDRs {
			if i == 0 {
				vpc.PrimaryCIDR = ciliumip.PrefixFrom(c)
			}
			vpc.CIDRs = append(vpc.CIDRs, ciliumip.PrefixFrom(c))
		}
	}
	enis := make(map[string]awstypes.ENI, len(s.snap.ENIs))
	for i := range s.snap.ENIs {
		e := &s.snap.ENIs[i]
		enis[e.ID] = s.statusENI(e, vpc)
	}
	cn.Status.ENI.ENIs = enis
}

func (s *nodeSync) statusENI(e *cloud.ENI, vpc awstypes.AwsVPC) awstypes.ENI {
	out := awstypes.ENI{
		ID: e.ID, MAC: e.MAC, AvailabilityZone: e.AZ, Description: e.Description, Number: e.DeviceIndex,
		VPC: vpc, SecurityGroups: e.SecurityGroups, Tags: e.Tags,
	}
	if e.PrimaryIP.IsValid() {
		out.IP = ciliumip.AddrFrom(e.PrimaryIP)
	}
	out.Subnet.ID = e.SubnetID
	if sub, ok := s.r.inv.Subnet(e.SubnetID); ok {
		out.Subnet.CIDR = ciliumip.PrefixFrom(sub.CIDR)
	}
	for _, ip := range e.IPs {
		out.Addresses = append(out.Addresses, ciliumip.AddrFrom(ip))
	}
	for _, p := range e.Prefixes {
		out.Prefixes = append(out.Prefixes, ciliumip.PrefixFrom(netip.Prefix(p)))
	}
	return out
}

// write patches status, then spec, each only if it changed. Merge patches
// carry only the fields that changed, so the agent's status.ipam.used and
// anything else written meanwhile is left alone.
func (s *nodeSync) write(ctx context.Context) error {
	s.fill()
	if !sameJSON(s.orig.Status, s.cn.Status) {
		obj := s.orig.DeepCopy()
		obj.Status = s.cn.Status
		if err := s.r.client.Status().Patch(ctx, obj, client.MergeFrom(s.orig)); err != nil {
			return fmt.Errorf("writing status of %s, %w", s.cn.Name, err)
		}
		s.r.metrics.writes.WithLabelValues("status").Inc()
		s.r.wrote(s.mem, obj.ResourceVersion)
	}
	if !sameJSON(s.orig.Spec, s.cn.Spec) || !maps.Equal(s.orig.Annotations, s.cn.Annotations) {
		obj := s.orig.DeepCopy()
		obj.Spec, obj.Annotations = s.cn.Spec, s.cn.Annotations
		if err := s.r.client.Patch(ctx, obj, client.MergeFrom(s.orig)); err != nil {
			return fmt.Errorf("writing spec of %s, %w", s.cn.Name, err)
		}
		s.r.metrics.writes.WithLabelValues("spec").Inc()
		s.r.wrote(s.mem, obj.ResourceVersion)
	}
	return nil
}

// sameJSON compares two API values as the apiserver would store them
// (equality.Semantic cannot look into netip types, and reflect.DeepEqual
// tells nil from empty maps, which serialize alike).
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
