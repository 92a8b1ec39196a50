package poolcontroller

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// steadyApplyAnswer is the apiserver's answer to the operator's apply of
// a NodeRouting of the steady bench: two ENIs of 9 addresses each in
// spec.enis and in the agent's report, the capacity, and the managed
// fields of both writers.
func steadyApplyAnswer(i int) []byte {
	name := fmt.Sprintf("node-i-%017x", i)
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "0b0c1a6e-0000-0000-0000-000000000001", ResourceVersion: "123457", Generation: 3,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cilium.io/v2", Kind: "CiliumNode", Name: name, UID: "0b0c1a6e-0000-0000-0000-000000000000"}}}}
	nr.Spec.InstanceID = fmt.Sprintf("i-%017x", i)
	nr.Spec.Capacity = &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 18, FreeIPs: 13, UsedIPs: 5, CanGrow: true, AvailabilityZone: "us-east-1a",
		Subnets: []string{"subnet-0b0000000000000a1"}, FreeENISlots: 1, SubnetSlots: []enipamv1alpha1.SubnetSlots{{SubnetID: "subnet-0b0000000000000a1", Free: 200}}}
	nr.Status.ObservedGeneration = 3
	nr.Status.RoutesSpecENIs = true
	nr.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Routed", Message: "every ENI routed", ObservedGeneration: 3, LastTransitionTime: metav1.Now()}}
	fields := `{"f:spec":{"f:instanceID":{},"f:firstInterfaceIndex":{},"f:capacity":{"f:maxIPs":{},"f:poolIPs":{},"f:usedIPs":{},"f:freeIPs":{},"f:canGrow":{},"f:availabilityZone":{},"f:subnets":{}},"f:enis":{`
	base := netip.AddrFrom4([4]byte{10, byte(i / 3000), byte(i / 12 % 250), 0})
	for e := 0; e < 2; e++ {
		eni := enipamv1alpha1.RoutedENI{ID: fmt.Sprintf("eni-%017x", i*2+e), MAC: fmt.Sprintf("02:00:00:%02x:%02x:%02x", i>>8&255, i&255, e), Number: int32(e), Table: int32(10 + e)}
		for k := 0; k < 9; k++ {
			ip := base
			for range e*10 + k + 1 + (i%12)*20 {
				ip = ip.Next()
			}
			eni.IPs = append(eni.IPs, ip.String())
		}
		nr.Status.ENIs = append(nr.Status.ENIs, eni)
		nr.Spec.ENIs = append(nr.Spec.ENIs, enipamv1alpha1.NodeENI{ID: eni.ID, MAC: eni.MAC, Number: eni.Number, PrimaryIP: base.String(),
			SubnetID: "subnet-0b0000000000000a1", SubnetCIDR: "10.0.0.0/16", VPCCIDRs: []string{"10.0.0.0/8"}, Addresses: slices.Clone(eni.IPs)})
		if e > 0 {
			fields += ","
		}
		fields += fmt.Sprintf(`"k:{\"id\":\"%s\"}":{".":{},"f:id":{},"f:mac":{},"f:number":{},"f:addresses":{}}`, eni.ID)
	}
	fields += `}}}`
	nr.Status.RoutedENIs, nr.Status.RoutedIPs = 2, 18
	nr.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: enipamv1alpha1.FieldManagerOperator, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "enipam.io/v1alpha1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)},
		{Manager: enipamv1alpha1.FieldManagerAgent, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "enipam.io/v1alpha1", FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:observedGeneration":{},"f:routesSpecENIs":{},"f:enis":{},"f:conditions":{}}}`)},
	}
	b, _ := json.Marshal(nr)
	return b
}

// heapFigures is the heap's live bytes and its bytes in spans in use,
// after two collections.
func heapFigures() (alloc, inuse uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.HeapInuse
}

// TestAppliedBasesHeap: the apply bases of 5000 nodes of the steady bench,
// each kept from the answer to its apply (rememberApplied) and then
// without its ENIs (trimApplied), as every node in shape keeps it, hold
// at most 4.5 MiB of heap in use. Kept with the answers' own strings,
// each base's few strings held the spans the answers' other strings
// filled (measured: 3.9 MiB live, 8.2-8.5 in use; packed, 3.55 live,
// 5.7-6.1 in use; with the answers of an operator writing no spec.enis,
// 3.9 live, 7.1-7.4 in use). Kept as a NodeRouting, each base was 512
// bytes of object meta and status it never read, in the size class of
// the NodeRoutings decoded beside it; kept as appliedRouting, 1.95 MiB
// live, 3.3-3.7 in use.
func TestAppliedBasesHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 5 000 NodeRoutings")
	}
	const n = 5000
	answers := make([][]byte, n)
	for i := range answers {
		answers[i] = steadyApplyAnswer(i)
	}
	a0, u0 := heapFigures()
	kept := make([]*appliedRouting, n)
	for i, raw := range answers {
		nr := &enipamv1alpha1.NodeRouting{}
		if err := json.Unmarshal(raw, nr); err != nil {
			t.Fatal(err)
		}
		trimmed := *appliedBase(nr) // as trimApplied trims it
		trimmed.Spec.ENIs = nil
		kept[i] = &trimmed
	}
	a1, u1 := heapFigures()
	runtime.KeepAlive(kept)
	runtime.KeepAlive(answers)
	live, inuse := (float64(a1)-float64(a0))/(1<<20), (float64(u1)-float64(u0))/(1<<20)
	t.Logf("%d apply bases, trimmed: live heap %.2f MiB, heap in use %.2f MiB", n, live, inuse)
	if inuse > 4.5 {
		t.Errorf("apply bases hold %.2f MiB of spans in use (%.2f MiB live), more than 4.5", inuse, live)
	}
}
