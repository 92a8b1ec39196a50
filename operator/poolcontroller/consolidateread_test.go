package poolcontroller

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// TestConsolidationCountsTheNodesPods: the facts consolidation decides
// on count the node's pods. Reading them takes the instance's snapshot
// afresh (at the end of the reconcile's read: ENI 2 holds no address, so
// a second snapshot is needed); a snapshot carries no pool
// counts, so the pods used to read as 0, and an empty ENI was detached
// whenever the other ENIs carried the headroom alone, even when they
// could not carry the pods too (the ENI then came back for them).
func TestConsolidationCountsTheNodesPods(t *testing.T) {
	ctx, inv, snap := consolidationInventory(t, "[{deviceIndex: 1, secondaryIPs: 3}, {deviceIndex: 2}]")
	readConsolidationFacts(ctx, t, consolidationSync(inv, pooledOnENI1(t, snap), snap))
}

// pooledOnENI1 is the CiliumNode of snap's instance: ENI 1's addresses in
// its pool, two of them used by pods.
func pooledOnENI1(t *testing.T, snap snapshot.Node) *ciliumv2.CiliumNode {
	t.Helper()
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	for _, e := range snap.ENIs {
		if e.DeviceIndex != 1 {
			continue
		}
		for i, ip := range e.IPs {
			cn.Spec.IPAM.Pool[ip.String()] = ipamtypes.AllocationIP{Resource: e.ID}
			if i < 2 {
				cn.Status.IPAM.Used[ip.String()] = ipamtypes.AllocationIP{Resource: e.ID, Owner: "ns/pod"}
			}
		}
	}
	if len(cn.Status.IPAM.Used) != 2 {
		t.Fatalf("scenario: %d addresses used, want 2", len(cn.Status.IPAM.Used))
	}
	return cn
}

// readConsolidationFacts reads what consolidation decides on for s, a
// node its pool covers (pooledOnENI1), as the read's last step and the
// decision do, and checks that they are read on a snapshot and count the
// node's 2 pods.
func readConsolidationFacts(ctx context.Context, t *testing.T, s *nodeSync) consolidationFacts {
	t.Helper()
	s.countPool()
	if s.needed() != 0 {
		t.Fatalf("scenario: the node needs %d addresses, want 0", s.needed())
	}
	s.readConsolidationSnapshot(ctx) // the read's last step
	f := s.readConsolidation()
	if f.snap == nil {
		t.Fatalf("consolidation read no snapshot (growing %v, error %v)", f.growing, s.opErr)
	}
	if f.used != 2 {
		t.Fatalf("consolidation counts %d addresses used, want the node's 2", f.used)
	}
	return f
}

// consolidationInventory is an inventory synced from ec2sim's model of
// one m5.large instance, i-0a000000000000001, whose secondary ENIs are
// enis (a scenario's list), and its snapshot of the instance: the read's.
func consolidationInventory(t *testing.T, enis string) (context.Context, *inventory.Inventory, snapshot.Node) {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(`
account: "111122223333"
region: eu-west-1
zones: [eu-west-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.1.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, cidr: 10.1.1.0/24, zone: eu-west-1a}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: subnet-0a000000000000001, enis: ` + enis + `}
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ec2sim.NewState(sc, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv := inventory.New(cloudfake.New(st), inventory.Options{VPCIDs: []string{"vpc-0a000000000000001"}, ResyncInterval: time.Hour, ConsistencyGrace: time.Minute, NotFoundRetry: time.Minute}, log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()
	snap, err := inv.Snapshot(ctx, "i-0a000000000000001", "")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, inv, snap
}

// consolidationSync is a reconcile of cn on inv, whose read took snap,
// under a policy that consolidates after a second (pre-allocate 1).
func consolidationSync(inv *inventory.Inventory, cn *ciliumv2.CiliumNode, snap snapshot.Node) *nodeSync {
	r := &Reconciler{now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil)), nodes: map[string]*memory{}, inv: inv}
	cfg := policy.Config{Config: pool.Config{Knobs: pool.Knobs{PreAllocate: 1}}, ReleaseExcessIPs: true,
		Consolidation: policy.Consolidation{Enabled: true, Delay: time.Second}, IPv4: true}
	return testSync(r, nil, deciding{mem: &memory{}, cn: cn, pool: &poolView{cn: cn}, nodeState: nodeState{
		instanceID: "i-0a000000000000001", cfg: cfg, snap: snap, haveSnap: true}})
}

// TestConsolidationSnapshotsAgainOnlyForAnENIThatMayBeEmpty: m5.large,
// consolidation on (delay 1 s, pre-allocate 1), the pool on ENI 1 (3
// addresses, 2 used), the node covered. Consolidation decides on a
// snapshot of the instance taken again at the end of the read only when
// the read's snapshot shows a secondary ENI without addresses: when it
// shows none, that snapshot settles the decision (no ENI empty) and the
// inventory is not read again. Each case changes ENI 2 in the inventory
// after the read's snapshot, so the decision shows which snapshot it
// was made on.
func TestConsolidationSnapshotsAgainOnlyForAnENIThatMayBeEmpty(t *testing.T) {
	for _, c := range []struct {
		name string
		// eni2 is ENI 2 in the scenario; change changes it in the
		// inventory after the read's snapshot.
		eni2   string
		change func(inv *inventory.Inventory, eni2 cloud.ENI)
		// again: consolidation decides on the snapshot taken again.
		again bool
	}{
		{"ENI 2 holds an address: no second snapshot", "{deviceIndex: 2, secondaryIPs: 1}", func(inv *inventory.Inventory, eni2 cloud.ENI) {
			inv.RecordUnassigned(eni2.ID, eni2.IPs)
		}, false},
		{"ENI 2 holds none: snapshot again", "{deviceIndex: 2}", func(inv *inventory.Inventory, eni2 cloud.ENI) {
			inv.RecordAssigned(eni2.ID, []netip.Addr{netip.MustParseAddr("10.1.1.250")}, nil)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, inv, snap := consolidationInventory(t, "[{deviceIndex: 1, secondaryIPs: 3}, "+c.eni2+"]")
			cn := pooledOnENI1(t, snap)
			var eni2 cloud.ENI
			for _, e := range snap.ENIs {
				if e.DeviceIndex == 2 {
					eni2 = e
				}
			}
			if eni2.ID == "" {
				t.Fatal("scenario: no ENI 2 in the snapshot")
			}
			wasEmpty := len(eni2.IPs) == 0
			c.change(inv, eni2)

			f := readConsolidationFacts(ctx, t, consolidationSync(inv, cn, snap))
			step := decideConsolidation(f)
			// ENI 2 is empty in the snapshot consolidation decided on:
			// as the read saw it, or as changed since.
			_, emptyInDecision := step.emptySince[eni2.ID]
			if sawChange := emptyInDecision != wasEmpty; sawChange != c.again {
				t.Errorf("consolidation decided on the snapshot taken again: %v, want %v (ENI 2 empty in the read's snapshot %v, in the decision's %v)",
					sawChange, c.again, wasEmpty, emptyInDecision)
			}
			if step.detach != nil {
				t.Errorf("consolidation detaches %s, within its delay", step.detach.ID)
			}
		})
	}
}
