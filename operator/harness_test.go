package operator_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/ciliumnode"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/ec2sim"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

// rig is one test's world: an ec2sim over HTTP, the shared apiserver, and
// the operators the test starts. Everything a test creates in the
// apiserver is deleted when it ends, after its operators stopped.
type rig struct {
	t     *testing.T
	ctx   context.Context
	sim   *ec2sim.Sim
	ec2   string
	admin *ec2sim.AdminClient
	c     client.Client
	// agents play enipam-agent on every node: they report routed what the
	// real agent would route.
	agents *routingAgents
}

// newRig starts ec2sim on a free port from a scenario in YAML.
func newRig(t *testing.T, scenarioYAML string) *rig {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(scenarioYAML))
	if err != nil {
		t.Fatalf("scenario: %v", err)
	}
	// The operator (ClusterName "test" in options) signs with the default
	// credentials and ec2sim holds it to the repository's IAM policy for
	// its cluster.
	sc.ClusterName = "test"
	sim, err := ec2sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ep, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ctx: ctx, sim: sim, ec2: ep.EC2, admin: ec2sim.NewAdminClient(ep.Admin, nil), c: env.Client}
	t.Cleanup(func() {
		r.cleanupAPI()
		cancel()
		_ = sim.Close()
	})
	r.agents = r.startRoutingAgents()
	return r
}

// options are the operator options of tests: fast resync and retries, no
// leader election, no listeners.
func (r *rig) options() operator.Options {
	o := operator.DefaultOptions()
	o.ClusterName = "test"
	o.VPCIDs = []string{"vpc-0a000000000000001"}
	o.EC2Endpoint = r.ec2
	o.ResyncInterval = 5 * time.Second
	o.GCInterval = time.Hour
	o.MetricsAddress, o.HealthAddress = "0", "0"
	o.LeaderElect = false
	o.ReleaseExcessIPs = false
	o.Workers = 16
	o.RoutingPatience = 2 * time.Second
	return o
}

// startOperator runs an operator until the returned stop is called (or
// the test ends) and returns it with its metrics registry.
func (r *rig) startOperator(opts operator.Options) (*operator.Operator, *prometheus.Registry, func()) {
	r.t.Helper()
	awsCfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(ec2sim.DefaultAccessKeyID, ec2sim.DefaultSecretAccessKey, ""),
	}
	reg := prometheus.NewRegistry()
	var out io.Writer = io.Discard
	if testing.Verbose() {
		out = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})).With("operator", fmt.Sprintf("%p", reg))
	op, err := operator.New(opts, env.Config, awsCfg, reg, log)
	if err != nil {
		r.t.Fatalf("operator.New: %v", err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				r.t.Errorf("operator stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			r.t.Error("operator did not stop within 30s")
		}
	}
	r.t.Cleanup(stop)
	return op, reg, stop
}

// addNode creates a Node with an aws:/// providerID and its CiliumNode the
// way cilium-agent does (no instance ID: the operator finds it).
func (r *rig) addNode(name, instanceID, zone string, labels map[string]string, ipam ipamtypes.IPAMSpec) {
	r.t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", zone, instanceID)},
	}
	if err := r.c.Create(r.ctx, node); err != nil {
		r.t.Fatalf("creating Node %s: %v", name, err)
	}
	cn := &ciliumv2.CiliumNode{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID,
		}}},
		Spec: ciliumv2.NodeSpec{IPAM: ipam},
	}
	if err := r.c.Create(r.ctx, cn); err != nil {
		r.t.Fatalf("creating CiliumNode %s: %v", name, err)
	}
}

// node reads a CiliumNode.
func (r *rig) node(name string) *ciliumv2.CiliumNode {
	r.t.Helper()
	cn := &ciliumv2.CiliumNode{}
	if err := r.c.Get(r.ctx, client.ObjectKey{Name: name}, cn); err != nil {
		r.t.Fatalf("reading CiliumNode %s: %v", name, err)
	}
	return cn
}

// routing reads a NodeRouting.
func (r *rig) routing(name string) *enipamv1alpha1.NodeRouting {
	r.t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := r.c.Get(r.ctx, client.ObjectKey{Name: name}, nr); err != nil {
		r.t.Fatalf("reading NodeRouting %s: %v", name, err)
	}
	return nr
}

// waitNode polls a CiliumNode until cond holds, failing with what it
// last saw.
func (r *rig) waitNode(name string, timeout time.Duration, what string, cond func(*ciliumv2.CiliumNode) bool) *ciliumv2.CiliumNode {
	r.t.Helper()
	var last *ciliumv2.CiliumNode
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		cn := &ciliumv2.CiliumNode{}
		if err := r.c.Get(ctx, client.ObjectKey{Name: name}, cn); err != nil {
			return false, nil
		}
		last = cn
		return cond(cn), nil
	})
	if err != nil {
		r.t.Fatalf("%s: %s never happened (%v); last seen: pool %d, used %d, operator-status %q, enis %d",
			name, what, err, len(last.Spec.IPAM.Pool), len(last.Status.IPAM.Used), last.Status.IPAM.OperatorStatus.Error, len(last.Status.ENI.ENIs))
	}
	return last
}

// told is what cn's agent is told to route, as the agent reads it
// (ciliumnode.ENIs): the ENIs of the node's NodeRouting's spec.enis, and
// those only a copy in cn's status.eni.enis lists (nil: no NodeRouting
// to read yet).
func (r *rig) told(cn *ciliumv2.CiliumNode) map[string]awstypes.ENI {
	r.t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := r.c.Get(r.ctx, client.ObjectKey{Name: cn.Name}, nr); err != nil {
		return nil
	}
	enis, problems := ciliumnode.ENIs(cn, &nr.Spec)
	if len(problems) > 0 {
		r.t.Errorf("%s: spec.enis does not parse: %v", cn.Name, problems)
	}
	return enis
}

// waitTold waits until the node's NodeRouting lists its ENIs in
// spec.enis and returns its CiliumNode and what its agent is told to
// route (told).
func (r *rig) waitTold(name string) (*ciliumv2.CiliumNode, map[string]awstypes.ENI) {
	r.t.Helper()
	var enis map[string]awstypes.ENI
	cn := r.waitNode(name, 30*time.Second, "the NodeRouting's spec.enis", func(cn *ciliumv2.CiliumNode) bool {
		enis = r.told(cn)
		return len(enis) > 0
	})
	return cn, enis
}

// freeIPs counts pool IPs not used and not in the release handshake.
func freeIPs(cn *ciliumv2.CiliumNode) int {
	n := 0
	for ip := range cn.Spec.IPAM.Pool {
		if _, used := cn.Status.IPAM.Used[ip]; used {
			continue
		}
		if _, leaving := cn.Status.IPAM.ReleaseIPs[ip]; leaving {
			continue
		}
		n++
	}
	return n
}

// use marks the first n free pool IPs used, as the agent would.
func (r *rig) use(name string, n int) {
	r.t.Helper()
	r.agentUpdate(name, func(cn *ciliumv2.CiliumNode) {
		if cn.Status.IPAM.Used == nil {
			cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		}
		left := n
		for ip, e := range cn.Spec.IPAM.Pool {
			if left == 0 {
				break
			}
			if _, used := cn.Status.IPAM.Used[ip]; used {
				continue
			}
			cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: "default/pod-" + strings.ReplaceAll(ip, ".", "-"), Resource: e.Resource}
			left--
		}
	})
}

// waitCapacity waits until the NodeRouting of node name has a
// spec.capacity for which cond holds.
func (r *rig) waitCapacity(name, what string, cond func(*enipamv1alpha1.NodeCapacity) bool) {
	r.t.Helper()
	var last *enipamv1alpha1.NodeCapacity
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		nr := &enipamv1alpha1.NodeRouting{}
		if r.c.Get(ctx, client.ObjectKey{Name: name}, nr) != nil || nr.Spec.Capacity == nil {
			return false, nil
		}
		last = nr.Spec.Capacity
		return cond(last), nil
	})
	if err != nil {
		r.t.Fatalf("NodeRouting %s: %s: capacity %+v", name, what, last)
	}
}

// events returns the reasons of the events about an object.
func (r *rig) events(name string) []eventsv1.Event {
	r.t.Helper()
	var list eventsv1.EventList
	if err := r.c.List(r.ctx, &list); err != nil {
		r.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an event with reason about name.
func (r *rig) waitEvent(name, reason string) eventsv1.Event {
	r.t.Helper()
	var found eventsv1.Event
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		for _, e := range r.events(name) {
			if e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		r.t.Fatalf("no %s event on %s: %v", reason, name, err)
	}
	return found
}

// cleanupAPI deletes what tests create; Nodes own their CiliumNodes, but
// no garbage collector runs here, so both go.
func (r *rig) cleanupAPI() {
	ctx := context.Background()
	_ = r.c.DeleteAllOf(ctx, &ciliumv2.CiliumNode{})
	_ = r.c.DeleteAllOf(ctx, &corev1.Node{})
	_ = r.c.DeleteAllOf(ctx, &enipamv1alpha1.ENIPolicy{})
	_ = r.c.DeleteAllOf(ctx, &enipamv1alpha1.NodeRouting{})
	_ = r.c.DeleteAllOf(ctx, &eventsv1.Event{}, client.InNamespace("default"))
}

// calls returns ec2sim's successful calls of an action.
func (r *rig) calls(action string) int64 {
	return r.sim.Counters().Succeeded(action)
}

// mutatingCalls sums the successful calls of every mutating action.
func (r *rig) mutatingCalls() int64 {
	c := r.sim.Counters()
	var n int64
	for action := range c.Calls {
		if !strings.HasPrefix(action, "Describe") {
			n += c.Succeeded(action)
		}
	}
	return n
}

// dump returns ec2sim's whole state.
func (r *rig) dump() ec2sim.Dump { return r.sim.State().Dump() }

// enisOf returns the ENIs of the dump attached to an instance, and the
// unattached ones carrying the test cluster's tag.
func (r *rig) enisOf(instanceID string) (attached []ec2sim.NetworkInterface, orphans []ec2sim.NetworkInterface) {
	for _, e := range r.dump().NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.InstanceID == instanceID {
			attached = append(attached, e)
		}
		if e.Status == "available" {
			for _, tag := range e.Tags {
				if tag.Key == "enipam.io/cluster" && tag.Value == "test" {
					orphans = append(orphans, e)
				}
			}
		}
	}
	return attached, orphans
}
