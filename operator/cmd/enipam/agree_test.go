package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/operator/catalog"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/poolcontroller"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// capacityNode is one instance of the agreement test: a catalog type,
// booted bare or with AWS's recommended EFA layout (an EFA-only interface
// at card 0 device 1, one at device 0 of every other card).
type capacityNode struct {
	name, instanceID string
	typ              catalog.InstanceType
	efa              bool
}

// limitShape is what decides the pool a node of a type reaches, and the
// pool enipam max-pods states: card 0's interfaces and their addresses and
// whether EC2 delegates prefixes; for a node booted with its EFA
// interfaces, also its cards and EFA limit (where those interfaces go).
// Two types of one shape reach the same pools.
type limitShape struct {
	maxENIs, ipv4PerENI, cards, maxEFA int
	prefixes, efa                      bool
}

// shapeOf is the shape of a node of the type, booted bare or with its EFA
// interfaces.
func shapeOf(it catalog.InstanceType, efa bool) limitShape {
	l := it.Limits()
	s := limitShape{maxENIs: it.MaxENIs, ipv4PerENI: it.IPv4PerENI, prefixes: l.PrefixDelegation(), efa: efa}
	if efa {
		s.cards, s.maxEFA = it.Cards(), it.MaxEFA
	}
	return s
}

// allConfigs adds the other three combinations of first interface index
// and prefix delegation to TestMaxPodsAgreesWithTheOperator. With prefixes
// the largest types' pools run to thousands of addresses a node, which
// takes the operator's controller tens of CPU minutes to grow through
// one reconcile at a time: make bench runs them, make test does not.
var allConfigs = flag.Bool("maxpods.all-configs", false, "also check first interface index 1 with prefixes, 0 with prefixes and 1 without")

// TestMaxPodsAgreesWithTheOperator: for a type of every shape of limits
// in the catalog (limitShape: the catalog's 1 300 and more types have
// fewer than a hundred), under first interface index 0 without prefix
// delegation and 1 with it (every combination with
// -maxpods.all-configs), and for each EFA type also booted with its EFA
// interfaces where card 0 has room for them (--reserved-enis 1), the pool
// the operator's controller reaches on ec2sim, asked for far more
// addresses than fit (min-allocate 100000), is exactly the pool `enipam
// max-pods` states for every type of the shape, and the node then reports
// it cannot grow.
//
// It runs the operator's own inventory, planner and executor
// (poolcontroller) on ec2sim's state through the in-memory cloud
// (cloudfake), with an in-memory apiserver and the node agents' routed
// reports played each round: the pool a node reaches is decided by those
// and by EC2's limits, all of which are the operator's code and ec2sim's
// model. The one part of the wire path left out, reading the limits from
// DescribeInstanceTypes, is held equal to the in-memory cloud's for every
// type by operator/ec2's TestInstanceTypesReadCardZero. Prefix pools
// reach 11760 addresses on a node; through a real apiserver that would be
// half a gigabyte of CiliumNode writes per run, so the real-apiserver
// e2e tests check a multi-card node the same way instead.
func TestMaxPodsAgreesWithTheOperator(t *testing.T) {
	var nodes []capacityNode
	// members lists every type of a shape: enipam max-pods must state
	// for each the pool its shape's node reached.
	members := map[limitShape][]string{}
	add := func(it catalog.InstanceType, efa bool) {
		shape := shapeOf(it, efa)
		if members[shape] = append(members[shape], it.Name); len(members[shape]) == 1 {
			nodes = append(nodes, capacityNode{typ: it, efa: efa})
		}
	}
	for _, it := range catalog.All() {
		add(it, false)
		// The EFA layout puts an EFA-only interface at card 0 device 1:
		// a type with one interface a card (hpc6id.32xlarge) has no room.
		if it.MaxEFA > 0 && it.MaxENIs > 1 {
			add(it, true)
		}
	}
	for i := range nodes {
		nodes[i].instanceID = fmt.Sprintf("i-0c%015x", i+1)
		nodes[i].name = fmt.Sprintf("node-%d-%s", i+1, nodes[i].typ.Name)
	}
	type config struct {
		fi int
		pd bool
	}
	configs := []config{{0, false}}
	if *allConfigs {
		configs = append(configs, config{1, true}, config{0, true}, config{1, false})
	}
	for _, cfg := range configs {
		fi, pd := cfg.fi, cfg.pd
		t.Run(fmt.Sprintf("first-interface-index=%d,prefix-delegation=%v", fi, pd), func(t *testing.T) {
			t.Parallel()
			reached := map[string]int{}
			for _, group := range shards(nodes, pd) {
				maps.Copy(reached, reachCapacity(t, group, fi, pd))
			}
			checked := 0
			for _, n := range nodes {
				for _, name := range members[shapeOf(n.typ, n.efa)] {
					checked++
					checkMaxPods(t, n, name, reached[n.name], fi, pd)
				}
			}
			t.Logf("%d nodes at capacity, each pool as enipam max-pods states for the types of its shape (%d, EFA boots included)", len(nodes), checked)
		})
	}
}

// worldAddresses is what one world's pod subnets hold, with a margin for
// addresses broken up by ENIs' primary addresses.
const worldAddresses = 5*65531 - 20000

// shards splits the nodes into worlds whose subnets hold every node's
// largest pool at once (the most a type's slots could take).
func shards(nodes []capacityNode, pd bool) [][]capacityNode {
	var out [][]capacityNode
	var cur []capacityNode
	used := 0
	for _, n := range nodes {
		need := n.typ.MaxENIs * n.typ.IPv4PerENI
		if pd {
			need *= pool.IPsPerPrefix
		}
		if used+need > worldAddresses && len(cur) > 0 {
			out, cur, used = append(out, cur), nil, 0
		}
		cur, used = append(cur, n), used+need
	}
	return append(out, cur)
}

// capacityScenario holds every node in one zone of a VPC with five /16
// pod subnets.
func capacityScenario(nodes []capacityNode) *ec2sim.Scenario {
	vpc := ec2sim.VPCSpec{ID: "vpc-0c000000000000001"}
	for i := range 5 {
		cidr := fmt.Sprintf("10.%d.0.0/16", i)
		vpc.CIDRs = append(vpc.CIDRs, cidr)
		vpc.Subnets = append(vpc.Subnets, ec2sim.SubnetSpec{
			ID: fmt.Sprintf("subnet-0c00000000000000%d", i+1), CIDR: cidr, Zone: "us-east-1a", Tags: map[string]string{"pods": "true"},
		})
	}
	sc := &ec2sim.Scenario{Account: "123456789012", Region: "us-east-1", Zones: []string{"us-east-1a"}, VPCs: []ec2sim.VPCSpec{vpc}}
	for i, n := range nodes {
		in := ec2sim.InstanceSpec{ID: n.instanceID, Name: n.name, Type: n.typ.Name, Subnet: vpc.Subnets[i%len(vpc.Subnets)].ID}
		if n.efa {
			in.ENIs = append(in.ENIs, ec2sim.ENISpec{NetworkCard: 0, DeviceIndex: 1, InterfaceType: "efa-only"})
			for card := 1; card < min(n.typ.Cards(), n.typ.MaxEFA); card++ {
				in.ENIs = append(in.ENIs, ec2sim.ENISpec{NetworkCard: card, DeviceIndex: 0, InterfaceType: "efa-only"})
			}
		}
		sc.Instances = append(sc.Instances, in)
	}
	return sc
}

// reachCapacity lets the operator's controller grow every node until it
// reports it cannot grow any more, and returns each pool's size.
func reachCapacity(t *testing.T, nodes []capacityNode, fi int, pd bool) map[string]int {
	t.Helper()
	st, err := ec2sim.NewState(capacityScenario(nodes), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	api := cloudfake.New(st)
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{&enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Spec: enipamv1alpha1.ENIPolicySpec{
		FirstInterfaceIndex: ptr(int32(fi)), PrefixDelegation: &pd, SubnetTags: map[string]string{"pods": "true"},
	}}}
	for _, n := range nodes {
		objs = append(objs,
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, UID: k8stypes.UID("uid-node-" + n.instanceID)},
				Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + n.instanceID}},
			&ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: n.name, UID: k8stypes.UID("uid-cn-" + n.instanceID)},
				Spec: ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{MinAllocate: 100000}}})
	}
	// The fake client's own tracker, which applies server-side applies as
	// the apiserver does (field managers; an apply creates an object not
	// found). The operator writes a NodeRouting by apply alone, from its
	// creation on: the plain tracker takes an apply as a strategic merge
	// patch of an object that must exist, so it answers the creating
	// apply with NotFound and no node ever has a NodeRouting.
	b := fake.NewClientBuilder().WithScheme(scheme)
	// The operator's cache indexes (claims by node, pools by address),
	// which the pool controller lists through.
	for _, idx := range claims.Indexes() {
		b = b.WithIndex(idx.Object, idx.Field, idx.Extract)
	}
	c := b.WithStatusSubresource(&ciliumv2.CiliumNode{}, &enipamv1alpha1.NodeRouting{}, &enipamv1alpha1.ENIPolicy{}, &enipamv1alpha1.StaticIPClaim{}).
		WithObjects(objs...).Build()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv := inventory.New(api, inventory.Options{
		VPCIDs: []string{"vpc-0c000000000000001"}, ResyncInterval: time.Hour, ConsistencyGrace: time.Second, NotFoundRetry: time.Second,
	}, log)
	go func() { _ = inv.Start(ctx) }()
	select {
	case <-inv.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("inventory never synced")
	}
	m, err := poolcontroller.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := poolcontroller.New(c, api, inv, events.NewFakeRecorder(1000), m, poolcontroller.Options{
		Cluster: "test", Workers: 1, Defaults: policy.Defaults{Knobs: pool.Knobs{AgentEndpoints: 2}},
		ConsistencyGrace: time.Second, RoutingPatience: time.Hour,
		RetryBase: time.Millisecond, RetryMax: time.Millisecond, BlockedRetry: time.Hour,
	}, log)

	reached := map[string]int{}
	var mu sync.Mutex
	todo := slices.Clone(nodes)
	// The loop ends when every node is at capacity, or fails once no
	// node's pool, awaiting count or ENIs changed over stallRounds rounds
	// (a count, not a clock: the machine may be slow, not the operator).
	const stallRounds = 240
	progress, stalled, rounds := "", 0, 0
	defer func() { t.Logf("%d nodes, %d rounds", len(nodes), rounds) }()
	for len(todo) > 0 {
		rounds++
		if now := worldState(t, c, st, todo); now != progress {
			progress, stalled = now, 0
		} else {
			stalled++
		}
		if stalled > stallRounds {
			for _, n := range todo {
				cn, nr := getNode(t, c, n.name)
				t.Errorf("%s never reached capacity: pool %d, capacity %+v, operator-status %q", n.name, len(cn.Spec.IPAM.Pool), nr.Spec.Capacity, cn.Status.IPAM.OperatorStatus.Error)
			}
			t.FailNow()
		}
		attached := map[string]bool{}
		for _, e := range st.Dump().NetworkInterfaces {
			if e.Attachment != nil && e.Attachment.Status == "attached" {
				attached[e.NetworkInterfaceID] = true
			}
		}
		var wg sync.WaitGroup
		for _, n := range todo {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if size, done := step(t, c, r, n.name, attached); done {
					mu.Lock()
					reached[n.name] = size
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// The nodes left keep their order: worldState of the same world
		// is then the same string, whichever step finished first.
		todo = slices.DeleteFunc(todo, func(n capacityNode) bool { _, done := reached[n.name]; return done })
		time.Sleep(500 * time.Millisecond)
	}
	return reached
}

// worldState sums up what the nodes left have: each one's pool size,
// capacity report and the ENIs and attachments EC2 shows, so a round that
// changes none of it is a round without progress.
func worldState(t *testing.T, c client.Client, st *ec2sim.State, nodes []capacityNode) string {
	t.Helper()
	var b strings.Builder
	for _, n := range nodes {
		cn, nr := getNode(t, c, n.name)
		fmt.Fprintf(&b, "%s %d %d %+v;", n.name, len(cn.Spec.IPAM.Pool), len(cn.Status.ENI.ENIs), nr.Spec.Capacity)
	}
	for _, e := range st.Dump().NetworkInterfaces {
		fmt.Fprintf(&b, "%s %d", e.NetworkInterfaceID, len(e.PrivateIPAddresses))
		if e.Attachment != nil {
			b.WriteString(e.Attachment.Status)
		}
	}
	return b.String()
}

// step reconciles one node, plays its enipam-agent's routed report (what
// status.eni.enis lists on attached ENIs, as the real agent reports it),
// and says whether the node is at capacity: nothing awaits routing, the
// pool is what the operator counts, and it says the node cannot grow.
func step(t *testing.T, c client.Client, r *poolcontroller.Reconciler, name string, attached map[string]bool) (int, bool) {
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
		t.Logf("%s: reconcile: %v", name, err)
	}
	cn, nr := getNode(t, c, name)
	if nr.Name == "" {
		return 0, false
	}
	if routed := agentsim.Routed(cn, &nr.Spec, func(id string) bool { return attached[id] }); !equality.Semantic.DeepEqual(routed, nr.Status.ENIs) {
		nr.Status.ENIs = routed
		// An update of the status, not the agent's apply: the fake
		// client applies a status apply as the stored object with the
		// new status, so the reporter would own the whole spec beside
		// the operator, and a spec field the operator stops applying
		// (awaiting, at 0) would stay. The apiserver's status
		// subresource gives an apply the status alone (e2e
		// TestNodeRoutingFieldsHaveOneWriterEach).
		if err := c.Status().Update(ctx, nr); err != nil {
			t.Logf("%s: routed report: %v", name, err)
		}
	}
	capa := nr.Spec.Capacity
	done := capa != nil && !capa.CanGrow && capa.Awaiting == 0 && int(capa.PoolIPs) == len(cn.Spec.IPAM.Pool)
	if done && !strings.HasPrefix(capa.Reason, "instance at capacity") {
		// Stopped by something else than the instance's limits (a full
		// subnet): the world is too small for the test to say anything.
		t.Errorf("%s stopped at %d addresses: %s", name, len(cn.Spec.IPAM.Pool), capa.Reason)
	}
	return len(cn.Spec.IPAM.Pool), done
}

func getNode(t *testing.T, c client.Client, name string) (*ciliumv2.CiliumNode, *enipamv1alpha1.NodeRouting) {
	t.Helper()
	cn := &ciliumv2.CiliumNode{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, cn); err != nil {
		t.Fatal(err)
	}
	nr := &enipamv1alpha1.NodeRouting{}
	_ = c.Get(context.Background(), client.ObjectKey{Name: name}, nr)
	return cn, nr
}

func ptr[T any](v T) *T { return &v }

// checkMaxPods: enipam max-pods states for the named type, booted as node
// n is (bare or with its EFA interfaces), the pool n reached.
func checkMaxPods(t *testing.T, n capacityNode, name string, reached, fi int, pd bool) {
	t.Helper()
	args := []string{"max-pods", "--instance-type", name, "--first-interface-index", strconv.Itoa(fi),
		"--output", "json", "--prefix-delegation=" + strconv.FormatBool(pd)}
	if n.efa {
		args = append(args, "--reserved-enis", "1")
	}
	code, out, errOut := runCLI(t, args...)
	if code != 0 {
		// Only a policy that leaves no ENI may refuse: the operator must
		// then have reached nothing either.
		if reached != 0 {
			t.Errorf("%s: enipam max-pods %v refused (%s) but %s reached %d", name, args[1:], errOut, n.name, reached)
		}
		return
	}
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s: %v: %s", name, err, out)
	}
	if r.PoolIPs != reached {
		t.Errorf("%s: enipam max-pods says a pool of %d, the operator reached %d on %s", name, r.PoolIPs, reached, n.name)
	}
	if want := max(r.PoolIPs-2, 0) + 2; r.MaxAllowed != want {
		t.Errorf("%s: max allowed %d, want %d", name, r.MaxAllowed, want)
	}
}
