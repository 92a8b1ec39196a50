package operator

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

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
