package tracker

import (
	"fmt"
	"log/slog"
	"runtime"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
)

// BenchmarkMemoryPerPodNotStarted reports what one pod without an address
// costs the scheduler: as the informer's store keeps it after the
// transform, plus the tracker's index, for pods bound to 100 nodes. The
// figure is the README's.
func BenchmarkMemoryPerPodNotStarted(b *testing.B) {
	const n = 20000
	reportHeapPer(b, n, "B/pod", func(tr *Tracker, i int) any {
		obj, _ := waiting.Slim(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("web-7d9f8c6b5-%05d", i),
				UID: types.UID(fmt.Sprintf("3f8e2a4c-1b7d-4e9a-8c2f-%012d", i)), ResourceVersion: "123456789"},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i%100, i%250)},
		})
		tr.podSeen(obj)
		return obj
	})
}

// BenchmarkMemoryPerNode reports what one node costs: its CiliumNode as
// the transform keeps it (a pool of 40 addresses, 30 used) and the
// tracker's digest of it.
func BenchmarkMemoryPerNode(b *testing.B) {
	const n = 2000
	reportHeapPer(b, n, "B/node", func(tr *Tracker, i int) any {
		cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250)}}
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
		cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		for j := range 40 {
			ip := fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j)
			cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: "eni-0123456789abcdef0"}
			if j < 30 {
				cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: fmt.Sprintf("team-a/web-7d9f8c6b5-%05d", i*40+j), Resource: "eni-0123456789abcdef0"}
			}
		}
		obj, _ := stripCiliumNode(cn)
		tr.ciliumNodeSeen(nil, obj)
		return obj
	})
}

// BenchmarkMemoryPerNodeRouting reports what one node's NodeRouting
// costs: as the transform keeps it (its capacity, and of spec.enis 4 ENIs
// of 10 secondary addresses each, as the pool of BenchmarkMemoryPerNode)
// and the tracker's record of it.
func BenchmarkMemoryPerNodeRouting(b *testing.B) {
	const n = 2000
	reportHeapPer(b, n, "B/node", func(tr *Tracker, i int) any {
		nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250)},
			Spec: enipamv1alpha1.NodeRoutingSpec{Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 40, PoolIPs: 40, AvailabilityZone: "us-east-1a"}}}
		for e := range 4 {
			eni := enipamv1alpha1.NodeENI{ID: fmt.Sprintf("eni-0123456789abcde%02d", e), MAC: "0a:1b:2c:3d:4e:5f", Number: int32(e),
				SubnetID: "subnet-0123456789abcdef0", SubnetCIDR: "10.0.0.0/16", VPCCIDRs: []string{"10.0.0.0/16"}}
			for j := range 10 {
				eni.Addresses = append(eni.Addresses, fmt.Sprintf("10.%d.%d.%d", i/250, i%250, e*10+j))
			}
			nr.Spec.ENIs = append(nr.Spec.ENIs, eni)
		}
		obj, _ := stripNodeRouting(nr)
		tr.routingSeen(obj)
		return obj
	})
}

// reportHeapPer runs b's iterations: each adds n objects made by add to a
// new informer store and tracker (add returns the object to store, after
// handing it to the tracker), and reports the heap they keep per object
// under unit.
func reportHeapPer(b *testing.B, n int, unit string, add func(tr *Tracker, i int) any) {
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		tr := New(nil, DefaultConfig(), slog.New(slog.DiscardHandler))
		for i := range n {
			_ = store.Add(add(tr, i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), unit)
		runtime.KeepAlive(store)
		runtime.KeepAlive(tr)
	}
}
