package operator

import (
	"encoding/json"
	"net/netip"
	"runtime"
	"testing"
	"unsafe"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decoded is a CiliumNode as the cache decodes it: every string its own
// copy.
func decoded(t *testing.T, name, instance string) *ciliumv2.CiliumNode {
	t.Helper()
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": "us-east-1a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "enipam-operator"}},
	}}
	cn.Spec.InstanceID = instance
	cn.Spec.ENI.InstanceType, cn.Spec.ENI.AvailabilityZone = "m5.large", "us-east-1a"
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.0.5": {Resource: "eni-0aaaaaaaaaaaaaaa1"},
		"10.0.0.6": {Resource: "eni-0aaaaaaaaaaaaaaa1", Owner: "default/web-0"},
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.0.5": {Resource: "eni-0aaaaaaaaaaaaaaa1", Owner: "default/pod-1"}}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-0aaaaaaaaaaaaaaa1": {
		ID: "eni-0aaaaaaaaaaaaaaa1", MAC: "02:00:00:00:00:01", AvailabilityZone: "us-east-1a", Description: "enipam", Number: 1,
		Subnet: awstypes.AwsSubnet{ID: "subnet-1", CIDR: ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.0.0/24"))},
		VPC:    awstypes.AwsVPC{ID: "vpc-1"}, SecurityGroups: []string{"sg-1"},
		Addresses: []ciliumip.Addr{ciliumip.AddrFrom(netip.MustParseAddr("10.0.0.5"))},
		Tags:      map[string]string{"enipam.io/cluster": "c1", "enipam.io/created-at": "2026-01-01T00:00:00Z"},
	}}
	raw, err := json.Marshal(cn)
	if err != nil {
		t.Fatal(err)
	}
	out := &ciliumv2.CiliumNode{}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSlimCiliumNodeChangesNoValue: the cache's transform drops the
// managed fields and nothing else (the operator's patches are computed
// from the cached object); a node's ENI IDs share storage within it, and
// equal strings of two nodes share storage.
func TestSlimCiliumNodeChangesNoValue(t *testing.T) {
	a, b := decoded(t, "a", "i-1"), decoded(t, "b", "i-2")
	want := a.DeepCopy()
	want.ManagedFields = nil
	wantJSON, _ := json.Marshal(want)
	for _, cn := range []*ciliumv2.CiliumNode{a, b} {
		if _, err := slimCiliumNode(cn); err != nil {
			t.Fatal(err)
		}
		runtime.GC() // sharing outlives a collection
	}
	if got, _ := json.Marshal(a); string(got) != string(wantJSON) {
		t.Fatalf("transformed node differs:\n got %s\nwant %s", got, wantJSON)
	}
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q do not share storage", what, x, y)
		}
	}
	const id = "eni-0aaaaaaaaaaaaaaa1"
	var key string
	for k := range a.Status.ENI.ENIs {
		key = k
	}
	same("pool entries' ENI", a.Spec.IPAM.Pool["10.0.0.5"].Resource, a.Spec.IPAM.Pool["10.0.0.6"].Resource)
	same("pool entry's ENI and the ENI's key", a.Spec.IPAM.Pool["10.0.0.5"].Resource, key)
	same("ENI's id and key", a.Status.ENI.ENIs[id].ID, key)
	same("used entry's ENI", a.Status.IPAM.Used["10.0.0.5"].Resource, a.Spec.IPAM.Pool["10.0.0.5"].Resource)
	same("ENI zone", a.Status.ENI.ENIs[id].AvailabilityZone, b.Spec.ENI.AvailabilityZone)
	same("security group", a.Status.ENI.ENIs[id].SecurityGroups[0], b.Status.ENI.ENIs[id].SecurityGroups[0])
	same("cluster tag", a.Status.ENI.ENIs[id].Tags["enipam.io/cluster"], b.Status.ENI.ENIs[id].Tags["enipam.io/cluster"])
	same("label", a.Labels["topology.kubernetes.io/zone"], b.Labels["topology.kubernetes.io/zone"])
}
