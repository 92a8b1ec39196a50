package agent_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// fakeMetadata is an instance's metadata whose local-ipv4s the test
// changes, as EC2 does when a remap lands.
type fakeMetadata struct {
	mu    sync.Mutex
	ips   map[string][]string // MAC → local-ipv4s
	reads int
}

func (m *fakeMetadata) LocalIPv4s(_ context.Context, mac string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	return slices.Clone(m.ips[strings.ToLower(mac)]), nil
}

func (m *fakeMetadata) set(mac string, ips ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ips[mac] = ips
}

// askRemaps writes spec.remapQueries as the operator does and returns
// the generation it made.
func askRemaps(t *testing.T, node string, qs ...enipamv1alpha1.RemapQuery) int64 {
	t.Helper()
	return patchSpec(t, node, func(spec *enipamv1alpha1.NodeRoutingSpec) { spec.RemapQueries = qs })
}

// patchSpec changes the NodeRouting's spec with edit, under an optimistic
// lock as the operator writes, and returns the generation it made. The
// agent writes the status meanwhile: on a conflict it edits a fresh read,
// as the operator's next pass would.
func patchSpec(t *testing.T, node string, edit func(*enipamv1alpha1.NodeRoutingSpec)) int64 {
	t.Helper()
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nr := nodeRouting(t, node)
		orig := nr.DeepCopy()
		edit(&nr.Spec)
		if err := env.Client.Patch(context.Background(), nr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		gen = nr.Generation
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// TestAgentConfirmsRemapsFromInstanceMetadata: the operator asks the
// agent of a node (resync an hour away) about an address reassigned onto
// its eni-a. While the instance metadata does not list it on eni-a's MAC
// the agent answers Missing for the spec's generation and reads the
// metadata again every RemapPoll; once EC2's remap lands (the metadata
// lists it) the agent answers Landed without any other event. Asking
// nothing removes the report.
func TestAgentConfirmsRemapsFromInstanceMetadata(t *testing.T) {
	const mac = "02:00:00:00:09:01"
	cn := createCiliumNode(t,
		[]awstypes.ENI{awsENI("eni-primary", 0, "02:00:00:00:09:00", "10.0.1.0/24"), awsENI("eni-a", 1, mac, "10.0.2.0/24")},
		map[string]string{"10.0.2.10": "eni-a"})
	md := &fakeMetadata{ips: map[string][]string{mac: {"10.0.2.5", "10.0.2.10"}}}
	cfg := testConfig(cn.Name)
	cfg.ResyncInterval = time.Hour
	cfg.RemapPoll = 50 * time.Millisecond
	cfg.Metadata = md
	a, _ := startAgent(t, cfg, env.Config, fakeHostWith("02:00:00:00:09:00", mac))
	eventually(t, "agent ready", func() bool { return a.Ready() == nil })
	if r := nodeRouting(t, cn.Name).Status.Remaps; r != nil {
		t.Fatalf("remaps reported without a query: %+v", r)
	}

	gen := askRemaps(t, cn.Name, enipamv1alpha1.RemapQuery{Address: "10.0.2.20", ENI: "eni-a", MAC: strings.ToUpper(mac)})
	eventually(t, "an answer for the asked generation", func() bool {
		r := nodeRouting(t, cn.Name).Status.Remaps
		return r != nil && r.ObservedGeneration == gen
	})
	if r := nodeRouting(t, cn.Name).Status.Remaps; !r.RemapMissing("10.0.2.20", gen) || r.RemapLanded("10.0.2.20", gen) {
		t.Fatalf("report before the remap landed = %+v; want 10.0.2.20 missing", r)
	}
	md.mu.Lock()
	reads := md.reads
	md.mu.Unlock()
	eventually(t, "the metadata read again while the address is missing", func() bool {
		md.mu.Lock()
		defer md.mu.Unlock()
		return md.reads >= reads+3
	})

	md.set(mac, "10.0.2.5", "10.0.2.10", "10.0.2.20")
	eventually(t, "10.0.2.20 landed", func() bool {
		return nodeRouting(t, cn.Name).Status.Remaps.RemapLanded("10.0.2.20", gen)
	})
	if r := nodeRouting(t, cn.Name).Status.Remaps; r.RemapLanded("10.0.2.20", gen+1) || len(r.Missing) != 0 {
		t.Errorf("report %+v answers a later generation or still misses an address", r)
	}

	askRemaps(t, cn.Name)
	eventually(t, "report removed once nothing is asked", func() bool {
		return nodeRouting(t, cn.Name).Status.Remaps == nil
	})
}
