package operator_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// TestRestartBetweenCreateAndAttach: m5.large under first interface
// index 1; every Attach fails, so the first operator creates an ENI and
// dies before attaching it. A fresh operator (empty memory) attaches that
// ENI instead of creating another: one Create in all, no ENI left
// unattached, the pool full.
func TestRestartBetweenCreateAndAttach(t *testing.T) {
	r := newRig(t, vpcScenario)
	if err := r.c.Create(r.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	if err := r.sim.SetFaults(ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{
		{Action: "AttachNetworkInterface", Code: "UnauthorizedOperation", Count: 1000},
	}}); err != nil {
		t.Fatal(err)
	}
	_, _, stop := r.startOperator(r.options())
	r.addNode("node-crash", "i-0a000000000000001", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{})
	r.waitNode("node-crash", 20*time.Second, "attach failure reported", func(cn *ciliumv2.CiliumNode) bool {
		return strings.Contains(cn.Status.IPAM.OperatorStatus.Error, "UnauthorizedOperation")
	})
	stop()
	if _, orphans := r.enisOf("i-0a000000000000001"); len(orphans) != 1 {
		t.Fatalf("%d unattached ENIs after the crash, want the 1 orphan", len(orphans))
	}
	if err := r.sim.SetFaults(ec2sim.FaultConfig{}); err != nil {
		t.Fatal(err)
	}

	r.startOperator(r.options())
	cn := r.waitNode("node-crash", 20*time.Second, "pool filled after restart", func(cn *ciliumv2.CiliumNode) bool {
		return freeIPs(cn) >= 8 && cn.Status.IPAM.OperatorStatus.Error == ""
	})
	if got := r.calls("CreateNetworkInterface"); got != 1 {
		t.Errorf("CreateNetworkInterface calls = %d, want 1 (no duplicate ENI)", got)
	}
	attached, orphans := r.enisOf("i-0a000000000000001")
	if len(attached) != 2 || len(orphans) != 0 {
		t.Errorf("%d ENIs attached and %d unattached; want primary + the adopted one, no orphan", len(attached), len(orphans))
	}
	// The device numbers are read from the NodeRouting's spec.enis.
	pool := cn.Spec.IPAM.Pool
	_, told := r.waitTold("node-crash")
	for ip, e := range pool {
		if told[e.Resource].Number != 1 {
			t.Errorf("pool IP %s on %s, not on the adopted ENI", ip, e.Resource)
		}
	}
}

// TestLeakedENIsCollected: unattached ENIs carrying this cluster's tags
// (their instance gone) but no creation tag are deleted once seen on two
// passes, the first at least the minimum age (1 s here) before; an
// untagged one and another cluster's are left alone.
func TestLeakedENIsCollected(t *testing.T) {
	r := newRig(t, vpcScenario)
	sdk := ec2.New(ec2.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(r.ec2),
		Credentials: credentials.NewStaticCredentialsProvider(ec2sim.DefaultAccessKeyID, ec2sim.DefaultSecretAccessKey, ""),
	})
	create := func(tags map[string]string) string {
		in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0a000000000000002"), SecondaryPrivateIpAddressCount: aws.Int32(3)}
		if tags != nil {
			spec := ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeNetworkInterface}
			for k, v := range tags {
				spec.Tags = append(spec.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
			}
			in.TagSpecifications = []ec2types.TagSpecification{spec}
		}
		out, err := sdk.CreateNetworkInterface(r.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return *out.NetworkInterface.NetworkInterfaceId
	}
	leaked := create(map[string]string{"enipam.io/cluster": "test", "enipam.io/managed-by": "enipam", "enipam.io/instance": "i-0dead0000000000001"})
	foreign := create(map[string]string{"enipam.io/cluster": "other", "enipam.io/managed-by": "enipam"})
	untagged := create(nil)
	r.sim.ResetCounters()

	opts := r.options()
	opts.GCInterval = 200 * time.Millisecond
	opts.GCMinAge = time.Second
	r.startOperator(opts)
	deadline := time.Now().Add(20 * time.Second)
	for r.calls("DeleteNetworkInterface") == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a few more passes
	if got := r.calls("DeleteNetworkInterface"); got != 1 {
		t.Fatalf("DeleteNetworkInterface calls = %d, want 1", got)
	}
	left := map[string]bool{}
	for _, e := range r.dump().NetworkInterfaces {
		left[e.NetworkInterfaceID] = true
	}
	if left[leaked] || !left[foreign] || !left[untagged] {
		t.Errorf("after collection: leaked present %v, foreign present %v, untagged present %v; want false, true, true", left[leaked], left[foreign], left[untagged])
	}
}

// TestSubnetRunsOut: the policy's tagged subnets in us-east-1a are a /20
// and a /28. The /20 is drained by others after the operator's sync, so
// the first Create there fails with InsufficientFreeAddressesInSubnet and
// the ENI lands in the /28. Once that is drained too, the next node gets a
// SubnetExhausted event and operator-status naming the subnets, and its
// whole need counts as short (enipam_node_ips{state="short"}): its
// instance has room, only the subnets lack addresses.
func TestSubnetRunsOut(t *testing.T) {
	r := newRig(t, strings.Replace(vpcScenario, "cidr: 10.0.16.0/20", "cidr: 10.0.16.0/26", 1))
	if err := r.c.Create(r.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	op, reg, _ := r.startOperator(r.options())
	waitSynced(t, op.Inventory.Synced())
	drain(t, r, "subnet-0a000000000000002")

	r.addNode("node-1", "i-0a000000000000001", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-1", 20*time.Second, "pool filled", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	_, told := r.waitTold("node-1")
	if len(told) != 2 {
		t.Errorf("%d ENIs listed, want the primary and the new one", len(told))
	}
	for _, e := range told {
		if e.Number == 1 && e.Subnet.ID != "subnet-0a000000000000003" {
			t.Errorf("new ENI in %s, want the /28 subnet-0a000000000000003", e.Subnet.ID)
		}
	}
	if n := r.sim.Counters().ErrorCount("CreateNetworkInterface", "InsufficientFreeAddressesInSubnet"); n != 1 {
		t.Errorf("Create failed %d times on the drained subnet, want 1", n)
	}

	drain(t, r, "subnet-0a000000000000003")
	r.addNode("node-2", "i-0a000000000000002", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-2", 30*time.Second, "exhaustion reported", func(cn *ciliumv2.CiliumNode) bool {
		return strings.Contains(cn.Status.IPAM.OperatorStatus.Error, "subnets exhausted") || strings.Contains(cn.Status.IPAM.OperatorStatus.Error, "InsufficientFreeAddressesInSubnet")
	})
	ev := r.waitEvent("node-2", "SubnetExhausted")
	if !strings.Contains(ev.Note, "subnet-") {
		t.Errorf("event note %q does not name the subnet", ev.Note)
	}
	if needed, short := nodeIPs(t, reg, "node-2", "needed"), nodeIPs(t, reg, "node-2", "short"); needed < 4 || short != needed {
		t.Errorf("node blocked by its subnets: needed %v, short %v; want at least 4, all of it short", needed, short)
	}
}

// drain launches instances into a subnet until it has no free address.
func drain(t *testing.T, r *rig, subnet string) {
	t.Helper()
	for i := 0; ; i++ {
		_, err := r.admin.AddInstance(r.ctx, ec2sim.LaunchRequest{InstanceType: "t3.micro", SubnetID: subnet})
		if err != nil {
			if i == 0 {
				t.Fatalf("draining %s: %v", subnet, err)
			}
			return
		}
	}
}

func waitSynced(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("inventory never synced")
	}
}

// TestThrottledEC2Converges: ec2sim's Assign and describe buckets are tiny
// (2 tokens, 1/s) while the operator's own are EC2's defaults, so EC2
// throttles; six nodes still all fill, with throttling retried, never left
// in the nodes' status.
func TestThrottledEC2Converges(t *testing.T) {
	r := newRig(t, vpcScenario+`
- {name: extra, count: 3, type: m5.large, subnet: nodes-a}
`)
	small := ec2sim.BucketConfig{Size: 2, RefillPerSecond: 1}
	if err := r.sim.SetThrottling(ec2sim.ThrottleConfig{Enabled: true, Buckets: map[string]ec2sim.BucketConfig{
		"AssignPrivateIpAddresses": small, "DescribeInstances": small, "DescribeNetworkInterfaces": small,
	}}); err != nil {
		t.Fatal(err)
	}
	r.startOperator(r.options())
	var names []string
	for _, in := range r.dump().Instances {
		name := "node-" + in.InstanceID
		names = append(names, name)
		r.addNode(name, in.InstanceID, "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	}
	for _, name := range names {
		r.waitNode(name, 60*time.Second, "pool filled without error", func(cn *ciliumv2.CiliumNode) bool {
			return freeIPs(cn) >= 4 && cn.Status.IPAM.OperatorStatus.Error == ""
		})
	}
	c := r.sim.Counters()
	var throttled int64
	for _, n := range c.Throttled {
		throttled += n
	}
	if throttled == 0 {
		t.Errorf("EC2 never throttled; the test exercised nothing: %v", c.Calls)
	}
	if got := c.Succeeded("AssignPrivateIpAddresses"); got != int64(len(names)) {
		t.Errorf("%d successful Assigns for %d nodes", got, len(names))
	}
}

// TestOnlyLeaderCallsEC2: two replicas with leader election, each behind
// its own counting proxy to the same ec2sim → only one of them ever calls
// EC2; when it stops, the other takes over and serves a new node.
func TestOnlyLeaderCallsEC2(t *testing.T) {
	r := newRig(t, vpcScenario)
	type replica struct {
		calls *atomic.Int64
		stop  func()
	}
	leaseName := fmt.Sprintf("enipam-test-%d", time.Now().UnixNano())
	start := func() replica {
		target, _ := url.Parse(r.ec2)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var calls atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			calls.Add(1)
			proxy.ServeHTTP(w, req)
		}))
		t.Cleanup(srv.Close)
		opts := r.options()
		opts.EC2Endpoint = srv.URL
		opts.LeaderElect, opts.LeaderNamespace, opts.LeaderElectionID = true, "default", leaseName
		_, _, stop := r.startOperator(opts)
		return replica{calls: &calls, stop: stop}
	}
	a, b := start(), start()
	r.addNode("node-l1", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-l1", 30*time.Second, "pool filled", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	leader, standby := a, b
	if b.calls.Load() > 0 {
		leader, standby = b, a
	}
	if leader.calls.Load() == 0 || standby.calls.Load() != 0 {
		t.Fatalf("EC2 calls: %d and %d; want exactly one replica calling", a.calls.Load(), b.calls.Load())
	}
	leader.stop()
	r.addNode("node-l2", "i-0a000000000000002", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-l2", 60*time.Second, "pool filled by the new leader", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	if standby.calls.Load() == 0 {
		t.Error("the standby never called EC2 after taking over")
	}
}

// TestMalformedENIPolicyRejected: the apiserver refuses bad policies with
// a message naming the problem.
func TestMalformedENIPolicyRejected(t *testing.T) {
	r := newRig(t, vpcScenario)
	for _, tc := range []struct {
		name string
		spec enipamv1alpha1.ENIPolicySpec
		want string
	}{
		{"negative pre-allocate", enipamv1alpha1.ENIPolicySpec{PreAllocate: i32(-1)}, "spec.preAllocate"},
		{"min above max", enipamv1alpha1.ENIPolicySpec{MinAllocate: i32(20), MaxAllocate: i32(10)}, "minAllocate must not exceed maxAllocate"},
		{"bad subnet id", enipamv1alpha1.ENIPolicySpec{SubnetIDs: []enipamv1alpha1.SubnetID{"sub-123"}}, "spec.subnetIDs[0]"},
		{"bad security group id", enipamv1alpha1.ENIPolicySpec{SecurityGroupIDs: []enipamv1alpha1.SecurityGroupID{"group-1"}}, "spec.securityGroupIDs[0]"},
		{"reserved tag", enipamv1alpha1.ENIPolicySpec{Tags: map[string]string{"enipam.io/cluster": "x"}}, "reserved"},
		{"first index out of range", enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: i32(16)}, "spec.firstInterfaceIndex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: tc.spec}
			err := r.c.Create(r.ctx, p)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestUnknownInstanceDoesNotBlockOthers: a node whose providerID names an
// instance EC2 does not know, and one with no instance at all, get an
// InstanceNotFound event and operator-status; a healthy node beside them
// fills as usual.
func TestUnknownInstanceDoesNotBlockOthers(t *testing.T) {
	r := newRig(t, vpcScenario)
	r.startOperator(r.options())
	r.addNode("node-ghost", "i-0ffffffffffffffff", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "node-bare"}}
	if err := r.c.Create(r.ctx, cn); err != nil {
		t.Fatal(err)
	}
	r.addNode("node-ok", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	r.waitNode("node-ok", 20*time.Second, "pool filled", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 8 })
	for _, name := range []string{"node-ghost", "node-bare"} {
		r.waitNode(name, 20*time.Second, "operator-status set", func(cn *ciliumv2.CiliumNode) bool {
			return strings.Contains(cn.Status.IPAM.OperatorStatus.Error, "not found")
		})
		r.waitEvent(name, "InstanceNotFound")
	}
}
