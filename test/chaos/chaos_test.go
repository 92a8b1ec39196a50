package chaos_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/enipam/enipam/test/chaos"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/stack"
)

var (
	nodes       = flag.Int("chaos.nodes", 30, "kill campaign: nodes")
	kills       = flag.Int("chaos.kills", 5, "kill campaign: SIGKILLs of the operator")
	seed        = flag.Uint64("chaos.seed", 1, "seed of every run")
	faultNodes  = flag.Int("chaos.fault-nodes", 10, "fault scenarios: nodes")
	outage      = flag.Duration("chaos.outage", time.Minute, "apiserver outage scenario: how long the apiserver is gone")
	ec2Faults   = flag.Float64("chaos.ec2-faults", 0.05, "share of EC2 calls answered InternalError")
	consistent  = flag.Duration("chaos.consistency", 5*time.Second, "ec2sim's eventual-consistency window")
	leaseFaults = flag.Bool("chaos.lease-faults", false, "also run the minute-long apiserver outage during a scale-up; make bench sets it")
	static      = flag.Int("chaos.static", 3, "kill campaign: pods of each of its two static-IP StatefulSets (0: none)")

	bins stack.Binaries
)

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := cluster.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "enipam-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if bins, err = stack.Build(ctx, root, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// campaign runs o and fails the test on any breach, with the report and
// where the logs are; the logs are removed when the run is clean.
func campaign(t *testing.T, o chaos.Options) {
	t.Helper()
	if _, err := cluster.BinaryDir(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "enipam-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	o.Bins, o.Dir, o.Seed = bins, dir, *seed
	o.EC2FaultRate, o.EventualConsistency = *ec2Faults, *consistent
	o.Progress = &testWriter{t: t}
	ctx := context.Background()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-30*time.Second))
		defer cancel()
	}
	rep, err := chaos.Run(ctx, o)
	if err != nil {
		t.Fatalf("%v (logs in %s)", err, dir)
	}
	var b bytes.Buffer
	rep.Print(&b)
	t.Log(b.String())
	if !rep.OK() {
		t.Errorf("%s: %d breaches, converged %v (logs in %s)", o.Name, rep.Findings.Total(), rep.Converged, dir)
		return
	}
	_ = os.RemoveAll(dir)
}

// testWriter logs each line through t.
type testWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestKillCampaign: 30 m5.xlarge nodes (half with pod IPs off the primary
// ENI) join in waves with 14 pods each, then keep 3; the operator is
// SIGKILLed 5 times at random moments, 3 while pools grow and 2 while
// they shrink, and restarted at once. EC2 answers 5% of calls with
// InternalError and hides new resources for 5 s. Two static-IP
// StatefulSets of 3 pods (one with Elastic IPs) are placed, moved as the
// kills land, and lose their last ordinal. During the run and once
// settled, nothing breaks an invariant.
func TestKillCampaign(t *testing.T) {
	o := chaos.DefaultOptions("kill-campaign", *nodes, *kills, chaos.NoFault)
	o.StaticReplicas, o.StaticMoves = *static, 2**static
	campaign(t, o)
}

// TestSpecPatchFailsAfterStatusPatch: 10 nodes grow and shrink while 30%
// of the operator's spec patches fail after its status patch went
// through; once the failures stop and the run settles, nothing breaks an
// invariant.
func TestSpecPatchFailsAfterStatusPatch(t *testing.T) {
	campaign(t, chaos.DefaultOptions("spec-patch-fails", *faultNodes, 0, chaos.SpecPatchFails))
}

// TestLeaseLostRightAfterUnassign: 10 nodes shrink; the operator (with a
// Lease) is cut off from the apiserver at the status patch that records
// its first Unassign, for 25 s, so it loses its Lease while EC2 stays
// reachable; its successor takes over. Nothing breaks an invariant.
func TestLeaseLostRightAfterUnassign(t *testing.T) {
	campaign(t, chaos.DefaultOptions("lease-lost-after-unassign", *faultNodes, 0, chaos.LeaseLostAfterUnassign))
}

// TestAPIServerGoneDuringScaleUp: a few seconds after the first of three
// waves of nodes joins, the apiserver is gone for the operator (with a
// Lease) and the agents for a minute; the scale-up resumes after. Nothing
// breaks an invariant.
func TestAPIServerGoneDuringScaleUp(t *testing.T) {
	skipLeaseFaults(t)
	o := chaos.DefaultOptions("apiserver-outage", *faultNodes, 0, chaos.APIServerOutage)
	o.Outage = *outage
	campaign(t, o)
}

// skipLeaseFaults leaves the minute-long apiserver outage to make bench
// (-chaos.lease-faults): it takes close to three minutes, and make test
// already cuts the operator off until it loses its Lease
// (TestLeaseLostRightAfterUnassign).
func skipLeaseFaults(t *testing.T) {
	if !*leaseFaults {
		t.Skip("the minute-long apiserver outage runs with -chaos.lease-faults (make bench does)")
	}
}
