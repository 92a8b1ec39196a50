package poolcontroller

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestDecideNode: a node's whole decision is made from facts built by
// hand, with no Reconciler, client, clock or coordinator: node n1 on
// instance i-1 (3 ENIs of 5 addresses, the primary eni-0 carrying no
// pods), pre-allocate 4, every address its agent's routed. Each case
// asserts the actions, the memory and the requeue decided; and that the
// decision's CiliumNode, NodeRouting, snapshot and memory are the
// facts' own (decide owns them: no copy), the claims and the CiliumNode
// as read left as they were.
func TestDecideNode(t *testing.T) {
	now := time.Unix(10000, 0)
	opts := Options{Cluster: "test", BlockedRetry: time.Hour, RetryBase: time.Second, RetryMax: time.Minute,
		ConsistencyGrace: time.Minute, RoutingPatience: time.Minute}
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 1, byte(i)}) }
	subnet := cloud.Subnet{ID: "subnet-a", AZ: "us-east-1a", VPCID: "vpc-1", Available: 2000}
	// eni is device index i holding addresses .first..first+n-1.
	eni := func(index, first, n int) cloud.ENI {
		e := cloud.ENI{ID: fmt.Sprintf("eni-%d", index), DeviceIndex: index, SubnetID: "subnet-a", SecurityGroups: []string{"sg-1"},
			Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached, AttachmentID: fmt.Sprintf("attach-%d", index),
			InstanceID: "i-1", Tags: map[string]string{cloud.TagCluster: "test"}, DeleteOnTermination: true}
		if index == 0 {
			e.Tags = nil
		}
		for i := range n {
			e.IPs = append(e.IPs, ip(first+i))
		}
		return e
	}
	// pooled lists the ENI's addresses in the pool; used of them in use.
	pooled := func(cn *ciliumv2.CiliumNode, e cloud.ENI, used int) {
		for i, a := range e.IPs {
			cn.Spec.IPAM.Pool[a.String()] = ipamtypes.AllocationIP{Resource: e.ID}
			if i < used {
				cn.Status.IPAM.Used[a.String()] = ipamtypes.AllocationIP{Owner: fmt.Sprintf("ns/pod-%d", i)}
			}
		}
	}
	base := func() *facts {
		cn := &ciliumv2.CiliumNode{}
		cn.Name, cn.UID = "n1", "uid-n1"
		cn.Spec.InstanceID = "i-1"
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
		cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
		f := &facts{cn: cn, now: now, opts: opts, cross: crossNode{newENITokens: -1, slotOpen: true},
			mem: memory{missing: map[string]time.Time{}, missingENIs: map[string]time.Time{}, repairs: map[string]repair{}}}
		f.instanceID, f.haveSnap = "i-1", true
		f.cfg = policy.Config{Config: pool.Config{Knobs: pool.Knobs{PreAllocate: 4}, FirstInterfaceIndex: 1}, IPv4: true}
		f.snap = snapshot.Node{Instance: cloud.Instance{ID: "i-1", Type: "t.small", AZ: "us-east-1a", VPCID: "vpc-1", SubnetID: "subnet-a"},
			Type: cloud.InstanceType{Name: "t.small", MaxENIs: 3, IPv4PerENI: 5, Hypervisor: "nitro"},
			ENIs: []cloud.ENI{eni(0, 5, 0)}, Subnets: []cloud.Subnet{subnet},
			SecurityGroups: []cloud.SecurityGroup{{ID: "sg-1", VPCID: "vpc-1"}}}
		f.routed = func(string, netip.Addr) bool { return true }
		f.routing = &enipamv1alpha1.NodeRouting{}
		f.routing.Name = "n1"
		f.routing.OwnerReferences = ownerRefs(nil, cn)
		f.routing.Spec = enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1", FirstInterfaceIndex: 1}
		f.routingLooked = true
		// No claim concerns the node (read: nil only when the claims
		// could not be read, and then nothing is decided).
		f.static = &staticInputs{node: "n1", claims: map[string]*claims.Claim{}, podNodes: map[string]string{},
			located: map[netip.Addr]inventory.Location{}, subnets: map[netip.Addr]cloud.Subnet{}, listed: map[string]bool{}, cluster: "test"}
		return f
	}
	// inputs completes the facts as the read does: the pool's inputs
	// (readPoolInputs) on the node's snapshot and memory.
	// The addresses a case's setup leaves untrusted (the poolInputs it
	// made, their untrusted alone) are kept.
	inputs := func(f *facts) {
		f.static.report = f.routed
		var untrusted map[netip.Addr]bool
		if f.poolIn != nil {
			untrusted = f.poolIn.untrusted
		}
		f.poolIn = &poolInputs{snap: &f.snap, cfg: &f.cfg.Config, routed: f.routed, static: f.static, missing: f.mem.missing,
			now: f.now, grace: opts.ConsistencyGrace, cluster: opts.Cluster, backoff: f.mem.repairs, untrusted: untrusted}
		if f.static != nil {
			f.poolIn.pooledElsewhere = map[string]bool{}
			for _, e := range f.snap.ENIs {
				for _, a := range e.IPs {
					f.poolIn.pooledElsewhere[a.String()] = false
				}
			}
		}
	}
	// joining: a joining node whose first ENIs are eni-1, routed, and
	// eni-2, which its agent has not routed yet.
	joining := func(f *facts) {
		f.snap.Type.MaxENIs = 4
		ready, waiting := eni(1, 10, 4), eni(2, 20, 4)
		f.snap.ENIs = append(f.snap.ENIs, ready, waiting)
		f.routed = func(id string, _ netip.Addr) bool { return id == "eni-1" }
	}
	// untrusted: eni-1 holds 4 addresses its agent routed, the pool
	// lacks, and the cache's word on them is not trusted.
	untrusted := func(f *facts) {
		e := eni(1, 10, 4)
		f.snap.ENIs = append(f.snap.ENIs, e)
		f.poolIn = &poolInputs{untrusted: map[netip.Addr]bool{}}
		for _, a := range e.IPs {
			f.poolIn.untrusted[a] = true
		}
	}
	// listedUnseen: the node's status lists eni-7, which EC2's view
	// lacks; listed is its describe as made.
	listedUnseen := func(f *facts, listed describeRead) {
		f.cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-7": {ID: "eni-7"}}
		f.describes = &describeFacts{listedUnseen: []string{"eni-7"}, listed: listed}
	}
	// describedFirst: a decision that waits for the describe of listed
	// and confirm decides nothing else.
	describedFirst := func(t *testing.T, d decision, listed, confirm []string) {
		t.Helper()
		if !slices.Equal(d.reads.listed, listed) || !slices.Equal(d.reads.confirm, confirm) {
			t.Errorf("describes asked %+v, want listed %v, to confirm %v", d.reads, listed, confirm)
		}
		if d.acts.produce() || d.requeue != 0 || d.needsSet || len(d.notes.logs) > 0 || d.notes.state != "" {
			t.Errorf("actions %+v, requeue %v, needs set %v, %d log lines, state %q; want nothing decided before the describe",
				d.acts, d.requeue, d.needsSet, len(d.notes.logs), d.notes.state)
		}
	}
	listedFailed := errors.New("DescribeNetworkInterfaces: throttled")
	// routesSpecENIs gives the node a NodeRouting whose agent routes its
	// spec.enis (routesSpecENIs), listing eni-0, as does the node's
	// status.eni.enis.
	routesSpecENIs := func(f *facts) {
		f.routing.Generation = 1
		f.routing.Spec.InstanceID = "i-1"
		f.routing.Spec.ENIs = []enipamv1alpha1.NodeENI{{ID: "eni-0"}}
		f.routing.Status = enipamv1alpha1.NodeRoutingStatus{ObservedGeneration: 1, RoutesSpecENIs: true}
		f.routingRead = f.routing.DeepCopy()
		f.routingLooked = true
	}
	// listsSpec has the NodeRouting read list ids in spec.enis at
	// generation gen, the agent's report at observed.
	listsSpec := func(f *facts, gen, observed int64, ids ...string) {
		routesSpecENIs(f)
		f.routing.Generation, f.routing.Status.ObservedGeneration = gen, observed
		f.routing.Spec.ENIs = nil
		for _, id := range ids {
			f.routing.Spec.ENIs = append(f.routing.Spec.ENIs, enipamv1alpha1.NodeENI{ID: id})
		}
		f.routingRead = f.routing.DeepCopy()
	}
	// copied gives the node a copy of ids in status.eni.enis.
	copied := func(f *facts, ids ...string) {
		f.cn.Status.ENI.ENIs = map[string]awstypes.ENI{}
		for _, id := range ids {
			f.cn.Status.ENI.ENIs[id] = awstypes.ENI{ID: id}
		}
	}
	copyIDs := func(d decision) []string { return slices.Sorted(maps.Keys(d.cn.Status.ENI.ENIs)) }
	const db = "ns/db-0"
	// remapped: ns/db-0's address .200, which this process reassigned
	// onto eni-1 and asked the node's agent about at generation 4 (the
	// NodeRouting's spec lists the query), is on eni-1 in EC2's view,
	// routed, ready for the pool but untrusted: its remap may not have
	// landed. answer is the agent's report.
	moved := netip.MustParseAddr("10.0.1.200")
	remapped := func(f *facts, answer enipamv1alpha1.RemapReport) {
		e := eni(1, 10, 2)
		pooled(f.cn, e, 1)
		e.IPs = append(e.IPs, moved)
		f.snap.ENIs = append(f.snap.ENIs, e)
		f.static.claims[db] = &claims.Claim{Owner: db, Addr: moved, Target: "n1", Ready: true}
		f.poolIn = &poolInputs{untrusted: map[netip.Addr]bool{moved: true}}
		f.moving = map[netip.Addr]string{moved: "eni-1"}
		f.remapMoves = map[netip.Addr]string{moved: "eni-1"}
		f.mem.remapsAsked = map[string]remapAsk{moved.String(): {eni: "eni-1", generation: 4}}
		f.mem.remapsLooked = now.Add(-time.Second)
		f.routing.Spec.RemapQueries = []enipamv1alpha1.RemapQuery{{Address: moved.String(), ENI: "eni-1"}}
		f.routing.Status.Remaps = &answer
	}
	egress := map[string]string{"cilium/static": "egress"}
	cases := []struct {
		name  string
		setup func(f *facts)
		check func(t *testing.T, f *facts, d decision)
	}{{
		name: "an empty node gets a new ENI carrying its need",
		check: func(t *testing.T, f *facts, d decision) {
			// What fill derives from EC2 goes to the NodeRouting's
			// spec.enis alone (no copy into status.eni.enis, which
			// nothing reads), so the CiliumNode has nothing to write.
			if d.writeStatus || d.writeCN {
				t.Errorf("status to write %v, CiliumNode written %v; want neither, no copy of the ENIs", d.writeStatus, d.writeCN)
			}
			if ids := specENIIDs(d.routing); !slices.Equal(ids, []string{"eni-0"}) {
				t.Errorf("spec.enis %v, want eni-0", ids)
			}
			if c := d.acts.plan.Create; c == nil || c.DeviceIndex != 1 || c.IPs != 4 {
				t.Errorf("plan %+v, want a new ENI at index 1 with 4 addresses", d.acts.plan)
			}
			if d.mem.deficitAt != now || !d.mem.deficitENI || d.mem.consolidation.grewAt != now {
				t.Errorf("memory: deficit since %v (ENI %v), grew at %v; want all now", d.mem.deficitAt, d.mem.deficitENI, d.mem.consolidation.grewAt)
			}
			if !d.needsSet || !d.empty || d.held || d.turnedAway || d.slotWait {
				t.Errorf("empty %v (set %v), held %v, turned away %v, slot wait %v; want an empty node served", d.empty, d.needsSet, d.held, d.turnedAway, d.slotWait)
			}
			if d.requeue != opts.BlockedRetry || d.notes.state != stateDeficit {
				t.Errorf("requeue %v, state %q; want %v, %q", d.requeue, d.notes.state, opts.BlockedRetry, stateDeficit)
			}
		},
	}, {
		name: "a decision notes no log line below the controller's level (Info here)",
		check: func(t *testing.T, f *facts, d decision) {
			for _, r := range d.notes.logs {
				if r.Level < slog.LevelInfo {
					t.Errorf("noted %v line %q below the logger's level", r.Level, r.Message)
				}
			}
		},
	}, {
		name:  "a decision notes its Debug lines when the controller logs them",
		setup: func(f *facts) { f.logLevel = slog.LevelDebug },
		check: func(t *testing.T, f *facts, d decision) {
			if !slices.ContainsFunc(d.notes.logs, func(r slog.Record) bool { return r.Level == slog.LevelDebug && r.Message == "pool sized" }) {
				t.Errorf("no Debug line \"pool sized\" noted among %d", len(d.notes.logs))
			}
		},
	}, {
		name: "an empty node that cannot be served does not count as empty for the other nodes' decisions",
		setup: func(f *facts) {
			f.snap.Subnets[0].Available = 0
		},
		check: func(t *testing.T, f *facts, d decision) {
			if !errors.Is(d.opErr, pool.ErrSubnetExhausted) {
				t.Fatalf("operator error %v, want %v", d.opErr, pool.ErrSubnetExhausted)
			}
			if !d.needsSet || d.empty {
				t.Errorf("empty %v (set %v), want decided not empty: nothing keeps its place ahead of the other nodes", d.empty, d.needsSet)
			}
		},
	}, {
		name: "a node in shape decides nothing and records how long its deficit took",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 0)
			f.mem.deficitAt, f.mem.failures = now.Add(-2*time.Second), 3
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.acts.produce() || len(d.acts.repairs.due) > 0 || d.acts.consolidation != nil {
				t.Errorf("actions %+v, want none", d.acts)
			}
			if !d.mem.deficitAt.IsZero() || d.mem.failures != 0 || len(d.mem.leads) != 1 || d.mem.leads[0] != 2*time.Second {
				t.Errorf("memory: deficit since %v, failures %d, leads %v; want none, 0, [2s]", d.mem.deficitAt, d.mem.failures, d.mem.leads)
			}
			if !slices.Equal(d.notes.latencies, []float64{2}) {
				t.Errorf("allocation latencies %v, want [2]", d.notes.latencies)
			}
			if d.requeue != opts.BlockedRetry || d.notes.state != stateServed || d.empty {
				t.Errorf("requeue %v, state %q, empty %v; want %v, %q, not empty", d.requeue, d.notes.state, d.empty, opts.BlockedRetry, stateServed)
			}
		},
	}, {
		name: "a node's capacity is decided on the decision's clock: set when its size changed",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 1)
			// Written a second ago, with other sizes.
			f.routing.Spec.Capacity = &enipamv1alpha1.NodeCapacity{MaxIPs: 1}
			f.mem.capacityWritten = now.Add(-time.Second)
		},
		check: func(t *testing.T, f *facts, d decision) {
			c := d.capacity.set
			if c == nil || c.PoolIPs != 4 || c.UsedIPs != 1 || c.FreeIPs != 3 || c.MaxIPs != 8 || c.AvailabilityZone != "us-east-1a" {
				t.Errorf("capacity %+v, want 4 pooled, 1 used, 3 free of 8, in us-east-1a", c)
			}
			if !d.capacity.observed || d.capacity.maxIPs != 8 || d.capacity.wait != 0 {
				t.Errorf("capacity decision %+v, want the sizes observed and no wait", d.capacity)
			}
			if d.routing.Spec.Capacity.MaxIPs != 1 {
				t.Errorf("the desired NodeRouting's capacity set by the decision; it is set once the CiliumNode is written")
			}
		},
	}, {
		name: "a change of a node's counts alone waits for countsEvery from its last write, on the decision's clock",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 1)
			f.routing.Spec.Capacity = &enipamv1alpha1.NodeCapacity{MaxIPs: 8, PoolIPs: 4, UsedIPs: 2, FreeIPs: 2, CanGrow: true,
				AvailabilityZone: "us-east-1a", Subnets: []string{"subnet-a"}, FreeENISlots: 1}
			f.mem.capacityWritten = now.Add(-4 * time.Second)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.capacity.set != nil || d.capacity.wait != countsEvery-4*time.Second {
				t.Errorf("capacity decision %+v (set %+v), want none set, a wait of %v", d.capacity, d.capacity.set, countsEvery-4*time.Second)
			}
		},
	}, {
		name: "the decision fills in the instance and its ENIs, keeping for the consistency grace an ENI listed that EC2 does not show",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 0)
			f.cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1"}, "eni-8": {ID: "eni-8"}, "eni-9": {ID: "eni-9"}}
			// eni-8 this process deleted; eni-9 is missing from EC2's view.
			f.fillIn.gone = map[string]bool{"eni-8": true}
			f.mem.missingENIs["eni-8"] = now.Add(-time.Second)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.cn.Spec.ENI.InstanceType != "t.small" || d.cn.Spec.ENI.AvailabilityZone != "us-east-1a" {
				t.Errorf("spec.eni %+v, want the instance's type and zone", d.cn.Spec.ENI)
			}
			got := slices.Sorted(maps.Keys(d.cn.Status.ENI.ENIs))
			if !slices.Equal(got, []string{"eni-0", "eni-1", "eni-9"}) {
				t.Errorf("status.eni.enis %v, want eni-0, eni-1 and eni-9 (kept for the grace)", got)
			}
			if len(d.cn.Status.ENI.ENIs["eni-1"].Addresses) != 4 {
				t.Errorf("eni-1 lists %v, want its 4 addresses", d.cn.Status.ENI.ENIs["eni-1"].Addresses)
			}
			if since, ok := d.mem.missingENIs["eni-9"]; !ok || since != now || len(d.mem.missingENIs) != 1 {
				t.Errorf("missing ENIs %v, want eni-9 alone, since now", d.mem.missingENIs)
			}
			if d.requeue != opts.ConsistencyGrace {
				t.Errorf("requeue %v, want %v (eni-9's grace)", d.requeue, opts.ConsistencyGrace)
			}
		},
	}, {
		name:  "a joining node's first pool write waits for the rest of its first ENIs (joinHold)",
		setup: joining,
		check: func(t *testing.T, f *facts, d decision) {
			// The status's copy of the ENIs waits for the join: they
			// reach the agent in the NodeRouting's spec.enis.
			if len(d.cn.Spec.IPAM.Pool) != 4 || d.writeSpec || d.writeStatus {
				t.Errorf("pool of %d, spec written %v, status %v; want eni-1's 4 addresses decided, their spec write waiting, the status not written",
					len(d.cn.Spec.IPAM.Pool), d.writeSpec, d.writeStatus)
			}
			if ids := specENIIDs(d.routing); !slices.Contains(ids, "eni-1") {
				t.Errorf("spec.enis %v, want eni-1 listed", ids)
			}
			if d.mem.joinHeldSince != now || d.requeue != joinHold {
				t.Errorf("held since %v, requeue %v; want since now, %v", d.mem.joinHeldSince, d.requeue, joinHold)
			}
		},
	}, {
		name: "a joining node's pool is written once joinHold is over",
		setup: func(f *facts) {
			joining(f)
			f.mem.joinHeldSince = now.Add(-joinHold)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if len(d.cn.Spec.IPAM.Pool) != 4 || !d.writeSpec {
				t.Errorf("pool of %d, spec written %v; want eni-1's 4 addresses written", len(d.cn.Spec.IPAM.Pool), d.writeSpec)
			}
		},
	}, {
		name: "addresses new on an attached ENI are written at once, not held behind the next actions' calls",
		setup: func(f *facts) {
			// eni-1 holds 6: the 4 pooled (all used) and 2 that the last
			// Assign brought, which the status as read does not list yet
			// and the agent has not routed; the need asks for more.
			f.snap.Type.IPv4PerENI = 10
			e := eni(1, 10, 6)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, cloud.ENI{ID: e.ID, IPs: e.IPs[:4]}, 4)
			listed := enipamv1alpha1.NodeENI{ID: e.ID}
			for _, a := range e.IPs[:4] {
				listed.Addresses = append(listed.Addresses, a.String())
			}
			routesSpecENIs(f)
			f.routing.Spec.ENIs = []enipamv1alpha1.NodeENI{{ID: "eni-0"}, listed}
			f.routingRead = f.routing.DeepCopy()
			f.routed = func(_ string, a netip.Addr) bool { return slices.Contains(e.IPs[:4], a) }
			// They have waited for the agent past routeHold: the calls
			// no longer wait for them (routesDue).
			f.mem.awaitingSince = now.Add(-routeHold)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if len(d.acts.plan.Assign) != 1 || d.acts.plan.Assign[0].ENIID != "eni-1" || d.acts.plan.Assign[0].IPs != 2 {
				t.Fatalf("plan %+v, want 2 more addresses on eni-1", d.acts.plan)
			}
			// The agent routes the 2 as soon as it reads them: they go
			// to the NodeRouting's spec.enis, which the reconcile writes
			// before its EC2 calls whatever the CiliumNode's write
			// waits for; the status holds no copy of them.
			if got := specENIAddresses(d.routing, "eni-1"); got != 6 {
				t.Errorf("spec.enis lists %d addresses on eni-1, want 6", got)
			}
			if d.writeStatus || len(d.cn.Status.ENI.ENIs) != 0 {
				t.Errorf("status written %v, status.eni.enis %v; want no copy of the ENIs", d.writeStatus, copyIDs(d))
			}
			// What the agent is told gains routable addresses: the
			// CiliumNode's write (and the capacity with it) is not held
			// behind the calls (listsRoutable).
			if !d.writeCN {
				t.Error("the CiliumNode's write waits for the calls")
			}
		},
	}, {
		name: "a node's EC2 calls wait while addresses on its attached ENIs are one report from the pool, for routeHold at most",
		setup: func(f *facts) {
			// eni-1 holds 4 of its 9: 2 pooled and used, 2 more that the
			// agent has not reported routed yet; the need asks for 2
			// beyond, which eni-1 has room for.
			f.snap.Type.IPv4PerENI = 10
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, cloud.ENI{ID: e.ID, IPs: e.IPs[:2]}, 2)
			f.routed = func(_ string, a netip.Addr) bool { return slices.Contains(e.IPs[:2], a) }
		},
		check: func(t *testing.T, f *facts, d decision) {
			if !d.acts.plan.Empty() || d.mem.deficitAt != now {
				t.Errorf("plan %+v, deficit since %v; want a deficit since now and no call before the agent's report", d.acts.plan, d.mem.deficitAt)
			}
			if d.requeue <= 0 || d.requeue > routeHold {
				t.Errorf("requeue %v, want within %v", d.requeue, routeHold)
			}
			if got := specENIAddresses(d.routing, "eni-1"); got != 4 {
				t.Errorf("spec.enis lists %d addresses on eni-1, want its 4, for the agent to route", got)
			}
		},
	}, {
		name: "a node's calls (here a new ENI) no longer wait once its addresses waited routeHold for the agent",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, cloud.ENI{ID: e.ID, IPs: e.IPs[:2]}, 2)
			f.routed = func(_ string, a netip.Addr) bool { return slices.Contains(e.IPs[:2], a) }
			f.mem.awaitingSince = now.Add(-routeHold)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if c := d.acts.plan.Create; c == nil || c.DeviceIndex != 2 {
				t.Errorf("plan %+v, want a new ENI at index 2", d.acts.plan)
			}
		},
	}, {
		name: "a joining node's ENIs go to its NodeRouting's spec.enis alone: no copy into status.eni.enis",
		setup: func(f *facts) {
			joining(f)
			routesSpecENIs(f)
			f.mem.joinHeldSince = now.Add(-joinHold)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if len(d.cn.Spec.IPAM.Pool) != 4 || !d.writeSpec || d.writeStatus {
				t.Errorf("pool of %d, spec written %v, status %v; want eni-1's 4 addresses written, the status not",
					len(d.cn.Spec.IPAM.Pool), d.writeSpec, d.writeStatus)
			}
			if got := copyIDs(d); len(got) != 0 {
				t.Errorf("status.eni.enis %v, want none", got)
			}
			var ids []string
			for _, e := range d.routingENIs.list {
				ids = append(ids, e.ID)
			}
			if !d.routingENIs.set || !slices.Equal(ids, []string{"eni-0", "eni-1", "eni-2"}) {
				t.Errorf("spec.enis decided %v (set %v), want eni-0, eni-1 and eni-2", ids, d.routingENIs.set)
			}
			if d.eniCopy {
				t.Error("an ENI copy decided, want none")
			}
		},
	}, {
		name: "a node whose join its own pool write completes gets no copy of its ENIs",
		setup: func(f *facts) {
			// eni-1's 4 addresses are routed and not pooled yet: this
			// reconcile's spec write brings the whole need.
			f.snap.ENIs = append(f.snap.ENIs, eni(1, 10, 4))
			routesSpecENIs(f)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if len(d.cn.Spec.IPAM.Pool) != 4 || !d.writeSpec || d.writeStatus || len(d.cn.Status.ENI.ENIs) != 0 {
				t.Fatalf("pool of %d, spec written %v, status %v, status.eni.enis %v; want eni-1's 4 addresses written, no copy",
					len(d.cn.Spec.IPAM.Pool), d.writeSpec, d.writeStatus, copyIDs(d))
			}
		},
	}, {
		name: "a copy of a node's ENIs its agent routes spec.enis over is cleared in one status write, counted as the copy's",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 0)
			listsSpec(f, 3, 3, "eni-0", "eni-1")
			copied(f, "eni-0", "eni-1")
			// The instance's details as an earlier write left them.
			f.cn.Spec.ENI.InstanceType, f.cn.Spec.ENI.VpcID, f.cn.Spec.ENI.AvailabilityZone, f.cn.Spec.ENI.NodeSubnetID = "t.small", "vpc-1", "us-east-1a", "subnet-a"
		},
		check: func(t *testing.T, f *facts, d decision) {
			if !d.writeStatus || d.writeSpec || !d.eniCopy {
				t.Errorf("status written %v, spec %v, ENI copy %v; want the status alone, the copy's", d.writeStatus, d.writeSpec, d.eniCopy)
			}
			if got := copyIDs(d); len(got) != 0 {
				t.Errorf("status.eni.enis %v, want it cleared", got)
			}
		},
	}, {
		name: "a copy stays, kept whole, while the agent has not reported the generation of spec.enis that lists its ENIs",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 0)
			listsSpec(f, 4, 3, "eni-0", "eni-1")
			copied(f, "eni-0")
		},
		check: func(t *testing.T, f *facts, d decision) {
			if got := copyIDs(d); !slices.Equal(got, []string{"eni-0", "eni-1"}) || !d.writeStatus || !d.eniCopy {
				t.Errorf("status.eni.enis %v, status written %v, ENI copy %v; want eni-0 and eni-1, written as the copy", got, d.writeStatus, d.eniCopy)
			}
		},
	}, {
		name: "a copy stays while spec.enis read does not list one of its ENIs",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 0)
			listsSpec(f, 3, 3, "eni-0")
			copied(f, "eni-0", "eni-1")
		},
		check: func(t *testing.T, f *facts, d decision) {
			if got := copyIDs(d); !slices.Equal(got, []string{"eni-0", "eni-1"}) {
				t.Errorf("status.eni.enis %v, want eni-0 and eni-1 kept", got)
			}
		},
	}, {
		name: "an agent that reported without routesSpecENIs (an earlier version) gets the copy at once, whole",
		setup: func(f *facts) {
			joining(f)
			listsSpec(f, 2, 2, "eni-0")
			f.routing.Status.RoutesSpecENIs = false
			f.routingRead = f.routing.DeepCopy()
		},
		check: func(t *testing.T, f *facts, d decision) {
			if got := copyIDs(d); !slices.Equal(got, []string{"eni-0", "eni-1", "eni-2"}) || !d.writeStatus {
				t.Errorf("status.eni.enis %v, status written %v; want eni-0, eni-1 and eni-2 written", got, d.writeStatus)
			}
		},
	}, {
		name: "a node whose pool holds an owner's stamped address gets the copy at once, for enipam-scheduler",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 0)
			f.cn.Spec.IPAM.Pool[e.IPs[0].String()] = ipamtypes.AllocationIP{Resource: e.ID, Owner: db}
			routesSpecENIs(f)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if got := copyIDs(d); !slices.Equal(got, []string{"eni-0", "eni-1"}) || !d.writeStatus {
				t.Errorf("status.eni.enis %v, status written %v; want eni-0 and eni-1 written", got, d.writeStatus)
			}
		},
	}, {
		name: "a top-up's new ENI is held while other nodes are empty",
		setup: func(f *facts) {
			e := eni(1, 10, 4) // full: 4 secondaries of 5
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 3)
			f.cross.emptyElsewhere = 2
		},
		check: func(t *testing.T, f *facts, d decision) {
			if !d.held || !d.acts.plan.Empty() {
				t.Errorf("held %v, plan %+v; want the new ENI held, nothing else to do", d.held, d.acts.plan)
			}
			if d.requeue != heldRetry {
				t.Errorf("requeue %v, want %v", d.requeue, heldRetry)
			}
			if d.mem.deficitAt != now || d.mem.deficitENI || !d.mem.consolidation.grewAt.IsZero() {
				t.Errorf("memory: deficit since %v (ENI %v), grew at %v; want a deficit since now, no ENI taken", d.mem.deficitAt, d.mem.deficitENI, d.mem.consolidation.grewAt)
			}
			if !d.needsSet || d.empty {
				t.Errorf("empty %v (set %v), want a node with addresses", d.empty, d.needsSet)
			}
		},
	}, {
		name: "a node turned away from EC2 (no slot) waits for one",
		setup: func(f *facts) {
			f.cross.slotOpen = false
		},
		check: func(t *testing.T, f *facts, d decision) {
			if !d.turnedAway || !d.slotWait || d.slotPriority != priorityStarving || !d.acts.plan.Empty() || d.acts.slot {
				t.Errorf("turned away %v, slot wait %v (priority %d), plan %+v, slot %v; want the plan waiting for a slot at priority %d",
					d.turnedAway, d.slotWait, d.slotPriority, d.acts.plan, d.acts.slot, priorityStarving)
			}
			if d.requeue != slotRetry {
				t.Errorf("requeue %v, want %v", d.requeue, slotRetry)
			}
			// Nothing of its pool changed: it is written as a slot frees.
			if d.writeCN || d.writeStatus || d.writeSpec {
				t.Errorf("CiliumNode written %v (status %v, spec %v), want no write", d.writeCN, d.writeStatus, d.writeSpec)
			}
			if d.mem.deficitAt != now || d.mem.deficitENI || !d.mem.consolidation.grewAt.IsZero() {
				t.Errorf("memory: deficit since %v (ENI %v), grew at %v; want a deficit since now, no ENI taken", d.mem.deficitAt, d.mem.deficitENI, d.mem.consolidation.grewAt)
			}
		},
	}, {
		name: "an acknowledged address EC2 no longer holds is released without a call; one it holds is unassigned",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			pooled(f.cn, e, 0)
			f.cn.Spec.IPAM.Pool[ip(14).String()] = ipamtypes.AllocationIP{Resource: "eni-1"}
			f.cn.Status.IPAM.ReleaseIPs[ip(14).String()] = ipamoption.IPAMReadyForRelease
			// eni-2 still holds its acknowledged .20.
			other := eni(2, 20, 2)
			pooled(f.cn, other, 0)
			f.cn.Status.IPAM.ReleaseIPs[ip(20).String()] = ipamoption.IPAMReadyForRelease
			f.snap.ENIs = append(f.snap.ENIs, e, other)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if st := d.cn.Status.IPAM.ReleaseIPs[ip(14).String()]; st != ipamoption.IPAMReleased {
				t.Errorf("%s: handshake %q, want released", ip(14), st)
			}
			if _, ok := d.cn.Spec.IPAM.Pool[ip(14).String()]; ok {
				t.Errorf("%s still pooled", ip(14))
			}
			if len(d.acts.release) != 1 || d.acts.release[0].eniID != "eni-2" || !slices.Equal(d.acts.release[0].held, []netip.Addr{ip(20)}) {
				t.Errorf("release steps %+v, want one Unassign, of %s on eni-2", d.acts.release, ip(20))
			}
			if st := d.cn.Status.IPAM.ReleaseIPs[ip(20).String()]; st != ipamoption.IPAMReadyForRelease {
				t.Errorf("%s: handshake %q, want acknowledged until its Unassign went through", ip(20), st)
			}
			// The handshake and the pool changed: written before the
			// Unassign, whatever it produces.
			if !d.writeCN || !d.writeStatus || !d.writeSpec {
				t.Errorf("CiliumNode written %v (status %v, spec %v), want both written", d.writeCN, d.writeStatus, d.writeSpec)
			}
		},
	}, {
		name: "a draining ENI serves again when the others cannot carry the node",
		setup: func(f *facts) {
			f.cfg.ReleaseExcessIPs, f.cfg.Consolidation = true, policy.Consolidation{Enabled: true, Delay: time.Minute}
			f.snap.Type.MaxENIs = 4
			full := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, full, eni(2, 20, 0))
			pooled(f.cn, full, 2)
			f.headroom = 2
			f.mem.consolidation.drainENI = "eni-2"
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.mem.consolidation.drainENI != "" || d.snap.Draining != "" {
				t.Errorf("still draining %q (snapshot %q), want eni-2 in service", d.mem.consolidation.drainENI, d.snap.Draining)
			}
			if p := d.acts.plan; p.Create != nil || len(p.Assign) != 1 || p.Assign[0].ENIID != "eni-2" {
				t.Errorf("plan %+v, want addresses assigned on eni-2 and no new ENI", p)
			}
		},
	}, {
		name: "a static address's placement runs alone: the pool's Assign waits for the next look",
		setup: func(f *facts) {
			e := eni(1, 10, 2)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 1)
			claimed := netip.MustParseAddr("10.0.1.200")
			f.static.claims[db] = &claims.Claim{Owner: db, Addr: claimed, Target: "n1", Ready: true}
			f.static.pooledElsewhere = map[string]bool{claimed.String(): false}
			f.static.subnets[claimed] = subnet
		},
		check: func(t *testing.T, f *facts, d decision) {
			if p := d.acts.static.place; len(p) != 1 || p[0].ip != netip.MustParseAddr("10.0.1.200") || p[0].eniID != "eni-1" {
				t.Errorf("placements %+v, want 10.0.1.200 on eni-1", p)
			}
			// The placement took its slot on the pass's copy: the
			// snapshot decided on, and counted, is what EC2 holds.
			if got := d.snap.ENIs[1].IPs; len(got) != 2 {
				t.Errorf("eni-1 holds %v in the decision's snapshot, want its 2 addresses alone", got)
			}
			if !d.acts.plan.Empty() {
				t.Errorf("plan %+v, want none beside the placement", d.acts.plan)
			}
			if len(d.acts.notes) != 1 || d.acts.notes[0].want == nil || d.acts.notes[0].want.Reason != "" && d.acts.notes[0].want.Reason != enipamv1alpha1.ReasonPlacing {
				t.Errorf("notes %+v, want one for %s", d.acts.notes, db)
			}
			if d.requeue != staticRecheck {
				t.Errorf("requeue %v, want %v", d.requeue, staticRecheck)
			}
		},
	}, {
		name: "a remap the node's agent confirmed is trusted by the decision: the address pooled, stamped, with no describe, the landing for the inventory",
		setup: func(f *facts) {
			remapped(f, enipamv1alpha1.RemapReport{ObservedGeneration: 4, Landed: []string{moved.String()}})
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.reads.any() || !slices.Equal(d.landed, []landing{{ip: moved, eni: "eni-1"}}) {
				t.Fatalf("describes asked %+v, landings %v; want none asked, %s landed on eni-1", d.reads, d.landed, moved)
			}
			if e, ok := d.cn.Spec.IPAM.Pool[moved.String()]; !ok || e.Owner != db || e.Resource != "eni-1" || !d.writeSpec {
				t.Errorf("pool entry %+v (pooled %v, spec written %v), want %s on eni-1 for %s, written", e, ok, d.writeSpec, moved, db)
			}
			// Landed: no longer a remap to ask about.
			if len(d.routing.Spec.RemapQueries) != 0 {
				t.Errorf("remap queries %+v, want none", d.routing.Spec.RemapQueries)
			}
			if f.poolIn.untrusted[moved] != false || f.moving[moved] != "" {
				t.Errorf("the facts still take %s for untrusted (%v) or moving (%q)", moved, f.poolIn.untrusted[moved], f.moving[moved])
			}
		},
	}, {
		name: "a remap the node's agent confirmed on an ENI the address has since been reassigned away from is not trusted",
		setup: func(f *facts) {
			remapped(f, enipamv1alpha1.RemapReport{ObservedGeneration: 4, Landed: []string{moved.String()}})
			f.remapMoves[moved] = "eni-9" // another node's, since the query
		},
		check: func(t *testing.T, f *facts, d decision) {
			if len(d.landed) != 0 {
				t.Errorf("landings %v, want none", d.landed)
			}
			if _, ok := f.cn.Spec.IPAM.Pool[moved.String()]; ok {
				t.Errorf("%s pooled on an answer about an earlier call", moved)
			}
		},
	}, {
		name: "a remap the node's agent answered Missing is remembered so, and the describe waits for the agent's next answer",
		setup: func(f *facts) {
			remapped(f, enipamv1alpha1.RemapReport{ObservedGeneration: 4, Missing: []string{moved.String()}})
		},
		check: func(t *testing.T, f *facts, d decision) {
			if a := d.mem.remapsAsked[moved.String()]; !a.missing || len(d.landed) != 0 {
				t.Errorf("ask %+v, landings %v; want the ask marked missing, none landed", a, d.landed)
			}
			if d.reads.any() || d.requeue != unverifiedRecheck-time.Second {
				t.Errorf("describes asked %+v, requeue %v; want none, the describe waiting %v", d.reads, d.requeue, unverifiedRecheck-time.Second)
			}
		},
	}, {
		name: "a NodeRouting the read did not find is decided whole: the policy's values and capacity, owned by the CiliumNode",
		setup: func(f *facts) {
			f.routing = nil
			f.cfg.ExcludeTags = map[string]string{"no-pods": "true"}
		},
		check: func(t *testing.T, f *facts, d decision) {
			nr := d.routing
			if nr == nil {
				t.Fatal("no NodeRouting decided")
			}
			if nr.Name != "n1" || nr.Spec.InstanceID != "i-1" || nr.Spec.FirstInterfaceIndex != 1 || nr.Spec.ExcludeInterfaceTags["no-pods"] != "true" {
				t.Errorf("NodeRouting %s, spec %+v; want n1 with i-1, first interface index 1 and the exclude tag", nr.Name, nr.Spec)
			}
			if !ownedBy(nr, f.cn) || len(nr.OwnerReferences) != 1 {
				t.Errorf("owner references %+v, want the CiliumNode alone", nr.OwnerReferences)
			}
			if d.capacity.set == nil {
				t.Errorf("no capacity decided for the NodeRouting to create")
			}
		},
	}, {
		name: "a NodeRouting an earlier CiliumNode of the same name owns is taken over by the decision",
		setup: func(f *facts) {
			f.routing.OwnerReferences = []metav1.OwnerReference{{Kind: "CiliumNode", Name: "n1", UID: "uid-earlier"}, {Kind: "Other", Name: "x", UID: "uid-x"}}
		},
		check: func(t *testing.T, f *facts, d decision) {
			want := []metav1.OwnerReference{{Kind: "Other", Name: "x", UID: "uid-x"}, ownerRefs(nil, f.cn)[0]}
			if !reflect.DeepEqual(d.routing.OwnerReferences, want) {
				t.Errorf("owner references %+v, want %+v", d.routing.OwnerReferences, want)
			}
		},
	}, {
		name: "a node asking for an Elastic IP gets the free one the read found, reserved once the decision is over",
		setup: func(f *facts) {
			e := eni(1, 10, 4)
			f.snap.ENIs = append(f.snap.ENIs, e)
			pooled(f.cn, e, 0)
			f.snap.ENIs[0].PrimaryIP = netip.MustParseAddr("10.0.1.5")
			f.haveStaticIP = true
			f.staticIP = staticIPFacts{tags: egress, instanceID: "i-1", primary: &f.snap.ENIs[0],
				addrs: []cloud.Address{{AllocationID: "eipalloc-1", Tags: egress}}, candidate: cloud.Address{AllocationID: "eipalloc-1", Tags: egress}, haveCandidate: true}
		},
		check: func(t *testing.T, f *facts, d decision) {
			a := d.acts.associate
			if a == nil || a.pick.AllocationID != "eipalloc-1" || !a.reserve || a.rec.ENIID != "eni-0" {
				t.Fatalf("association %+v, want eipalloc-1 on eni-0, to reserve", a)
			}
			if d.staticErr != nil || d.requeue != opts.BlockedRetry {
				t.Errorf("static error %v, requeue %v; want none, %v", d.staticErr, d.requeue, opts.BlockedRetry)
			}
		},
	}, {
		name: "a node whose Elastic IPs could not be listed is told so by the decision, and its pool served",
		setup: func(f *facts) {
			f.staticIP = staticIPFacts{listErr: errors.New("listing Elastic IPs, RequestLimitExceeded")}
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.staticErr != f.staticIP.listErr || d.cn.Status.IPAM.OperatorStatus.Error != f.staticIP.listErr.Error() || d.acts.associate != nil {
				t.Errorf("static error %v, operator-status %q, association %+v; want the listing's failure, no association",
					d.staticErr, d.cn.Status.IPAM.OperatorStatus.Error, d.acts.associate)
			}
			if len(d.notes.events) != 1 || d.notes.events[0].reason != ReasonEC2Error || d.requeue != retryAfter(opts, 0) {
				t.Errorf("events %+v, requeue %v; want one %s, %v", d.notes.events, d.requeue, ReasonEC2Error, retryAfter(opts, 0))
			}
			if c := d.acts.plan.Create; c == nil || c.IPs != 4 {
				t.Errorf("plan %+v, want the pool's new ENI all the same", d.acts.plan)
			}
		},
	}, {
		name: "a node asking for an Elastic IP when none is free is told so, and nothing is reserved",
		setup: func(f *facts) {
			f.haveStaticIP = true
			f.staticIP = staticIPFacts{tags: egress, instanceID: "i-1", primary: &f.snap.ENIs[0]}
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.acts.associate != nil || d.staticErr == nil || d.requeue != opts.BlockedRetry {
				t.Errorf("association %+v, static error %v, requeue %v; want none, an error, %v", d.acts.associate, d.staticErr, d.requeue, opts.BlockedRetry)
			}
			if len(d.notes.events) != 1 || d.notes.events[0].reason != ReasonStaticIPUnavailable {
				t.Errorf("events %+v, want one %s", d.notes.events, ReasonStaticIPUnavailable)
			}
		},
	}, {
		name:  "an ENI the node's status lists that EC2's view lacks is described before anything is decided",
		setup: func(f *facts) { listedUnseen(f, describeRead{}) },
		check: func(t *testing.T, f *facts, d decision) { describedFirst(t, d, []string{"eni-7"}, nil) },
	}, {
		name: "a listed ENI of a node whose spec names no instance yet is not described",
		setup: func(f *facts) {
			f.cn.Spec.InstanceID = ""
			listedUnseen(f, describeRead{})
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.reads.any() || d.acts.plan.Create == nil {
				t.Errorf("describes asked %+v, plan %+v; want none, and the node decided", d.reads, d.acts.plan)
			}
		},
	}, {
		name:  "a listed ENI's failed describe is logged and the node decided without it",
		setup: func(f *facts) { listedUnseen(f, describeRead{enis: []string{"eni-7"}, err: listedFailed}) },
		check: func(t *testing.T, f *facts, d decision) {
			if d.reads.any() || d.acts.plan.Create == nil {
				t.Errorf("describes asked %+v, plan %+v; want none, and the node decided", d.reads, d.acts.plan)
			}
			if !slices.ContainsFunc(d.notes.logs, func(r slog.Record) bool { return r.Message == "describing listed ENIs missing from EC2's view failed" }) {
				t.Errorf("the failed describe is not logged")
			}
		},
	}, {
		name:  "addresses ready for the pool whose describe is untrusted: their ENI is described before anything is decided",
		setup: untrusted,
		check: func(t *testing.T, f *facts, d decision) { describedFirst(t, d, nil, []string{"eni-1"}) },
	}, {
		name: "before describes are trusted, untrusted addresses that are no move of this process wait for the trust",
		setup: func(f *facts) {
			untrusted(f)
			f.describes = &describeFacts{trustFrom: now.Add(30 * time.Second)}
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.reads.any() || d.requeue != 30*time.Second || len(d.cn.Spec.IPAM.Pool) != 0 {
				t.Errorf("describes asked %+v, requeue %v, pool %v; want none, 30s, empty", d.reads, d.requeue, d.cn.Spec.IPAM.Pool)
			}
		},
	}, {
		name: "addresses still unconfirmed after their describe are looked at again shortly, the describe remembered",
		setup: func(f *facts) {
			untrusted(f)
			f.describes, f.described = &describeFacts{confirm: describeRead{enis: []string{"eni-1"}}}, true
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.reads.any() || d.requeue != unverifiedRecheck || d.mem.remapsLooked != now || len(d.cn.Spec.IPAM.Pool) != 0 {
				t.Errorf("describes asked %+v, requeue %v, remaps looked at %v, pool %v; want none, %v, now, empty",
					d.reads, d.requeue, d.mem.remapsLooked, d.cn.Spec.IPAM.Pool, unverifiedRecheck)
			}
		},
	}, {
		name: "a node whose instance was replaced is reset, and nothing else decided before the next reconcile reads it afresh",
		setup: func(f *facts) {
			// The CiliumNode names i-0, whose ENI eni-1 its pool and
			// status list, one address of it acknowledged for release
			// and one missing from EC2; the Node's providerID names i-1.
			// The read stops there: no snapshot.
			f.cn.Spec.InstanceID = "i-0"
			f.haveSnap = false
			e := eni(1, 10, 4)
			pooled(f.cn, e, 1)
			f.cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1"}}
			f.cn.Status.IPAM.ReleaseIPs[ip(13).String()] = ipamoption.IPAMReadyForRelease
			f.mem.missing[ip(12).String()] = now.Add(-time.Second)
			f.mem.missingENIs["eni-1"] = now.Add(-time.Second)
		},
		check: func(t *testing.T, f *facts, d decision) {
			cn := d.cn
			if cn.Spec.InstanceID != "i-1" || cn.Spec.IPAM.Pool != nil || cn.Status.IPAM.ReleaseIPs != nil || cn.Status.ENI.ENIs != nil {
				t.Errorf("instance %q, pool %v, handshake %v, ENIs %v; want i-1 and the rest reset", cn.Spec.InstanceID, cn.Spec.IPAM.Pool,
					cn.Status.IPAM.ReleaseIPs, cn.Status.ENI.ENIs)
			}
			if len(d.mem.missing) != 0 || len(d.mem.missingENIs) != 0 {
				t.Errorf("missing addresses %v, ENIs %v; want none remembered", d.mem.missing, d.mem.missingENIs)
			}
			if len(d.notes.events) != 1 || d.notes.events[0].reason != ReasonInstanceReplaced {
				t.Errorf("events %+v, want one %s", d.notes.events, ReasonInstanceReplaced)
			}
			if !d.writeCN || !d.writeStatus || !d.writeSpec {
				t.Errorf("CiliumNode written %v (status %v, spec %v), want the reset written", d.writeCN, d.writeStatus, d.writeSpec)
			}
			if d.acts.produce() || d.pool != nil || d.needsSet || d.capacity.observed || d.requeue != actedRequeue {
				t.Errorf("actions %+v, pool %v, needs set %v, capacity %+v, requeue %v; want nothing but the reset, looked at again at once",
					d.acts, d.pool, d.needsSet, d.capacity, d.requeue)
			}
		},
	}, {
		name: "a read that failed decides the failure alone: the operator-status and what the read knows of the instance written, nothing else",
		setup: func(f *facts) {
			// The claims could not be read, after the snapshot: the
			// empty node would otherwise get a new ENI.
			f.failed, f.failedReason = errors.New("listing the node's static IP claims, etcdserver: request timed out"), ReasonClaimsUnreadable
			f.policyConflict = "ENIPolicy a governs this node; b also match and are ignored"
		},
		check: func(t *testing.T, f *facts, d decision) {
			if d.opErr != f.failed || d.cn.Status.IPAM.OperatorStatus.Error != f.failed.Error() {
				t.Errorf("operator error %v, operator-status %q; want the read's failure", d.opErr, d.cn.Status.IPAM.OperatorStatus.Error)
			}
			if d.cn.Spec.ENI.InstanceType != "t.small" || d.cn.Spec.ENI.AvailabilityZone != "us-east-1a" ||
				!slices.Equal(specENIIDs(d.routing), []string{"eni-0"}) || len(d.cn.Status.ENI.ENIs) != 0 {
				t.Errorf("spec.eni %+v, spec.enis %v, status.eni.enis %v; want the instance's type and zone, eni-0 listed in spec.enis alone",
					d.cn.Spec.ENI, specENIIDs(d.routing), copyIDs(d))
			}
			if !d.writeCN || !d.writeStatus || !d.writeSpec {
				t.Errorf("CiliumNode written %v (status %v, spec %v), want both written", d.writeCN, d.writeStatus, d.writeSpec)
			}
			var reasons []string
			for _, e := range d.notes.events {
				reasons = append(reasons, e.reason)
			}
			if !slices.Equal(reasons, []string{ReasonClaimsUnreadable, ReasonPolicyConflict}) {
				t.Errorf("events %v, want %s then %s", reasons, ReasonClaimsUnreadable, ReasonPolicyConflict)
			}
			if d.notes.state != stateFailing || d.mem.failures != 1 || d.requeue != retryAfter(opts, 0) {
				t.Errorf("state %q, failures %d, requeue %v; want %q, 1, %v", d.notes.state, d.mem.failures, d.requeue, stateFailing, retryAfter(opts, 0))
			}
			if d.acts.produce() || d.pool != nil || d.needsSet || d.capacity.observed || d.reads.any() {
				t.Errorf("actions %+v, pool %v, needs set %v, capacity %+v, describes %+v; want nothing decided but the failure",
					d.acts, d.pool, d.needsSet, d.capacity, d.reads)
			}
		},
	}, {
		name:  "the other policies that match the node are told of",
		setup: func(f *facts) { f.policyConflict = "ENIPolicy a governs this node; b also match and are ignored" },
		check: func(t *testing.T, f *facts, d decision) {
			if len(d.notes.events) != 1 || d.notes.events[0].reason != ReasonPolicyConflict || d.notes.events[0].msg != f.policyConflict {
				t.Errorf("events %+v, want one %s", d.notes.events, ReasonPolicyConflict)
			}
		},
	}, {
		// A node in shape forgets its last allocation warning; the
		// conflict, told once, is not told again on every reconcile.
		name:  "the other policies that match the node are told of once, not again on the next reconcile",
		setup: func(f *facts) { f.policyConflict = "ENIPolicy a governs this node; b also match and are ignored" },
		check: func(t *testing.T, f *facts, d decision) {
			g := base()
			g.policyConflict, g.mem = f.policyConflict, d.mem
			g.orig = g.cn.DeepCopy()
			inputs(g)
			if e := decide(g).notes.events; len(e) != 0 {
				t.Errorf("the next reconcile told again: %+v", e)
			}
		},
	}, {
		name: "while the subnet has no free /28, the plan asks for single addresses, not prefixes",
		setup: func(f *facts) {
			f.cfg.PrefixDelegation = true
			f.mem.noPrefixesUntil = now.Add(time.Minute)
		},
		check: func(t *testing.T, f *facts, d decision) {
			if c := d.acts.plan.Create; c == nil || c.Prefixes != 0 || c.IPs != 4 {
				t.Errorf("plan %+v, want a new ENI with 4 addresses and no prefix", d.acts.plan)
			}
		},
	}, {
		name: "under the adaptive headroom, a node no pod arrived at keeps none ahead: its new ENI carries what its agent starts with",
		setup: func(f *facts) {
			f.cfg.Adaptive, f.adapts = true, true
		},
		check: func(t *testing.T, f *facts, d decision) {
			if c := d.acts.plan.Create; c == nil || c.IPs != 2 {
				t.Errorf("plan %+v, want a new ENI with 2 addresses (the agent's start)", d.acts.plan)
			}
		},
	}, {
		name: "under the adaptive headroom, a node 4 pods just arrived at keeps 4 ahead, and takes half a headroom more per call",
		setup: func(f *facts) {
			f.cfg.Adaptive, f.adapts = true, true
			f.snap.Type.IPv4PerENI = 10
			for i := range 4 {
				f.arrivals = append(f.arrivals, now.Add(time.Duration(i-4)*100*time.Millisecond))
			}
		},
		check: func(t *testing.T, f *facts, d decision) {
			if c := d.acts.plan.Create; c == nil || c.IPs != 6 {
				t.Errorf("plan %+v (create %+v), want a new ENI with 6 addresses", d.acts.plan, d.acts.plan.Create)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := base()
			if tc.setup != nil {
				tc.setup(f)
			}
			if f.orig == nil {
				// As read: what the setup made of the node.
				f.orig = f.cn.DeepCopy()
			}
			inputs(f)
			claims, orig := maps.Clone(f.static.claims), f.orig.DeepCopy()
			d := decide(f)
			tc.check(t, f, d)
			// The read's CiliumNode, NodeRouting, snapshot and memory are
			// decide's own: it edits them in place, with no copy.
			if d.cn != f.cn || (f.routing != nil && d.routing != f.routing) {
				t.Errorf("the decision's CiliumNode or NodeRouting is a copy of the facts'")
			}
			if reflect.ValueOf(d.mem.missing).UnsafePointer() != reflect.ValueOf(f.mem.missing).UnsafePointer() ||
				reflect.ValueOf(d.mem.repairs).UnsafePointer() != reflect.ValueOf(f.mem.repairs).UnsafePointer() {
				t.Errorf("the decision's memory holds copies of the facts' maps")
			}
			if len(d.snap.ENIs) == 0 || &d.snap.ENIs[0] != &f.snap.ENIs[0] {
				t.Errorf("the decision's snapshot holds a copy of the facts' ENIs")
			}
			// The rest of the facts it leaves as they were.
			if !maps.Equal(claims, f.static.claims) {
				t.Errorf("the facts' claims were edited")
			}
			if !sameJSON(orig, f.orig) {
				t.Errorf("the CiliumNode as read (the write's base) was edited")
			}
		})
	}
}

// TestSettleActs: what the executor's calls came to is settled on the
// node's memory and requeue alone (settleActs), with no call: a first
// failure is looked at again at once, the next ones back off; actions
// that went through forget the failures and are looked at again at
// once to write what they produced, at most maxQuickRuns times in a row
// without a write.
func TestSettleActs(t *testing.T) {
	opts := Options{BlockedRetry: time.Hour, RetryBase: time.Second, RetryMax: time.Minute}
	failed := errors.New("AssignPrivateIpAddresses: throttled")
	produced := actions{window6Assign: "eni-0"}
	cases := []struct {
		name string
		mem  memory
		acts actions
		out  actOutcome
		// want: the memory's failures, actFailures and quickRuns after,
		// its actErr kept, and the requeue.
		failures, actFailures, quickRuns int
		actErr                           bool
		requeue                          time.Duration
		// turnedAway: the node's plan waits for a slot.
		turnedAway bool
	}{
		{name: "a first failure is looked at again at once", acts: produced,
			out:      actOutcome{decided: true, err: failed, reason: ReasonEC2Error},
			failures: 1, actFailures: 1, actErr: true, requeue: actedRequeue},
		{name: "a second failure backs off", mem: memory{failures: 1, actFailures: 1}, acts: produced,
			out:      actOutcome{decided: true, err: failed, reason: ReasonEC2Error},
			failures: 2, actFailures: 2, actErr: true, requeue: retryAfter(opts, 1)},
		{name: "actions that went through forget the failures", mem: memory{failures: 2, actFailures: 2, actErr: failed}, acts: produced,
			out: actOutcome{decided: true}, quickRuns: 1, requeue: actedRequeue},
		{name: "a fourth run in a row without a write waits a second", mem: memory{quickRuns: maxQuickRuns}, acts: produced,
			out: actOutcome{decided: true}, quickRuns: maxQuickRuns + 1, requeue: time.Second},
		{name: "a write starts the quick runs again", mem: memory{quickRuns: maxQuickRuns}, acts: produced,
			out: actOutcome{decided: true, wrote: true}, quickRuns: 1, requeue: actedRequeue},
		{name: "no actions decided: nothing to look at again", mem: memory{quickRuns: 2},
			out: actOutcome{}},
		{name: "a plan the executor found every slot taken for waits for one, looked at again meanwhile", mem: memory{quickRuns: 2},
			out: actOutcome{decided: true, turnedAway: true}, quickRuns: 2, requeue: slotRetry, turnedAway: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := tc.mem
			s := &deciding{r: newDecisionEnv(func() time.Time { return time.Unix(10000, 0) }, opts, slog.LevelInfo), mem: &mem,
				cn: &ciliumv2.CiliumNode{}, acts: tc.acts}
			s.settleActs(tc.out)
			if mem.failures != tc.failures || mem.actFailures != tc.actFailures || mem.quickRuns != tc.quickRuns || (mem.actErr != nil) != tc.actErr {
				t.Errorf("memory: failures %d, act failures %d, quick runs %d, act error %v; want %d, %d, %d, kept %v",
					mem.failures, mem.actFailures, mem.quickRuns, mem.actErr, tc.failures, tc.actFailures, tc.quickRuns, tc.actErr)
			}
			if s.requeue != tc.requeue || s.turnedAway != tc.turnedAway {
				t.Errorf("requeue %v, turned away %v; want %v, %v", s.requeue, s.turnedAway, tc.requeue, tc.turnedAway)
			}
			if tc.actErr && (s.opErr != failed || s.r.notes.state != stateFailing) {
				t.Errorf("operator error %v, state %q; want the failure, %q", s.opErr, s.r.notes.state, stateFailing)
			}
		})
	}
}

// TestSettleShared: what the coordinators shared between nodes answered
// the decision's changes is settled on the node alone (settleShared),
// with no call: a held ENI no empty node will wake, an Elastic IP lost
// to another node (its association dropped) and a slot freed since the
// decision each have the node looked at again at once; answers that
// change nothing leave the decision as it was. The CiliumNode's write,
// which waited for the association (writeWaits: nothing but what fill
// derives from EC2 changed), is made when the association was the only
// action and is dropped; not when another action still runs.
func TestSettleShared(t *testing.T) {
	pick := &staticIPCall{reserve: true}
	for _, tc := range []struct {
		name    string
		out     sharedOutcome
		plan    bool
		requeue time.Duration
		kept    bool
		write   bool
	}{
		{name: "nothing changed", requeue: time.Hour, kept: true},
		{name: "a held ENI no empty node will wake", out: sharedOutcome{holdMissed: true}, requeue: actedRequeue, kept: true},
		{name: "the Elastic IP reserved by another node since", out: sharedOutcome{reserveLost: true}, requeue: actedRequeue, write: true},
		{name: "the Elastic IP reserved by another node since, beside a plan", out: sharedOutcome{reserveLost: true}, plan: true, requeue: actedRequeue},
		{name: "a slot freed since the decision", out: sharedOutcome{slotFreed: true}, requeue: actedRequeue, kept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cn := &ciliumv2.CiliumNode{}
			cn.Name = "n1"
			s := &deciding{requeue: time.Hour, acts: actions{associate: pick}, cn: cn, orig: cn.DeepCopy()}
			if tc.plan {
				s.acts.plan.Assign = []pool.Assign{{ENIID: "eni-1", IPs: 1}}
			}
			s.settleShared(tc.out)
			if s.requeue != tc.requeue || (s.acts.associate != nil) != tc.kept {
				t.Errorf("requeue %v, association kept %v; want %v, %v", s.requeue, s.acts.associate != nil, tc.requeue, tc.kept)
			}
			if s.writeCN != tc.write {
				t.Errorf("CiliumNode written %v, want %v", s.writeCN, tc.write)
			}
		})
	}
}

// specENIIDs are the IDs of the ENIs nr's spec.enis lists.
func specENIIDs(nr *enipamv1alpha1.NodeRouting) []string {
	var ids []string
	for _, e := range nr.Spec.ENIs {
		ids = append(ids, e.ID)
	}
	return ids
}

// specENIAddresses is how many addresses nr's spec.enis lists on the ENI
// id (-1: it is not listed).
func specENIAddresses(nr *enipamv1alpha1.NodeRouting, id string) int {
	for _, e := range nr.Spec.ENIs {
		if e.ID == id {
			return len(e.Addresses)
		}
	}
	return -1
}
