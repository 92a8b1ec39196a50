package agentsim_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/agentsim"
)

// eventuallyTimeout bounds every wait for the simulator or the apiserver
// to catch up; tests assert outcomes, this only keeps a failure from hanging.
const eventuallyTimeout = 20 * time.Second

// startSim starts a Sim for the test, stopped at its end. Writes are
// rate-limited to 20 ms unless opts says otherwise.
func startSim(t *testing.T, opts agentsim.Options) *agentsim.Sim {
	t.Helper()
	if opts.UpdateInterval == 0 {
		opts.UpdateInterval = 20 * time.Millisecond
	}
	if opts.SampleInterval == 0 {
		opts.SampleInterval = -1
	}
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	sim, err := agentsim.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := sim.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-sim.Done()
	})
	return sim
}

// nodeName returns a node name unique to the test.
func nodeName(t *testing.T, suffix string) string {
	return strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + suffix
}

// ips returns n IPs of the given /24 prefix ("10.1.2."), from .10 up.
func ips(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, 10+i)
	}
	return out
}

// pool makes a pool of free IPs on one ENI.
func pool(addrs ...string) ipamtypes.AllocationMap {
	p := ipamtypes.AllocationMap{}
	for _, ip := range addrs {
		p[ip] = ipamtypes.AllocationIP{Resource: "eni-0test"}
	}
	return p
}

// createNode creates a Node and its CiliumNode with the given knobs, then
// (as the operator) gives it the pool.
func createNode(t *testing.T, name string, knobs ipamtypes.IPAMSpec, p ipamtypes.AllocationMap) {
	t.Helper()
	ctx := context.Background()
	if err := agentsim.CreateNode(ctx, env.Client, agentsim.NodeSpec{Name: name, InstanceID: "i-" + name, IPAM: knobs}); err != nil {
		t.Fatal(err)
	}
	if p != nil {
		setPool(t, name, p)
	}
}

// setPool plays the operator: spec.ipam.pool becomes p.
func setPool(t *testing.T, name string, p ipamtypes.AllocationMap) {
	t.Helper()
	updateSpec(t, name, func(cn *ciliumv2.CiliumNode) { cn.Spec.IPAM.Pool = maps.Clone(p) })
}

// updateSpec plays the operator: changes the CiliumNode's spec, retried on
// conflicts with the agents' status writes.
func updateSpec(t *testing.T, name string, change func(*ciliumv2.CiliumNode)) {
	t.Helper()
	if err := tryUpdateSpec(name, change); err != nil {
		t.Fatal(err)
	}
}

// tryUpdateSpec is updateSpec for any goroutine: it returns the error.
func tryUpdateSpec(name string, change func(*ciliumv2.CiliumNode)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cn := &ciliumv2.CiliumNode{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, cn); err != nil {
			return err
		}
		change(cn)
		return env.Client.Update(context.Background(), cn)
	})
	if err != nil {
		return fmt.Errorf("updating spec of %s: %w", name, err)
	}
	return nil
}

// setRelease plays the operator: sets status.ipam.release-ips entries.
func setRelease(t *testing.T, name string, states map[string]ipamtypes.IPReleaseStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cn := getCN(t, name)
		if cn.Status.IPAM.ReleaseIPs == nil {
			cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
		}
		maps.Copy(cn.Status.IPAM.ReleaseIPs, states)
		return env.Client.Status().Update(context.Background(), cn)
	})
	if err != nil {
		t.Fatalf("marking release-ips of %s: %v", name, err)
	}
}

func getCN(t *testing.T, name string) *ciliumv2.CiliumNode {
	t.Helper()
	cn := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, cn); err != nil {
		t.Fatalf("reading CiliumNode %s: %v", name, err)
	}
	return cn
}

// eventually polls cond until it holds, failing the test with what it was
// waiting for if it never does.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventuallyTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitReady waits until the agent is Ready.
func waitReady(t *testing.T, a *agentsim.Agent) {
	t.Helper()
	eventually(t, a.Name()+" is ready", a.Ready)
}

// usedIs reports whether the apiserver's status.ipam.used of the node has
// exactly want owners by IP.
func usedIs(t *testing.T, name string, want map[string]string) func() bool {
	return func() bool {
		got := map[string]string{}
		for ip, e := range getCN(t, name).Status.IPAM.Used {
			got[ip] = e.Owner
		}
		return maps.Equal(got, want)
	}
}

// allocateNow allocates for owner and fails the test unless an IP came at
// once, without waiting.
func allocateNow(t *testing.T, a *agentsim.Agent, owner string) string {
	t.Helper()
	var got agentsim.Result
	called := false
	a.AllocateAsync(owner, func(r agentsim.Result) { got, called = r, true })
	if !called || got.Err != nil {
		t.Fatalf("allocation for %s did not succeed at once: called=%v err=%v", owner, called, got.Err)
	}
	return got.IP.String()
}

// allocateLater starts an allocation and returns a channel with its result.
func allocateLater(a *agentsim.Agent, owner string) <-chan agentsim.Result {
	ch := make(chan agentsim.Result, 1)
	a.AllocateAsync(owner, func(r agentsim.Result) { ch <- r })
	return ch
}

// receive waits for an allocation's result.
func receive(t *testing.T, ch <-chan agentsim.Result, what string) agentsim.Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(eventuallyTimeout):
		t.Fatalf("timed out waiting for %s", what)
		return agentsim.Result{}
	}
}

// noViolations fails the test if the ledger counted any violation.
func noViolations(t *testing.T, sim *agentsim.Sim) {
	t.Helper()
	if v := sim.Ledger().Violations(); v.Total() != 0 {
		t.Errorf("violations %+v: %v", v, sim.Ledger().ViolationDetails())
	}
}

// freeIPs returns the addrs not held by the agent's router, health or the
// given pod owners.
func freeIPs(a *agentsim.Agent, addrs []string, owners ...string) []string {
	held := map[string]bool{}
	for _, owner := range append(owners, agentsim.RouterOwner, agentsim.HealthOwner) {
		if ip, ok := a.IP(owner); ok {
			held[ip.String()] = true
		}
	}
	var free []string
	for _, ip := range addrs {
		if !held[ip] {
			free = append(free, ip)
		}
	}
	return free
}
