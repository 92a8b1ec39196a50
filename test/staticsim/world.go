package staticsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/operator/claimcontroller"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/poolcontroller"
	"github.com/enipam/enipam/scheduler/extender"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// scenario: four m5.large (3 ENIs × 10 addresses) in one zone, nodes on
// one subnet and pods on a tagged one, so every static address can move
// between every pair of nodes.
const scenario = `
account: "123456789012"
region: us-east-1
zones: [us-east-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, name: nodes-a, cidr: 10.0.0.0/24, zone: us-east-1a}
  - {id: subnet-0a000000000000002, name: pods-a, cidr: 10.0.16.0/24, zone: us-east-1a, tags: {pods: "true"}}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0a000000000000002, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0a000000000000003, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0a000000000000004, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
`

const (
	cluster   = "test"
	namespace = "default"
	zone      = "us-east-1a"
	podSubnet = "10.0.16.0/24"
)

// Log, when set, receives the operator's debug log (for one seed).
var Log io.Writer

// epoch is where every run's clock starts.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// node is one Kubernetes node of the world with its instance.
type node struct {
	name, instance string
	cordoned       bool
	// gone: its instance terminated and its objects deleted.
	gone bool
}

// world is one seed's universe: EC2, the apiserver (a fake client with
// the real schemes and the claims' indexes), the operator process, and
// the node-side actors.
type world struct {
	seed  uint64
	rng   *rand.Rand
	clock *ec2sim.ManualClock
	state *ec2sim.State
	cloud *cloudfake.Cloud
	// c is the apiserver as the agents, kubelets and the scheduler reach
	// it; the operator writes through op.c, which a crash can cut.
	c     client.WithWatch
	store store
	log   *slog.Logger
	nodes []*node
	// agents are Cilium's agents, by node name.
	agents map[string]*agent
	// pods are the pods the kubelets run, by UID.
	pods map[string]*pod
	op   *process
	ext  *extender.Extender
	// restarts counts operator processes started after the first,
	// crashes those that died at a write; binds, starts and moves count
	// Bindings, CNI ADDs and stamps seen moving to another node;
	// landings the remaps an enipam-agent reported landed from its
	// instance's metadata.
	restarts, crashes, binds, starts, moves, landings int
	// stampedOn: where each owner's stamp was last seen.
	stampedOn map[string]string
	// changes counts the writes to the apiserver and the kubelets'
	// changes; checked is what changes, EC2's calls and the clock were
	// at the last check (a world that did not change needs none).
	changes int
	checked [3]int64
	// watched: the last trace of Config.Watch's entries.
	watched string
	// owned: the address each claim has (see own).
	owned map[string]string
	// trace is what happened, one line per step, for a failing seed.
	trace []string
	// violations are the broken invariants, first first.
	violations []string
	// kinds: the step kinds in order, for the interleaving count.
	kinds []byte
	// dumped is the last EC2 dump, current at dumpedAt, taken after
	// dumpedCalls calls.
	dumped      *ec2sim.Dump
	dumpedAt    time.Time
	dumpedCalls int
	// ec2Changes counts the world's own changes to EC2 (an instance
	// terminated), dumpedChanges what it was at the last dump.
	ec2Changes, dumpedChanges int
	// index is where EC2 has each address in the dump indexed.
	index   addressIndex
	indexed *ec2sim.Dump
	// elsewhere: the Elastic IPs associated before the cluster's time;
	// the user's own is the node's once its NodeRouting recorded it
	// (userEIPTaken); claimEIP is the first replica's public-ip
	// annotation.
	elsewhere
	claimEIP     string
	userEIPTaken bool
	// eipAssociations and eipDisassociations count the operator's
	// AssociateAddress and DisassociateAddress calls that went through,
	// eipKills its deaths at a node Elastic IP write, retags the tags
	// events.
	eipAssociations, eipDisassociations, eipKills, retags int
}

// process is one run of enipam-operator: everything it keeps in memory
// (inventory, the controllers' marks) dies with it; the notes it left
// in the claims' status stay, written in its term.
type process struct {
	inv    *inventory.Inventory
	pools  *poolcontroller.Reconciler
	claims *claimcontroller.Reconciler
	c      client.WithWatch
	// crashAt > 0: the process dies at its crashAt-th write (to the
	// apiserver or EC2) from now on; landed says whether that write
	// lands. dead: every later call fails.
	crashAt int
	writes  int
	landed  bool
	dead    bool
	// eipCrashAt > 0: the process dies at its eipCrashAt-th write of a
	// node's Elastic IP step (staticIPWrite, AssociateAddress,
	// DisassociateAddress) from now on, landing as landed says.
	eipCrashAt, eipWrites int
	eipKilled             bool
}

// errKilled is what every call of a dead process gets.
var errKilled = errors.New("operator process killed")

func newWorld(seed uint64) (*world, error) {
	sc, err := ec2sim.ParseScenario([]byte(scenario))
	if err != nil {
		return nil, err
	}
	sc.Seed = seed
	sc.ClusterName = cluster
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seedElasticIPs(sc, rng)
	clock := ec2sim.NewManualClock(epoch)
	st, err := ec2sim.NewState(sc, clock.Now)
	if err != nil {
		return nil, err
	}
	// Three seeds in four run on EC2 as it is seen to behave: attachments
	// that take seconds, reassignments that land seconds after the call,
	// released addresses that cool down, describes that lag a quarter
	// of the changes. MutationConsistency stays off: the operator waits
	// out a young ENI's NotFound with real timers.
	var instances []string
	for _, in := range sc.Instances {
		instances = append(instances, in.ID)
	}
	away, err := associateElsewhere(st, rng, instances)
	if err != nil {
		return nil, err
	}
	harsh := seed%4 != 0
	if harsh {
		t := ec2sim.RealisticTiming()
		t.MutationConsistency = 0
		if err := st.SetTiming(t); err != nil {
			return nil, err
		}
	}
	scheme, err := takeScheme()
	if err != nil {
		return nil, err
	}
	w := &world{
		seed: seed, rng: rng, clock: clock, state: st,
		cloud: cloudfake.New(st), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		elsewhere: away, agents: map[string]*agent{}, pods: map[string]*pod{}, stampedOn: map[string]string{}, owned: map[string]string{},
	}
	if Log != nil {
		w.log = slog.New(simTimeHandler{slog.NewTextHandler(Log, &slog.HandlerOptions{Level: slog.LevelDebug}), w})
	}
	objs := []client.Object{&enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Spec: enipamv1alpha1.ENIPolicySpec{
		FirstInterfaceIndex: ptrTo(int32(1)), SubnetTags: map[string]string{"pods": "true"},
	}}}
	for i, in := range sc.Instances {
		n := &node{name: fmt.Sprintf("node-%d", i+1), instance: in.ID}
		w.nodes = append(w.nodes, n)
		w.agents[n.name] = newAgent(n.name)
		// The seed draws which agents run with static-ip-tags.
		objs = append(objs, nodeObjects(n, tagSets[w.rng.IntN(len(tagSets))])...)
	}
	w.claimEIP = "allocate"
	if w.rng.IntN(2) == 0 {
		w.claimEIP = tagPool
	}

	// The plain object tracker: the field-managed one costs ten times
	// more a write. The one server-side apply here, the operator's of a
	// NodeRouting, is the writer's (writer.apply).
	indexes, err := cacheIndexes(scheme)
	if err != nil {
		return nil, err
	}
	w.store = store{tracker: clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder()), scheme: scheme,
		lists: map[schema.GroupVersionResource]runtime.Object{}, indexes: indexes}
	b := fake.NewClientBuilder().WithScheme(scheme).WithGlobalResourceVersionCounter().WithObjectTracker(w.store.tracker)
	for _, idx := range claims.Indexes() {
		b = b.WithIndex(idx.Object, idx.Field, idx.Extract)
	}
	statusObjs := []client.Object{&ciliumv2.CiliumNode{}, &enipamv1alpha1.NodeRouting{}, &enipamv1alpha1.ENIPolicy{},
		&enipamv1alpha1.StaticIPClaim{}, &corev1.Pod{}}
	fc := b.WithStatusSubresource(statusObjs...).WithObjects(objs...).Build()
	wr, err := newWriter(fc, w.store.tracker, scheme, statusObjs...)
	if err != nil {
		return nil, err
	}
	wr.generations = true
	patch := func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if handled, err := wr.apply(obj, patch); handled {
			return err
		}
		if len(opts) == 0 {
			if handled, err := wr.patch(obj, patch, false); handled {
				return err
			}
		}
		if wr.hasStatus(obj) {
			// The fake client would store it with its generation
			// unnumbered.
			w.violate("a %s patch of %T %s with options %v: the simulation cannot number its generation", patch.Type(), obj, obj.GetName(), opts)
		}
		return c.Patch(ctx, obj, patch, opts...)
	}
	update := func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		if len(opts) == 0 {
			if handled, err := wr.update(obj, false); handled {
				return err
			}
		}
		if wr.hasStatus(obj) {
			w.violate("an update of %T %s with options %v or no resourceVersion: the simulation cannot number its generation", obj, obj.GetName(), opts)
		}
		return c.Update(ctx, obj, opts...)
	}
	w.c = interceptor.NewClient(fc, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.wrote(obj)
			if wr.hasStatus(obj) {
				// As kube-apiserver does (the writer numbers the
				// later ones).
				obj.SetGeneration(1)
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.wrote(obj)
			return update(ctx, c, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			w.wrote(obj)
			return patch(ctx, c, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.wrote(obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.wrote(obj)
			if sub == "status" && len(opts) == 0 {
				if handled, err := wr.update(obj, true); handled {
					return err
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			w.wrote(obj)
			if sub == "status" && len(opts) == 0 {
				if handled, err := wr.patch(obj, p, true); handled {
					return err
				}
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	w.guardEC2()
	if w.ext, err = w.newExtender(); err != nil {
		return nil, err
	}
	if err := w.startOperator(); err != nil {
		return nil, err
	}
	return w, nil
}

// schemes keeps the schemes of finished runs for the next ones: building
// one costs more than many steps. A scheme serves one world at a time.
var schemes = make(chan *runtime.Scheme, 64)

func takeScheme() (*runtime.Scheme, error) {
	select {
	case s := <-schemes:
		return s, nil
	default:
		return operator.Scheme()
	}
}

// close gives the world's scheme back for the next run.
func (w *world) close() {
	select {
	case schemes <- w.store.scheme:
	default:
	}
}

func nodeObjects(n *node, tags map[string]string) []client.Object {
	return []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, UID: k8stypes.UID("uid-" + n.name)},
			Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", zone, n.instance)}},
		&ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: n.name, UID: k8stypes.UID("uid-cn-" + n.name)},
			Spec: ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{PreAllocate: 2, StaticIPTags: tags}}},
	}
}

func ptrTo[T any](v T) *T { return &v }

// guardEC2 hooks every EC2 call: a dead operator's calls fail, a crash
// armed on a write fires there, and an Unassign of a claimed address is
// a violation whoever asks.
func (w *world) guardEC2() {
	for _, a := range []cloudfake.Action{cloudfake.DescribeVpcs, cloudfake.DescribeSubnets, cloudfake.DescribeSecurityGroups,
		cloudfake.DescribeInstances, cloudfake.DescribeNetworkInterfaces, cloudfake.DescribeInstanceTypes, cloudfake.DescribeAddresses} {
		w.cloud.Before(a, 0, func() error {
			if w.op.dead {
				return errKilled
			}
			return nil
		})
	}
	for _, a := range []cloudfake.Action{cloudfake.CreateNetworkInterface, cloudfake.AttachNetworkInterface, cloudfake.ModifyNetworkInterfaceAttribute,
		cloudfake.DeleteNetworkInterface, cloudfake.AssignPrivateIpAddresses, cloudfake.UnassignPrivateIpAddresses,
		cloudfake.AssociateAddress, cloudfake.DisassociateAddress, cloudfake.AllocateAddress, cloudfake.ReleaseAddress} {
		eip := a == cloudfake.AssociateAddress || a == cloudfake.DisassociateAddress
		w.cloud.Before(a, 0, func() error {
			if w.op.dead {
				return errKilled
			}
			if w.op.crashing(eip) && !w.op.landed {
				return errKilled
			}
			return nil
		})
		w.cloud.After(a, 0, func() error {
			if w.op.dead {
				return errKilled
			}
			return nil
		})
	}
}

// crashing counts a write (eip: a step of a node's Elastic IP) and
// reports whether it is the one the process dies at; from then on it is
// dead.
func (p *process) crashing(eip bool) bool {
	if eip && p.eipCrashAt > 0 {
		if p.eipWrites++; p.eipWrites >= p.eipCrashAt {
			p.eipCrashAt, p.crashAt, p.dead = 0, 0, true
			p.eipKilled = true
			return true
		}
	}
	if p.crashAt == 0 {
		return false
	}
	p.writes++
	if p.writes < p.crashAt {
		return false
	}
	p.crashAt, p.dead = 0, true
	return true
}

// unassignGuard is the operator's EC2 as the simulation sees it: every
// call reaches cloudfake; an Unassign of an address a claim records is
// a violation.
type unassignGuard struct {
	cloud.API
	w *world
}

func (g unassignGuard) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	claimed := g.w.claimedAddresses()
	for _, ip := range ips {
		if owner, ok := claimed[ip.String()]; ok {
			g.w.violate("claimed address %s (claim %s) unassigned from %s in EC2", ip, owner, eniID)
		}
	}
	// In a fixed order: the operator builds the list from a map, and
	// ec2sim draws a lag per address in the order given.
	ips = slices.SortedFunc(slices.Values(ips), netip.Addr.Compare)
	err := g.API.UnassignIPs(ctx, eniID, ips)
	g.w.logf("ec2: unassign %v from %s: %v", ips, eniID, err)
	return err
}

// DeleteENI: an ENI deleted with a claimed address on it unassigns it.
func (g unassignGuard) DeleteENI(ctx context.Context, eniID string) error {
	claimed := g.w.claimedAddresses()
	for _, e := range g.w.dump().NetworkInterfaces {
		if e.NetworkInterfaceID != eniID {
			continue
		}
		for _, a := range e.PrivateIPAddresses {
			if owner, ok := claimed[a.PrivateIPAddress]; ok {
				g.w.violate("ENI %s deleted with claimed address %s (claim %s) on it", eniID, a.PrivateIPAddress, owner)
			}
		}
	}
	err := g.API.DeleteENI(ctx, eniID)
	g.w.logf("ec2: delete %s: %v", eniID, err)
	return err
}

func (g unassignGuard) AssignIPs(ctx context.Context, eniID string, count int) ([]netip.Addr, error) {
	ips, err := g.API.AssignIPs(ctx, eniID, count)
	g.w.logf("ec2: assign %d to %s: %v %v", count, eniID, ips, err)
	return ips, err
}

func (g unassignGuard) AssignAddresses(ctx context.Context, eniID string, ips []netip.Addr, reassign bool) error {
	ips = slices.SortedFunc(slices.Values(ips), netip.Addr.Compare)
	err := g.API.AssignAddresses(ctx, eniID, ips, reassign)

	g.w.logf("ec2: assign %v to %s (reassign %v): %v", ips, eniID, reassign, err)
	return err
}

// startOperator starts a fresh operator process: a new inventory synced
// once, new controllers with empty memories.
func (w *world) startOperator() error {
	p := &process{}
	w.op = p
	p.c = interceptor.NewClient(w.c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return p.write(false, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return p.write(staticIPWrite(obj, nil), func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return p.write(staticIPWrite(obj, patch), func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return p.write(false, func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return p.write(false, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return p.write(false, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if p.dead {
				return errKilled
			}
			if _, meta := obj.(*metav1.PartialObjectMetadata); meta {
				return c.Get(ctx, key, obj, opts...)
			}
			if !w.store.get(key, obj) {
				return c.Get(ctx, key, obj, opts...) // NotFound, as the apiserver says it
			}
			return nil
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if p.dead {
				return errKilled
			}
			if _, meta := list.(*metav1.PartialObjectMetadataList); meta {
				return c.List(ctx, list, opts...)
			}
			return w.store.cachedList(list, opts...)
		},
	})
	api := unassignGuard{API: w.cloud, w: w}
	p.inv = inventory.New(api, inventory.Options{
		VPCIDs: []string{"vpc-0a000000000000001"}, ResyncInterval: time.Minute, ConsistencyGrace: 5 * time.Second,
		NotFoundRetry: 30 * time.Second, Now: w.clock.Now,
	}, w.log)
	if err := p.inv.SyncOnce(context.Background()); err != nil {
		return fmt.Errorf("first sync of a new operator: %w", err)
	}
	m, err := poolcontroller.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return err
	}
	// Each process is a term of its own: the notes of the dead one stay
	// in the claims' status, not to be acted on.
	term := fmt.Sprintf("process-%d", w.restarts)
	p.pools = poolcontroller.New(p.c, api, p.inv, &events.FakeRecorder{}, m, poolcontroller.Options{
		Cluster: cluster, Workers: 1,
		Defaults: policy.Defaults{Knobs: pool.Knobs{PreAllocate: 2, AgentEndpoints: 2}, ReleaseExcessIPs: true,
			ReleaseDelay: 10 * time.Second},
		ConsistencyGrace: 5 * time.Second, RoutingPatience: time.Minute,
		RetryBase: time.Second, RetryMax: 10 * time.Second, BlockedRetry: 10 * time.Second, Now: w.clock.Now,
		Term: term,
	}, w.log)
	p.claims = claimcontroller.New(p.c, api, p.inv, &events.FakeRecorder{},
		claimcontroller.Options{Cluster: cluster, PublicIPRetry: 5 * time.Second, Now: w.clock.Now, Term: term}, w.log)
	return nil
}

// write runs one apiserver write of the process, unless it is dead or
// dies here (the write lands or not, as armed).
func (p *process) write(eip bool, do func() error) error {
	if p.dead {
		return errKilled
	}
	if p.crashing(eip) {
		if p.landed {
			_ = do()
		}
		return errKilled
	}
	return do()
}

// restart kills the operator (if a crash did not already) and starts a
// new one.
func (w *world) restart() error {
	w.op.dead = true
	w.restarts++
	return w.startOperator()
}

// dump is EC2's network interfaces and Elastic IPs (what the simulation
// reads of EC2's state), taken again only when EC2 was called or changed
// by the world since the last one, or when asynchronous work in it has
// come due (taking it runs that work, as any call would).
func (w *world) dump() ec2sim.Dump {
	calls := 0
	for _, n := range w.cloud.Calls() {
		calls += n
	}
	now := w.clock.Now()
	stale := w.dumped == nil || calls != w.dumpedCalls || w.ec2Changes != w.dumpedChanges
	if !stale && !now.Equal(w.dumpedAt) {
		due, pending := w.state.NextDue()
		stale = pending && !due.After(now)
	}
	if stale {
		d := w.state.DumpNetwork()
		w.dumped, w.dumpedCalls, w.dumpedChanges = &d, calls, w.ec2Changes
	}
	w.dumpedAt = now
	return *w.dumped
}

// wrote counts a write to the apiserver, before it is made.
func (w *world) wrote(obj client.Object) {
	w.changes++
	w.store.wrote(obj)
}

func (w *world) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

func (w *world) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("t=%6.1fs ", w.clock.Now().Sub(epoch).Seconds())+fmt.Sprintf(format, args...))
}

func (w *world) nodeNamed(name string) *node {
	for _, n := range w.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}
