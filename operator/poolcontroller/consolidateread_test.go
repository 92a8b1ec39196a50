package poolcontroller

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// TestConsolidationCountsTheNodesPods: the facts consolidation decides
// on count the node's pods. Reading them takes the instance's snapshot
// afresh (at the end of the reconcile's read); a snapshot carries no pool
// counts, so the pods used to read as 0, and an empty ENI was detached
// whenever the other ENIs carried the headroom alone, even when they
// could not carry the pods too (the ENI then came back for them).
func TestConsolidationCountsTheNodesPods(t *testing.T) {
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
- {id: i-0a000000000000001, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1, secondaryIPs: 3}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ec2sim.NewState(sc, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	c := cloudfake.New(st)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv := inventory.New(c, inventory.Options{VPCIDs: []string{"vpc-0a000000000000001"}, ResyncInterval: time.Hour, ConsistencyGrace: time.Minute, NotFoundRetry: time.Minute}, log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()
	snap, err := inv.Snapshot(ctx, "i-0a000000000000001", "")
	if err != nil {
		t.Fatal(err)
	}
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
	r := &Reconciler{now: time.Now, log: log, nodes: map[string]*memory{}, inv: inv}
	cfg := policy.Config{Config: pool.Config{Knobs: pool.Knobs{PreAllocate: 1}}, ReleaseExcessIPs: true,
		Consolidation: policy.Consolidation{Enabled: true, Delay: time.Second}, IPv4: true}
	s := testSync(r, nil, deciding{mem: &memory{}, cn: cn, pool: &poolView{cn: cn}, nodeState: nodeState{
		instanceID: "i-0a000000000000001", cfg: cfg, snap: snap, haveSnap: true}})
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
}
