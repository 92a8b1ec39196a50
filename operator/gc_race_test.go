package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"

	"github.com/enipam/enipam/operator/cloud"
	opec2 "github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/operator/gc"
	"github.com/enipam/enipam/operator/poolcontroller"
	"github.com/enipam/enipam/test/ec2sim"
)

// TestENIBeingAttachedIsNotCollected: an m5.large under first interface
// index 1, so its pool needs a new ENI. EC2 hides a new ENI from describes
// for 3 s and answers NotFound to the calls that change it for 6 s, and
// answers the first four attaches with InternalError (the client does not
// retry in place here): the attach is retried by later reconciles, seconds
// apart as the node backs off. The collector runs every 100 ms with its
// default minimum age (1 m), so it sees the unattached ENI on many passes
// meanwhile (the campaign that found the race: every 10 s, and the ENI
// deleted 13 s after its creation). It must never try to delete it (the
// ENI is young by its tag, and its attach is being retried); the node gets
// that one ENI: one Create, no IdempotentParameterMismatch, nothing left
// unattached, the pool filled.
func TestENIBeingAttachedIsNotCollected(t *testing.T) {
	r := newRig(t, vpcScenario)
	timing := r.sim.State().Timing()
	timing.EventualConsistency = ec2sim.Duration(3 * time.Second)
	timing.MutationConsistency = ec2sim.Duration(6 * time.Second)
	if err := r.sim.State().SetTiming(timing); err != nil {
		t.Fatal(err)
	}
	if err := r.sim.SetFaults(ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{
		{Action: "AttachNetworkInterface", Code: "InternalError", Count: 4},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Create(r.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	opts := r.options()
	opts.GCInterval = 100 * time.Millisecond
	// The operator's consistency grace (the resync interval, at most 2 m)
	// must outlast EC2's NotFound window, as it does by default (1 m).
	opts.ResyncInterval = 30 * time.Second
	opts.EC2MaxAttempts = 1
	r.startOperator(opts)
	r.addNode("node-race", "i-0a000000000000001", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{})

	// Until the pool is filled, or the stall shows: a create refused for
	// its reused token.
	mismatch := func() int64 {
		return r.sim.Counters().ErrorCount("CreateNetworkInterface", "IdempotentParameterMismatch")
	}
	filled := false
	_ = wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		cn := r.node("node-race")
		filled = freeIPs(cn) >= 8 && cn.Status.IPAM.OperatorStatus.Error == ""
		return filled || mismatch() > 0, nil
	})

	c := r.sim.Counters()
	if n := c.Calls["DeleteNetworkInterface"]; n != 0 {
		t.Errorf("DeleteNetworkInterface called %d times (%v), want 0: the collector took the ENI being attached for a leak", n, c.Errors["DeleteNetworkInterface"])
	}
	if n := mismatch(); n != 0 {
		t.Errorf("CreateNetworkInterface answered IdempotentParameterMismatch %d times, want 0: a replacement create reused a client token", n)
	}
	if n := c.Succeeded("CreateNetworkInterface"); n != 1 {
		t.Errorf("%d ENIs created, want 1", n)
	}
	if n := c.ErrorCount("AttachNetworkInterface", "InternalError"); n != 4 {
		t.Errorf("%d attaches answered InternalError, want 4: the test exercised no retried attach", n)
	}
	attached, orphans := r.enisOf("i-0a000000000000001")
	if len(attached) != 2 || len(orphans) != 0 {
		t.Errorf("%d ENIs attached, %d unattached; want the primary and the new one, no orphan", len(attached), len(orphans))
	}
	if !filled {
		cn := r.node("node-race")
		t.Errorf("node left short: %d free addresses, want 8; operator-status %q", freeIPs(cn), cn.Status.IPAM.OperatorStatus.Error)
	}
}

// TestAttachGivenUpAfterRefusals: the interrupt world's m5.large, with
// ec2sim behind the real SDK; EC2 refuses the first five attaches
// (UnauthorizedOperation, which nothing retries in place). The collector
// passes after every reconcile and takes any unattached ENI of the
// cluster for a leak on first sight by its tag (MinAge 1 ns): only the
// in-flight mark keeps the new ENI. Through four refusals it stays,
// unattached and uncollected; at the fifth the pool controller gives it
// up and deletes it itself; the next reconcile creates another (a token
// of its own: no IdempotentParameterMismatch), which attaches. The
// collector deleted nothing; a leak made by hand it deletes on its next
// pass, so it was able to.
func TestAttachGivenUpAfterRefusals(t *testing.T) {
	w := newInterruptWorld(t)
	sc, err := ec2sim.ParseScenario([]byte(interruptScenario))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := ec2sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = sim.Close() })
	ep, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.state = sim.State()
	ec2Opts := opec2.DefaultOptions()
	ec2Opts.Endpoint = ep.EC2
	w.api, err = opec2.New(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(ec2sim.DefaultAccessKeyID, ec2sim.DefaultSecretAccessKey, "")},
		ec2Opts, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetFaults(ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{
		{Action: "AttachNetworkInterface", Code: "UnauthorizedOperation", Count: 5},
	}}); err != nil {
		t.Fatal(err)
	}
	api, inv, m, log := startProcess(ctx, t, nil, w.api)
	l := &life{r: poolcontroller.New(w.c, api, inv, events.NewFakeRecorder(100), m, interruptOptions(), log), cancel: cancel}
	collector, err := gc.New(api, inv, nil, gc.Options{Cluster: "test", MaxPerPass: 25, MinAge: time.Nanosecond}, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	pass := func() {
		t.Helper()
		if n, err := collector.Pass(ctx); n != 0 || err != nil {
			t.Fatalf("collector pass deleted %d (%v), want 0", n, err)
		}
	}
	unattached := func() []string {
		var ids []string
		for _, e := range w.state.Dump().NetworkInterfaces {
			if e.Status == "available" {
				ids = append(ids, e.NetworkInterfaceID)
			}
		}
		return ids
	}

	var first string
	for refusal := 1; refusal <= 4; refusal++ {
		_ = w.reconcile(l)
		pass()
		ids := unattached()
		if len(ids) != 1 || (first != "" && ids[0] != first) {
			t.Fatalf("after refusal %d: unattached ENIs %v, want the one created first (%q)", refusal, ids, first)
		}
		first = ids[0]
	}
	_ = w.reconcile(l)
	pass()
	c := sim.Counters()
	if ids := unattached(); len(ids) != 0 || c.Succeeded("DeleteNetworkInterface") != 1 {
		t.Fatalf("after the fifth refusal: unattached ENIs %v, %d deletes; want the ENI given up and deleted once",
			ids, c.Succeeded("DeleteNetworkInterface"))
	}
	// The new ENI's addresses are pooled once the inventory shows its
	// attachment complete, which it learns by a describe of the ENIs
	// attaching once a second (attachPoll): the reconciles are spaced so
	// that one comes after it. Back to back, 20 of them could all come
	// before it (when the operator writes little for each).
	for range 20 {
		_ = w.reconcile(l)
		pass()
		if free(w.node()) >= 4 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cn := w.node()
	if free(cn) < 4 {
		t.Fatalf("pool never filled after the ENI was given up: %d free, operator-status %q", free(cn), cn.Status.IPAM.OperatorStatus.Error)
	}
	w.check(cn, 2)
	c = sim.Counters()
	if c.Succeeded("CreateNetworkInterface") != 2 || c.ErrorCount("CreateNetworkInterface", "IdempotentParameterMismatch") != 0 ||
		c.Calls["DeleteNetworkInterface"] != 1 || c.ErrorCount("AttachNetworkInterface", "UnauthorizedOperation") != 5 {
		t.Errorf("calls: %d creates (want 2), %d IdempotentParameterMismatch (want 0), %d deletes (want 1, the give-up), %d attaches refused (want 5)",
			c.Succeeded("CreateNetworkInterface"), c.ErrorCount("CreateNetworkInterface", "IdempotentParameterMismatch"),
			c.Calls["DeleteNetworkInterface"], c.ErrorCount("AttachNetworkInterface", "UnauthorizedOperation"))
	}

	leak, err := api.CreateENI(ctx, cloud.CreateENIRequest{SubnetID: "subnet-0a000000000000002", Tags: map[string]string{
		cloud.TagCluster: "test", cloud.TagManagedBy: cloud.ManagedBy, cloud.TagCreatedAt: "2026-01-01T00:00:00Z",
	}})
	if err != nil {
		t.Fatal(err)
	}
	inv.RecordCreated(leak)
	if n, err := collector.Pass(ctx); n != 1 || err != nil {
		t.Errorf("a leak made by hand: the collector deleted %d (%v), want 1", n, err)
	}
}
