// Command enipam-bench runs enipam's scale scenarios with the real
// binaries and prints their figures; `make bench` runs it. Each scenario
// also writes <out>/<scenario>.json.
//
//	enipam-bench [-quick] [-scenarios scale-up,scale-up-dualstack,churn,steady,steady-large,placement,static-moves,pools,outage] [-out _out/bench]
//
// steady measures the idle operator at 5000 nodes (goal 200 MiB RSS),
// steady-large at 10 000 (goal 350 MiB).
//
// scale-up runs the new-ENI scale-up on m5.large and m5.xlarge and the
// primary-ENI one; scale-up-m5.large or scale-up-m5.xlarge runs one
// new-ENI scale-up alone. scale-up-dualstack runs the new-ENI scale-up on
// m5.xlarge dual-stack (ipFamilies IPv4 and IPv6): one new ENI per node
// covers IPv4's pre-allocate there, so IPv4 costs what the IPv4 m5.xlarge
// scale-up does and IPv6's /80 shows as the calls on top; then 10 pods
// land on every node (two ENIs hold their IPv4) and the IPv6 windows
// refill from the /80.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/bench"
	"github.com/enipam/enipam/test/cluster"
)

type scenario interface {
	Name() string
	Run(context.Context, *bench.Env) (*bench.Report, error)
}

func main() {
	quick := flag.Bool("quick", os.Getenv("BENCH_QUICK") == "1", "small runs (BENCH_QUICK=1): 200 nodes for scale-up")
	only := flag.String("scenarios", "scale-up,scale-up-dualstack,churn,steady,steady-large,placement,static-moves,pools,outage", "comma-separated scenarios to run")
	out := flag.String("out", "_out/bench", "directory for the JSON reports and logs")
	nodes := flag.Int("nodes", 0, "scale-up nodes (default 1000, quick 200)")
	watermark := flag.Int("churn-watermark", -1, "churn: max-above-watermark (default the scenario's)")
	delay := flag.Duration("churn-release-delay", 0, "churn: excess IP release delay (default the scenario's)")
	poolsNodes := flag.Int("pools-nodes", 0, "pools: nodes (default 100, quick 20)")
	poolsConfigs := flag.String("pools-configs", "", "pools: comma-separated configurations to compare (default all: cilium,vpc-cni,enipam-fixed,enipam-adaptive,enipam-adaptive-prefix)")
	cniDelay := flag.Duration("cni-delay", 0, "pools: time from a pod's binding to its CNI call (default 1s)")
	steadyNodes := flag.Int("steady-nodes", 0, "steady: idle nodes (default 5000, quick 1000)")
	largeNodes := flag.Int("steady-large-nodes", 0, "steady-large: idle nodes (default 10000, quick 2000)")
	steadyRestarts := flag.Bool("steady-restarts", true, "steady, steady-large: restart the operator after the window, without and with its pod watch")
	outageNodes := flag.Int("outage-nodes", 0, "outage: nodes served before the outage (default 200, quick 50)")
	outageJoining := flag.Int("outage-joining", 0, "outage: nodes joining during the outage (default 50, quick 20)")
	operatorArgs := flag.String("operator-args", "", "space-separated arguments added to every operator's (e.g. --log-level=debug)")
	flag.Parse()
	// envtest logs through controller-runtime's global logger; only its
	// warnings matter here.
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	churn := bench.DefaultChurn(*quick)
	if *watermark >= 0 {
		churn.MaxAboveWatermark = *watermark
	}
	if *delay > 0 {
		churn.ReleaseDelay = *delay
	}
	pools := bench.DefaultPools(*quick)
	if *poolsNodes > 0 {
		pools.Nodes = *poolsNodes
	}
	if *cniDelay > 0 {
		pools.CNIDelay = *cniDelay
	}
	if *poolsConfigs != "" {
		var keep []bench.PoolConfig
		for _, name := range strings.Split(*poolsConfigs, ",") {
			i := slices.IndexFunc(pools.Configs, func(c bench.PoolConfig) bool { return c.Name == strings.TrimSpace(name) })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "enipam-bench: unknown pools configuration %q\n", name)
				os.Exit(2)
			}
			keep = append(keep, pools.Configs[i])
		}
		pools.Configs = keep
	}
	steady := bench.DefaultSteady(*quick)
	if *steadyNodes > 0 {
		steady.Nodes = *steadyNodes
	}
	large := bench.DefaultSteadyLarge(*quick)
	if *largeNodes > 0 {
		large.Nodes = *largeNodes
	}
	steady.NoRestarts, large.NoRestarts = !*steadyRestarts, !*steadyRestarts
	outage := bench.DefaultOutage(*quick)
	if *outageNodes > 0 {
		outage.Nodes = *outageNodes
	}
	if *outageJoining > 0 {
		outage.Joining = *outageJoining
	}
	if err := run(ctx, *quick, *only, *out, *nodes, churn, pools, []bench.Steady{steady, large}, outage, strings.Fields(*operatorArgs)); err != nil {
		fmt.Fprintln(os.Stderr, "enipam-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, quick bool, only, out string, nodes int, churn bench.Churn, pools bench.Pools, steady []bench.Steady, outage bench.Outage, operatorArgs []string) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	out, err = filepath.Abs(out)
	if err != nil {
		return err
	}
	env, err := bench.NewEnv(ctx, root, out, os.Stdout)
	if err != nil {
		return err
	}
	env.OperatorArgs = operatorArgs
	if nodes == 0 {
		nodes = 1000
		if quick {
			nodes = 200
		}
	}
	var scenarios []scenario
	for _, name := range strings.Split(only, ",") {
		switch strings.TrimSpace(name) {
		case "scale-up":
			scenarios = append(scenarios,
				bench.ScaleUp{Nodes: nodes, NewENI: true, InstanceType: "m5.large", PreAllocate: 8},
				bench.ScaleUp{Nodes: nodes, NewENI: true, InstanceType: "m5.xlarge", PreAllocate: 8},
				bench.ScaleUp{Nodes: nodes, InstanceType: "m5.xlarge", PreAllocate: 8})
		case "scale-up-m5.large", "scale-up-m5.xlarge":
			typ := strings.TrimPrefix(strings.TrimSpace(name), "scale-up-")
			scenarios = append(scenarios, bench.ScaleUp{Nodes: nodes, NewENI: true, InstanceType: typ, PreAllocate: 8})
		case "scale-up-dualstack":
			scenarios = append(scenarios, bench.ScaleUp{Nodes: nodes, NewENI: true, InstanceType: "m5.xlarge", PreAllocate: 8,
				IPFamilies: []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family}, Pods: 10})
		case "churn":
			scenarios = append(scenarios, churn)
		case "steady":
			scenarios = append(scenarios, steady[0])
		case "steady-large":
			scenarios = append(scenarios, steady[1])
		case "placement":
			scenarios = append(scenarios, bench.DefaultPlacement(quick))
		case "static-moves":
			scenarios = append(scenarios, bench.DefaultStaticMoves(quick))
		case "static-moves-handshake":
			s := bench.DefaultStaticMoves(quick)
			s.EndpointRoutes = false
			scenarios = append(scenarios, s)
		case "pools":
			scenarios = append(scenarios, pools)
		case "outage":
			scenarios = append(scenarios, outage)
		default:
			return fmt.Errorf("unknown scenario %q (scale-up, scale-up-m5.large, scale-up-m5.xlarge, scale-up-dualstack, churn, steady, steady-large, placement, static-moves, static-moves-handshake, pools, outage)", name)
		}
	}
	start := time.Now()
	for _, s := range scenarios {
		rep, err := s.Run(ctx, env)
		if err != nil {
			return fmt.Errorf("%s: %w (logs under %s)", s.Name(), err, filepath.Join(out, "logs", s.Name()))
		}
		rep.Print(os.Stdout)
		path, err := rep.Write(out)
		if err != nil {
			return err
		}
		fmt.Printf("report: %s\n", path)
	}
	fmt.Printf("\nall scenarios ran in %s\n", time.Since(start).Round(time.Second))
	return nil
}
