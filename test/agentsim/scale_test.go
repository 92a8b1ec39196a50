package agentsim_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/test/agentsim"
)

var (
	scaleNodes   = flag.Int("agentsim.nodes", 0, "run TestScaleCostOfManyAgents with this many simulated nodes")
	scaleChurn   = flag.Duration("agentsim.churn", 30*time.Second, "how long TestScaleCostOfManyAgents churns")
	scaleWriters = flag.Int("agentsim.writers", 0, "status writers of TestScaleCostOfManyAgents (0: the default)")
)

// TestScaleCostOfManyAgents measures what the simulator costs, run only
// when asked (-agentsim.nodes=1000): N nodes with pools of 24, 5 initial
// pods per node, then churn at 0.25 pods/s per node living 20 s on
// average. It logs the heap held per 1000 agents, goroutines, CPU of this
// process, and the status writes made per node, and fails only on
// violations.
func TestScaleCostOfManyAgents(t *testing.T) {
	n := *scaleNodes
	if n == 0 {
		t.Skip("set -agentsim.nodes to run")
	}
	ctx := context.Background()
	specs := make([]agentsim.NodeSpec, n)
	for i := range specs {
		specs[i] = agentsim.NodeSpec{
			Name:       fmt.Sprintf("scale-%05d", i),
			InstanceID: fmt.Sprintf("i-%017x", i),
		}
	}
	start := time.Now()
	if err := agentsim.CreateNodes(ctx, env.Client, specs, 32); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d nodes in %v", n, time.Since(start).Round(time.Millisecond))

	heapBefore, goBefore := heap(), runtime.NumGoroutine()
	sim := startSim(t, agentsim.Options{UpdateInterval: agentsim.DefaultUpdateInterval, QPS: 500, Burst: 1000, Writers: *scaleWriters, SampleInterval: 5 * time.Second})
	for _, s := range specs {
		sim.AddAgent(s.Name)
	}
	start = time.Now()
	fill(t, specs, 24)
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := sim.WaitReady(waitCtx, n); err != nil {
		t.Fatal(err)
	}
	t.Logf("pools filled and %d agents ready in %v", n, time.Since(start).Round(time.Millisecond))

	cpu0, writes0 := cpuTime(), sim.Figures().Writes
	report, err := agentsim.NewChurn(sim, agentsim.ChurnConfig{
		Seed:         1,
		ArrivalRate:  0.25,
		MeanLifetime: 20 * time.Second,
		InitialPods:  5,
		Duration:     *scaleChurn,
	}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpuTime() - cpu0
	f := sim.Figures()
	heapAfter := heap()
	per1000 := func(v float64) float64 { return v / float64(n) * 1000 }
	t.Logf("churn: %+v", report)
	t.Logf("heap: %.1f MiB for %d agents (%.1f MiB per 1000), goroutines %d -> %d",
		mib(heapAfter-heapBefore), n, per1000(mib(heapAfter-heapBefore)), goBefore, runtime.NumGoroutine())
	t.Logf("churn CPU of this process: %.2f s over %v (%.2f s per minute per 1000 nodes)",
		cpu.Seconds(), report.Ran.Round(time.Millisecond), per1000(cpu.Seconds()/report.Ran.Minutes()))
	writes := f.Writes - writes0
	t.Logf("status writes: %d at start (%.2f per node), %d during churn (%.1f per node per minute, bound %.1f by the interval); %d conflicts, %d failed",
		writes0, float64(writes0)/float64(n), writes, float64(writes)/float64(n)/report.Ran.Minutes(),
		time.Minute.Seconds()/agentsim.DefaultUpdateInterval.Seconds(), f.WriteConflicts, f.FailedWrites)
	t.Logf("used lag (change to write): %+v", f.UsedLag)
	t.Logf("allocations %d, waits %+v, idle IPs per node now %.1f", f.Allocations, f.Waits, float64(f.IdleIPs)/float64(n))
	noViolations(t, sim)
}

// fill plays the operator: gives each node a pool of size IPs, 32 writes
// at a time.
func fill(t *testing.T, specs []agentsim.NodeSpec, size int) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, 32)
	for i, s := range specs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p := pool(ips(fmt.Sprintf("10.%d.%d.", 100+i/256, i%256), size)...)
			if err := tryUpdateSpec(s.Name, func(cn *ciliumv2.CiliumNode) { cn.Spec.IPAM.Pool = p }); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
