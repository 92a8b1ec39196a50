package poolcontroller

import (
	"fmt"
	"net/netip"
	"testing"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestJoiningNodeInAWaveTakesItsFirstENIAlone: a joining m5.large node
// (first interface index 1: 9 secondaries an ENI, pre-allocate 8 plus
// Cilium's 2 addresses need 10) gets both its ENIs planned at once while
// fewer than wholeNeedEmptyNodes other nodes are empty; with more, its
// first ENI alone, so that it comes ahead of no other node's first,
// unless pods already wait on it. An m5.4xlarge that got its first ENI
// alone in a wave (29 addresses, min-allocate 80) takes the rest of its
// need, two ENIs, at once once the wave is through, one at a time while
// it lasts. In a wave whose every node's whole need EC2's client-side
// buckets serve at once, a joining node takes its whole need.
func TestJoiningNodeInAWaveTakesItsFirstENIAlone(t *testing.T) {
	primary := cloud.ENI{ID: "eni-0", DeviceIndex: 0, SubnetID: "subnet-a", SecurityGroups: []string{"sg-1"}, Status: cloud.ENIInUse}
	first := cloud.ENI{ID: "eni-1", DeviceIndex: 1, SubnetID: "subnet-a", SecurityGroups: []string{"sg-1"}, Status: cloud.ENIInUse,
		AttachmentStatus: cloud.AttachmentAttached, InstanceID: "i-1"}
	for i := range 29 {
		first.IPs = append(first.IPs, netip.AddrFrom4([4]byte{10, 0, 1, byte(10 + i)}))
	}
	joining := func(typ cloud.InstanceType) snapshot.Node {
		return snapshot.Node{
			Instance: cloud.Instance{ID: "i-1", Type: typ.Name, AZ: "us-east-1a", VPCID: "vpc-1", SubnetID: "subnet-a"},
			Type:     typ,
			ENIs:     []cloud.ENI{primary},
			Subnets:  []cloud.Subnet{{ID: "subnet-a", AZ: "us-east-1a", VPCID: "vpc-1", Available: 2000}},
		}
	}
	m5large := joining(cloud.InstanceType{Name: "m5.large", MaxENIs: 3, IPv4PerENI: 10, Hypervisor: "nitro"})
	grown := joining(cloud.InstanceType{Name: "m5.4xlarge", MaxENIs: 8, IPv4PerENI: 30, Hypervisor: "nitro"})
	grown.ENIs = append(grown.ENIs, first)
	grown.Available = 29
	preAllocate := pool.Knobs{PreAllocate: 8, AgentEndpoints: 2}
	minAllocate := pool.Knobs{PreAllocate: 8, MinAllocate: 80, AgentEndpoints: 2}
	for _, tt := range []struct {
		name           string
		snap           snapshot.Node
		knobs          pool.Knobs
		emptyElsewhere int
		waiting        int
		// tokens: new ENIs EC2's client-side buckets serve now; 0 unknown.
		tokens  int
		newENIs int
	}{
		{"m5.large joining", m5large, preAllocate, 0, 0, 0, 2},
		{"m5.large joining", m5large, preAllocate, wholeNeedEmptyNodes - 1, 0, 0, 2},
		{"m5.large joining", m5large, preAllocate, wholeNeedEmptyNodes, 0, 0, 1},
		{"m5.large joining", m5large, preAllocate, 200, 0, 0, 1},
		{"m5.large joining", m5large, preAllocate, 200, 3, 0, 2}, // pods wait on it: its whole need at once
		{"m5.4xlarge with its first ENI", grown, minAllocate, 0, 0, 0, 2},
		{"m5.4xlarge with its first ENI", grown, minAllocate, 200, 0, 0, 1},
		{"m5.large joining, buckets full", m5large, preAllocate, 19, 0, 50, 2}, // 20 nodes' two ENIs: 40 of 50 tokens
		{"m5.large joining, buckets full", m5large, preAllocate, 30, 0, 50, 1},
		{"m5.large joining, buckets low", m5large, preAllocate, 19, 0, 30, 1},
	} {
		t.Run(fmt.Sprintf("%s, %d other nodes empty, %d pods waiting", tt.name, tt.emptyElsewhere, tt.waiting), func(t *testing.T) {
			r := &Reconciler{needs: newNeeds(), nodes: map[string]*memory{}}
			if tt.tokens > 0 {
				r.opts.NewENITokens = func() int { return tt.tokens }
			}
			r.needs.set("n1", tt.snap.Available == 0)
			for i := range tt.emptyElsewhere {
				r.needs.set(fmt.Sprintf("other-%d", i), true)
			}
			cfg := policy.Config{Config: pool.Config{Knobs: tt.knobs, FirstInterfaceIndex: 1}, IPv4: true}
			cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			s := testSync(r, nil, deciding{mem: r.memory("n1"), cn: cn, pool: &poolView{cn: cn}, nodeState: nodeState{cfg: cfg, snap: tt.snap, haveSnap: true, waiting: tt.waiting}})
			plan := s.computePlan()
			if plan.Create == nil {
				t.Fatalf("no new ENI planned: %+v", plan)
			}
			if got := 1 + len(plan.More); got != tt.newENIs {
				t.Fatalf("%d new ENIs planned, want %d", got, tt.newENIs)
			}
		})
	}
}
