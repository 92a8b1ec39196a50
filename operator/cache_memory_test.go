package operator

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
)

// steadyNode is the JSON of a node of the steady bench: two ENIs of 9
// addresses each, all pooled, 5 of them used.
func steadyNode(i int) []byte {
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-i-%017x", i), UID: "0b0c1a6e-0000-0000-0000-000000000000", ResourceVersion: "123456"}}
	inst := fmt.Sprintf("i-%017x", i)
	cn.Spec.InstanceID = inst
	cn.Spec.ENI.InstanceType, cn.Spec.ENI.AvailabilityZone, cn.Spec.ENI.VpcID, cn.Spec.ENI.NodeSubnetID = "m5.large", "us-east-1a", "vpc-0b0000000000000b1", "subnet-0b0000000000000a1"
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{}
	base := netip.AddrFrom4([4]byte{10, byte(i / 3000), byte(i / 12 % 250), 0})
	for e := 0; e < 2; e++ {
		id := fmt.Sprintf("eni-%017x", i*2+e)
		eni := awstypes.ENI{ID: id, MAC: fmt.Sprintf("02:00:00:%02x:%02x:%02x", i>>8&255, i&255, e), AvailabilityZone: "us-east-1a",
			Description: "enipam-operator", Number: e, Subnet: awstypes.AwsSubnet{ID: "subnet-0b0000000000000a1", CIDR: ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.0.0/16"))},
			VPC: awstypes.AwsVPC{ID: "vpc-0b0000000000000b1", PrimaryCIDR: ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.0.0/16"))}, SecurityGroups: []string{"sg-0b0000000000000b1"},
			Tags: map[string]string{"enipam.io/cluster": "bench", "enipam.io/instance": inst, "enipam.io/managed-by": "enipam", "enipam.io/created-at": "2026-11-26T07:00:00Z"}}
		for k := 0; k < 9; k++ {
			ip := base
			for range e*10 + k + 1 + (i%12)*20 {
				ip = ip.Next()
			}
			eni.Addresses = append(eni.Addresses, ciliumip.AddrFrom(ip))
			cn.Spec.IPAM.Pool[ip.String()] = ipamtypes.AllocationIP{Resource: id}
			if len(cn.Status.IPAM.Used) < 5 {
				cn.Status.IPAM.Used[ip.String()] = ipamtypes.AllocationIP{Resource: id, Owner: fmt.Sprintf("default/pod-%d-%d", i, k)}
			}
		}
		cn.Status.ENI.ENIs[id] = eni
	}
	b, _ := json.Marshal(cn)
	return b
}

// heap is the heap's live bytes.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestCachedCiliumNodesMemory: 5000 CiliumNodes of the steady bench,
// decoded and held in an informer's indexer with the operator's indexes,
// cost at most 60 % of what they did with an index entry per pool address
// and every string its own copy (measured on the shared machine: 63.7 MiB
// before, 38.7 MiB with the block index, 33.2 MiB with the transform too).
func TestCachedCiliumNodesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 5 000 CiliumNodes")
	}
	const n = 5000
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = steadyNode(i)
	}
	indexers := func(perAddress bool) cache.Indexers {
		idx := cache.Indexers{}
		for _, x := range claims.Indexes() {
			if _, ok := x.Object.(*ciliumv2.CiliumNode); !ok {
				continue
			}
			x := x
			f := func(o any) ([]string, error) { return x.Extract(o.(*ciliumv2.CiliumNode)), nil }
			idx[x.Field] = f
		}
		if perAddress {
			delete(idx, claims.IndexPoolBlock)
			idx["pool-ip"] = func(o any) ([]string, error) {
				var out []string
				for ip := range o.(*ciliumv2.CiliumNode).Spec.IPAM.Pool {
					out = append(out, ip)
				}
				return out, nil
			}
		}
		return idx
	}
	cost := map[string]float64{}
	for _, c := range []struct {
		name       string
		transform  bool
		perAddress bool
	}{{"before", false, true}, {"after", true, false}} {
		h0 := heap()
		store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers(c.perAddress))
		for _, raw := range raws {
			cn := &ciliumv2.CiliumNode{}
			if err := json.Unmarshal(raw, cn); err != nil {
				t.Fatal(err)
			}
			if c.transform {
				slimCiliumNode(cn)
			}
			if err := store.Add(cn); err != nil {
				t.Fatal(err)
			}
		}
		h1 := heap()
		cost[c.name] = float64(h1-h0) / (1 << 20)
		t.Logf("%s: %d CiliumNodes cached and indexed: %.1f MiB", c.name, n, cost[c.name])
		runtime.KeepAlive(store)
	}
	if cost["after"] > 0.6*cost["before"] {
		t.Errorf("cached CiliumNodes cost %.1f MiB, more than 60 %% of %.1f MiB before", cost["after"], cost["before"])
	}
}

// steadyNodeAsServed is steadyNode with what else a served node of the
// steady bench carries: its Node's labels and owner reference, and the
// VPC's four CIDRs on each ENI.
func steadyNodeAsServed(i int) []byte {
	cn := &ciliumv2.CiliumNode{}
	if err := json.Unmarshal(steadyNode(i), cn); err != nil {
		panic(err)
	}
	cn.Labels = map[string]string{"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": cn.Name, "kubernetes.io/os": "linux",
		"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1a"}
	cn.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: cn.Name, UID: "0b0c1a6e-0000-0000-0000-000000000002"}}
	for id, eni := range cn.Status.ENI.ENIs {
		for _, c := range []string{"10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"} {
			eni.VPC.CIDRs = append(eni.VPC.CIDRs, ciliumip.PrefixFrom(netip.MustParsePrefix(c)))
		}
		cn.Status.ENI.ENIs[id] = eni
	}
	b, _ := json.Marshal(cn)
	return b
}

// steadyNodeUncopied is steadyNodeAsServed as this release keeps it:
// no copy of its ENIs in status.eni.enis, which nothing reads on a node
// whose agent routes spec.enis and which no static address concerns.
func steadyNodeUncopied(i int) []byte {
	cn := &ciliumv2.CiliumNode{}
	if err := json.Unmarshal(steadyNodeAsServed(i), cn); err != nil {
		panic(err)
	}
	cn.Status.ENI.ENIs = nil
	b, _ := json.Marshal(cn)
	return b
}

// steadyRouting is the JSON of a NodeRouting of the steady bench: the
// operator's list of the node's two ENIs of 9 addresses each (spec.enis),
// the agent's report of them routed, Ready, and the operator's capacity.
func steadyRouting(i int) []byte { return steadyRoutingOf(i, true) }

// steadyRoutingOf is steadyRouting, with the operator's spec.enis or
// without (an operator of an earlier version).
func steadyRoutingOf(i int, specENIs bool) []byte {
	name := fmt.Sprintf("node-i-%017x", i)
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "0b0c1a6e-0000-0000-0000-000000000001", ResourceVersion: "123457", Generation: 3,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cilium.io/v2", Kind: "CiliumNode", Name: name, UID: "0b0c1a6e-0000-0000-0000-000000000000"}}}}
	nr.Spec.InstanceID = fmt.Sprintf("i-%017x", i)
	nr.Spec.Capacity = &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 18, FreeIPs: 13, UsedIPs: 5, CanGrow: true, AvailabilityZone: "us-east-1a",
		Subnets: []string{"subnet-0b0000000000000a1"}, FreeENISlots: 1}
	nr.Status.ObservedGeneration = 3
	nr.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Routed", Message: "every ENI routed", ObservedGeneration: 3, LastTransitionTime: metav1.Now()}}
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
		if specENIs {
			// The operator's list of the ENI (spec.enis), which the
			// agent routes: the same addresses, the primary one first.
			spec := enipamv1alpha1.NodeENI{ID: eni.ID, MAC: eni.MAC, Number: eni.Number, PrimaryIP: base.String(),
				SubnetID: "subnet-0b0000000000000a1", SubnetCIDR: "10.0.0.0/16", VPCCIDRs: []string{"10.0.0.0/8"}, Addresses: slices.Clone(eni.IPs)}
			nr.Spec.ENIs = append(nr.Spec.ENIs, spec)
		}
	}
	nr.Status.RoutedENIs, nr.Status.RoutedIPs = 2, 18
	b, _ := json.Marshal(nr)
	return b
}

// cachedCost is the live heap n objects decoded from raw and kept cost,
// in MiB, with transform applied to each when not nil.
func cachedCost[T any](t *testing.T, raw func(int) []byte, n int, transform func(any) (any, error)) float64 {
	t.Helper()
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = raw(i)
	}
	h0 := heap()
	kept := make([]any, n)
	for i, r := range raws {
		var obj any = new(T)
		if err := json.Unmarshal(r, obj); err != nil {
			t.Fatal(err)
		}
		if transform != nil {
			var err error
			if obj, err = transform(obj); err != nil {
				t.Fatal(err)
			}
		}
		kept[i] = obj
	}
	h1 := heap()
	runtime.KeepAlive(kept)
	runtime.KeepAlive(raws) // counted in h0: must be in h1 too
	return float64(h1-h0) / (1 << 20)
}

// TestCachedObjectsSlim: 5000 CiliumNodes and 5000 NodeRoutings of the
// steady bench, as the cache's transforms keep them, cost less than
// decoded by the slack the transforms take out: each list in an array of
// its length, repeated strings and lists shared. Measured: CiliumNodes
// 41.5 MiB decoded, 31.6 MiB kept (35.3 MiB, 85 %, with strings shared
// alone; 32.4 before the pool's addresses were packed in one string);
// NodeRoutings 10.7 MiB decoded, 8.7 MiB kept (10.7 with the managed
// fields dropped alone; 9.0 before the reported addresses were packed);
// with spec.enis, which the cache keeps, 17.8 MiB decoded, 10.5 kept.
func TestCachedObjectsSlim(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 10 000 objects")
	}
	const n = 5000
	for _, c := range []struct {
		kind      string
		cost      func(transform func(any) (any, error)) float64
		transform func(any) (any, error)
		most      float64
	}{
		{"CiliumNodes", func(f func(any) (any, error)) float64 {
			return cachedCost[ciliumv2.CiliumNode](t, steadyNodeAsServed, n, f)
		}, slimCiliumNode, 0.82},
		{"NodeRoutings", func(f func(any) (any, error)) float64 {
			return cachedCost[enipamv1alpha1.NodeRouting](t, steadyRouting, n, f)
		}, slimNodeRouting, 0.9},
	} {
		decoded, kept := c.cost(nil), c.cost(c.transform)
		t.Logf("%d %s: %.1f MiB decoded, %.1f MiB as the cache keeps them", n, c.kind, decoded, kept)
		if kept > c.most*decoded {
			t.Errorf("%s as kept cost %.1f MiB, more than %.0f %% of %.1f MiB decoded", c.kind, kept, 100*c.most, decoded)
		}
	}
	// The cache keeps spec.enis: what they cost kept is no more than what
	// the CiliumNodes' copy of the ENIs in status.eni.enis, which most
	// nodes no longer have, cost kept. Measured at 5000 nodes: spec.enis
	// 1.9 MiB (8.6 without, 10.5 with), the copy 10.4 MiB (29.6 with,
	// 19.2 without).
	without := cachedCost[enipamv1alpha1.NodeRouting](t, func(i int) []byte { return steadyRoutingOf(i, false) }, n, slimNodeRouting)
	with := cachedCost[enipamv1alpha1.NodeRouting](t, steadyRouting, n, slimNodeRouting)
	copied := cachedCost[ciliumv2.CiliumNode](t, steadyNodeAsServed, n, slimCiliumNode)
	uncopied := cachedCost[ciliumv2.CiliumNode](t, steadyNodeUncopied, n, slimCiliumNode)
	t.Logf("%d NodeRoutings kept: %.1f MiB without spec.enis, %.1f MiB with them; CiliumNodes %.1f MiB with the copy, %.1f without",
		n, without, with, copied, uncopied)
	if with-without > copied-uncopied {
		t.Errorf("spec.enis cost %.1f MiB kept, more than the %.1f MiB of the CiliumNodes' copy they replace", with-without, copied-uncopied)
	}
}

// heapStats is the heap's live bytes and its bytes in spans in use,
// after two collections.
func heapStats() (alloc, inuse uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.HeapInuse
}

// TestCachedSteadyObjectsHeap: 5000 CiliumNodes and 5000 NodeRoutings
// of the steady bench as the cache's transforms keep them, decoded one
// object of each kind after the other as the informers' lists deliver
// them, cost no more live heap nor heap in use as this release writes
// them (the ENIs in the NodeRoutings' spec.enis alone) than as an
// earlier one did (their copy in the CiliumNodes' status.eni.enis, the
// NodeRoutings without spec.enis, or with a list the cache dropped).
func TestCachedSteadyObjectsHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 20 000 objects")
	}
	const n = 5000
	type figures struct{ live, inuse float64 }
	cost := func(node func(int) []byte, specENIs bool) figures {
		nodes, routings := make([][]byte, n), make([][]byte, n)
		for i := range nodes {
			nodes[i], routings[i] = node(i), steadyRoutingOf(i, specENIs)
		}
		a0, u0 := heapStats()
		kept := make([]any, 0, 2*n)
		for i := range nodes {
			cn := &ciliumv2.CiliumNode{}
			if err := json.Unmarshal(nodes[i], cn); err != nil {
				t.Fatal(err)
			}
			o, _ := slimCiliumNode(cn)
			nr := &enipamv1alpha1.NodeRouting{}
			if err := json.Unmarshal(routings[i], nr); err != nil {
				t.Fatal(err)
			}
			p, _ := slimNodeRouting(nr)
			kept = append(kept, o, p)
		}
		a1, u1 := heapStats()
		runtime.KeepAlive(kept)
		runtime.KeepAlive(nodes)
		runtime.KeepAlive(routings)
		mib := func(a, b uint64) float64 { return (float64(b) - float64(a)) / (1 << 20) }
		return figures{mib(a0, a1), mib(u0, u1)}
	}
	earlier := cost(steadyNodeAsServed, false)
	now := cost(steadyNodeUncopied, true)
	t.Logf("%d CiliumNodes and NodeRoutings as kept: earlier release (status.eni.enis) live heap %.1f MiB, heap in use %.1f MiB; "+
		"this one (spec.enis) live heap %.1f MiB, heap in use %.1f MiB", n, earlier.live, earlier.inuse, now.live, now.inuse)
	if now.live > earlier.live || now.inuse > earlier.inuse {
		t.Errorf("kept with spec.enis and no copy: %.1f MiB live, %.1f in use; more than with the copy: %.1f, %.1f",
			now.live, now.inuse, earlier.live, earlier.inuse)
	}
}

// TestCachedNodeRoutingsHeapInUse: 5000 NodeRoutings of the steady bench,
// spec.enis and all, as the cache's transform keeps them, hold at most
// 1.12 times their live heap in spans in use. The strings they keep,
// each left an allocation of its own among the decoder's, held their
// spans (measured, the list dropped: 9.4 MiB live, 10.8-11.5 in use,
// 1.15-1.22 times; packed, 8.8 live, 9.3-9.4 in use; an earlier
// operator's objects, without spec.enis, 9.4 live and 10.7 in use).
func TestCachedNodeRoutingsHeapInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 5 000 NodeRoutings")
	}
	const n = 5000
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = steadyRouting(i)
	}
	a0, u0 := heapStats()
	kept := make([]any, n)
	for i, raw := range raws {
		nr := &enipamv1alpha1.NodeRouting{}
		if err := json.Unmarshal(raw, nr); err != nil {
			t.Fatal(err)
		}
		o, _ := slimNodeRouting(nr)
		kept[i] = o
	}
	a1, u1 := heapStats()
	runtime.KeepAlive(kept)
	runtime.KeepAlive(raws)
	live, inuse := (float64(a1)-float64(a0))/(1<<20), (float64(u1)-float64(u0))/(1<<20)
	t.Logf("%d NodeRoutings as kept: live heap %.2f MiB, heap in use %.2f MiB", n, live, inuse)
	if inuse > 1.12*live {
		t.Errorf("cached NodeRoutings hold %.2f MiB of spans in use for %.2f MiB live: their strings are the decoder's", inuse, live)
	}
}

// steadyKubeNode is the JSON of the Node of steadyNodeAsServed(i): the
// same six labels.
func steadyKubeNode(i int) []byte {
	cn := &ciliumv2.CiliumNode{}
	if err := json.Unmarshal(steadyNodeAsServed(i), cn); err != nil {
		panic(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cn.Name, UID: "0b0c1a6e-0000-0000-0000-000000000002", ResourceVersion: "123455", Labels: cn.Labels},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + cn.Spec.InstanceID}}
	b, _ := json.Marshal(n)
	return b
}

// TestNodeAndCiliumNodeShareLabels: 5000 Nodes and their CiliumNodes of
// the steady bench, as the cache keeps them, each pair's labels one map,
// and a second version of each CiliumNode keeps that map too. Measured on
// the shared machine, the pairs cost 38.2 MiB with a map of labels each,
// 34.6 MiB with one map a pair.
func TestNodeAndCiliumNodeShareLabels(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 10 000 objects")
	}
	const n = 5000
	nodes, cns := make([][]byte, n), make([][]byte, n)
	for i := range n {
		nodes[i], cns[i] = steadyKubeNode(i), steadyNodeAsServed(i)
	}
	h0 := heap()
	kept := make([][2]any, n)
	for i := range n {
		node, cn := &corev1.Node{}, &ciliumv2.CiliumNode{}
		if err := json.Unmarshal(nodes[i], node); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(cns[i], cn); err != nil {
			t.Fatal(err)
		}
		kept[i][0], _ = slimNode(node)
		kept[i][1], _ = slimCiliumNode(cn)
	}
	h1 := heap()
	t.Logf("%d Nodes and their CiliumNodes as the cache keeps them: %.1f MiB", n, float64(h1-h0)/(1<<20))
	same := func(a, b map[string]string) bool {
		return len(a) > 0 && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	shared := 0
	for i := range n {
		if same(kept[i][0].(*corev1.Node).Labels, kept[i][1].(*ciliumv2.CiliumNode).Labels) {
			shared++
		}
	}
	again := &ciliumv2.CiliumNode{}
	if err := json.Unmarshal(cns[7], again); err != nil {
		t.Fatal(err)
	}
	slimCiliumNode(again)
	if shared != n || !same(again.Labels, kept[7][0].(*corev1.Node).Labels) {
		t.Errorf("%d of %d Nodes share their labels' map with their CiliumNode (a second version: %v), want all",
			shared, n, same(again.Labels, kept[7][0].(*corev1.Node).Labels))
	}
	runtime.KeepAlive(nodes)
	runtime.KeepAlive(cns)
}
