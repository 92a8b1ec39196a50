package agentsim

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestAnswerHandshakeFollowsCiliumsAgent: the agent's side of the release
// handshake, state by state, against a pool of .1 (free) and .2 (in use).
func TestAnswerHandshakeFollowsCiliumsAgent(t *testing.T) {
	pool := ipamtypes.AllocationMap{"10.0.0.1": {}, "10.0.0.2": {}}
	inUse := func(ip string) bool { return ip == "10.0.0.2" }
	for _, tc := range []struct {
		name        string
		release     map[string]ipamtypes.IPReleaseStatus
		pool        ipamtypes.AllocationMap
		want        map[string]ipamtypes.IPReleaseStatus
		wantChanged bool
	}{
		{"marked free IP is ready", map[string]ipamtypes.IPReleaseStatus{"10.0.0.1": MarkedForRelease}, pool,
			map[string]ipamtypes.IPReleaseStatus{"10.0.0.1": ReadyForRelease}, true},
		{"marked used IP is kept", map[string]ipamtypes.IPReleaseStatus{"10.0.0.2": MarkedForRelease}, pool,
			map[string]ipamtypes.IPReleaseStatus{"10.0.0.2": DoNotRelease}, true},
		{"marked IP not in the pool is kept", map[string]ipamtypes.IPReleaseStatus{"10.0.0.9": MarkedForRelease}, pool,
			map[string]ipamtypes.IPReleaseStatus{"10.0.0.9": DoNotRelease}, true},
		{"released IP gone from the pool is forgotten", map[string]ipamtypes.IPReleaseStatus{"10.0.0.9": Released}, pool,
			map[string]ipamtypes.IPReleaseStatus{}, true},
		{"released IP still in the pool waits", map[string]ipamtypes.IPReleaseStatus{"10.0.0.1": Released}, pool,
			map[string]ipamtypes.IPReleaseStatus{"10.0.0.1": Released}, false},
		{"own answers stand", map[string]ipamtypes.IPReleaseStatus{"10.0.0.1": ReadyForRelease, "10.0.0.2": DoNotRelease, "10.0.0.9": ReadyForRelease}, pool,
			map[string]ipamtypes.IPReleaseStatus{"10.0.0.1": ReadyForRelease, "10.0.0.2": DoNotRelease, "10.0.0.9": ReadyForRelease}, false},
		{"no pool, no answer", map[string]ipamtypes.IPReleaseStatus{"10.0.0.1": MarkedForRelease}, nil,
			map[string]ipamtypes.IPReleaseStatus{"10.0.0.1": MarkedForRelease}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := maps.Clone(tc.release)
			changed := answerHandshake(got, tc.pool, inUse)
			if changed != tc.wantChanged || !maps.Equal(got, tc.want) {
				t.Errorf("got %v (changed %v), want %v (changed %v)", got, changed, tc.want, tc.wantChanged)
			}
		})
	}
}

// TestChurnScheduleIsRepeatableForASeed: the same seed over the same
// number of Ready nodes draws the same gaps, nodes and lifetimes; another
// seed does not. Gaps average 1/(rate × nodes).
func TestChurnScheduleIsRepeatableForASeed(t *testing.T) {
	draw := func(seed uint64) []time.Duration {
		p := newPlanner(ChurnConfig{Seed: seed, ArrivalRate: 2, MeanLifetime: time.Minute})
		var out []time.Duration
		for range 2000 {
			node, lifetime := p.pick(50)
			out = append(out, p.gap(50), time.Duration(node), lifetime)
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !slices.Equal(a, b) {
		t.Error("seed 7 drew two different schedules")
	}
	if slices.Equal(a, c) {
		t.Error("seeds 7 and 8 drew the same schedule")
	}
	var sum time.Duration
	for i := 0; i < len(a); i += 3 {
		sum += a[i]
	}
	mean := sum / time.Duration(len(a)/3)
	if want := 10 * time.Millisecond; mean < want*8/10 || mean > want*12/10 {
		t.Errorf("mean gap %v over 50 nodes at 2/s each, want about %v", mean, want)
	}
}

// TestStatusWriteConflictIsRetriedOnAFreshRead: the agent last saw an older
// CiliumNode than the server holds (the operator has since marked an IP).
// Its write meets a conflict; it reads the object afresh, answers the
// marking and writes again: one conflict, one write, and the server holds
// the agent's used IPs and its answer.
func TestStatusWriteConflictIsRetriedOnAFreshRead(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := ciliumv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const marked = "10.0.0.4"
	current := &ciliumv2.CiliumNode{
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec: ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{Pool: ipamtypes.AllocationMap{
			"10.0.0.1": {}, "10.0.0.2": {}, "10.0.0.3": {}, marked: {},
		}}},
		Status: ciliumv2.NodeStatus{IPAM: ipamtypes.IPAMStatus{ReleaseIPs: map[string]ipamtypes.IPReleaseStatus{marked: MarkedForRelease}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(current).WithStatusSubresource(current).Build()
	ctx := context.Background()
	stale := &ciliumv2.CiliumNode{}
	if err := c.Get(ctx, client.ObjectKey{Name: "n"}, stale); err != nil {
		t.Fatal(err)
	}
	stale.ResourceVersion = strconv.FormatUint(parseRV(stale.ResourceVersion)-1, 10)
	stale.Status.IPAM.ReleaseIPs = nil

	ledger := NewLedger()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := newAgent("n", agentDeps{ledger: ledger, log: log, interval: time.Hour,
		enqueue: func(string, time.Duration) {}, onReady: func(*Agent) {}})
	a.observe(stale)
	if !a.Ready() {
		t.Fatal("agent did not start on a pool of 4")
	}
	counters := &writeCounters{}
	w := &statusWriter{c: c, agent: func(string) *Agent { return a }, counters: counters, log: log}
	w.write(ctx, "n")

	if got := [3]int64{counters.writes.Load(), counters.conflicts.Load(), counters.failed.Load()}; got != [3]int64{1, 1, 0} {
		t.Fatalf("writes, conflicts, failures = %v, want [1 1 0]", got)
	}
	got := &ciliumv2.CiliumNode{}
	if err := c.Get(ctx, client.ObjectKey{Name: "n"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.IPAM.Used) != 2 {
		t.Errorf("used %v, want router and health", got.Status.IPAM.Used)
	}
	want := ReadyForRelease
	if _, held := got.Status.IPAM.Used[marked]; held {
		want = DoNotRelease
	}
	if s := got.Status.IPAM.ReleaseIPs[marked]; s != want {
		t.Errorf("release-ips[%s] = %q, want %q", marked, s, want)
	}
}
