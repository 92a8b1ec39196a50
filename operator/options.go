// Package operator is enipam-operator's composition root: its options and
// the wiring of the EC2 adapter, the inventory, the controllers and the
// collector into one controller-runtime manager.
package operator

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
)

// Options configure the operator. Defaults come from DefaultOptions; the
// command fills environment defaults before parsing flags.
type Options struct {
	ClusterName string
	Region      string
	EC2Endpoint string
	VPCIDs      stringList

	ResyncInterval time.Duration
	EC2RateScale   float64
	EC2MaxAttempts int
	Workers        int
	// KubeAPIQPS and KubeAPIBurst bound the apiserver client's requests
	// (client-side, before the apiserver's priority and fairness). The
	// defaults are Cilium's operator's (100, burst 200): each node's pool
	// growth costs a few writes, and at controller-runtime's 20 (burst 30)
	// a burst of pods across 100 nodes queued them for seconds while pods
	// waited for their addresses (docs/performance.md, the pools burst).
	KubeAPIQPS   float64
	KubeAPIBurst int

	GCInterval   time.Duration
	GCMaxPerPass int
	// GCMinAge is how old a leak must be to be collected on first sight
	// (0: twice the consistency grace, at least a minute).
	GCMinAge time.Duration

	// Pool defaults, the last step of the precedence (see package policy).
	Knobs               pool.Knobs
	FirstInterfaceIndex int
	PrefixDelegation    bool
	ReleaseExcessIPs    bool
	ReleaseDelay        time.Duration
	// Consolidation is the default of ENIPolicy's consolidation.
	Consolidation policy.Consolidation
	// Headroom is the default headroom policy: "Fixed" (pre-allocate) or
	// "Adaptive" (learnt from each node's arrivals).
	Headroom string
	// PodDemand watches the pods bound to nodes without an address, so
	// pools grow for them before their CNI call (and the adaptive
	// headroom learns their arrivals).
	PodDemand bool

	MetricsAddress   string
	HealthAddress    string
	PprofAddress     string
	LeaderElect      bool
	LeaderNamespace  string
	LeaderElectionID string
	LogLevel         string
	// RoutingPatience is how long addresses may wait for the node agent's
	// routed report before the node gets an AwaitingRouting event.
	RoutingPatience time.Duration
}

// DefaultOptions returns the defaults: Cilium's pre-allocate of 8, EC2's
// own throttling buckets, a one-minute resync.
func DefaultOptions() Options {
	return Options{
		ResyncInterval:   time.Minute,
		EC2RateScale:     1,
		EC2MaxAttempts:   8,
		Workers:          100,
		KubeAPIQPS:       100,
		KubeAPIBurst:     200,
		GCInterval:       5 * time.Minute,
		GCMaxPerPass:     25,
		Knobs:            pool.Knobs{PreAllocate: 8, AgentEndpoints: 2},
		ReleaseExcessIPs: true,
		ReleaseDelay:     3 * time.Minute,
		Consolidation:    policy.Consolidation{Enabled: true, Delay: time.Minute},
		Headroom:         "Fixed",
		PodDemand:        true,
		MetricsAddress:   ":9090",
		HealthAddress:    ":9091",
		LeaderElect:      true,
		LeaderNamespace:  "kube-system",
		LeaderElectionID: "enipam-operator",
		LogLevel:         "info",
		RoutingPatience:  30 * time.Second,
	}
}

// AddFlags registers every option on fs, with the current values as
// defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "Cluster name, tagged on every ENI the operator creates; required (env CLUSTER_NAME).")
	fs.StringVar(&o.Region, "aws-region", o.Region, "AWS region (env AWS_REGION; else from instance metadata).")
	fs.StringVar(&o.EC2Endpoint, "ec2-endpoint", o.EC2Endpoint, "EC2 endpoint URL override (env AWS_ENDPOINT_URL_EC2).")
	fs.Var(&o.VPCIDs, "vpc-id", "VPC to sync from the start (repeatable); VPCs of nodes are found on their own.")
	fs.DurationVar(&o.ResyncInterval, "resync-interval", o.ResyncInterval, "How often whole VPCs are described again.")
	fs.Float64Var(&o.EC2RateScale, "ec2-rate-scale", o.EC2RateScale, "Scale of the client-side EC2 token buckets (1 = EC2's defaults; lower when other tools share the account).")
	fs.IntVar(&o.EC2MaxAttempts, "ec2-max-attempts", o.EC2MaxAttempts, "Attempts per EC2 call under throttling or server errors.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Nodes served in parallel.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Requests per second to the apiserver, sustained (client-side limit).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Requests to the apiserver in a burst (client-side limit).")
	fs.DurationVar(&o.GCInterval, "gc-interval", o.GCInterval, "Time between leaked-ENI collection passes.")
	fs.IntVar(&o.GCMaxPerPass, "gc-max-per-pass", o.GCMaxPerPass, "Most leaked ENIs deleted (and, apart, leaked Elastic IPs released) per pass.")
	fs.DurationVar(&o.GCMinAge, "gc-min-age", o.GCMinAge, "How old (by its creation tag) an unattached ENI, or an Elastic IP allocated for a claim that no claim records, must be to be collected on first sight (0 = twice the consistency grace, at least 1m). An ENI younger than that by its tag is never collected; one without a readable tag once seen on two passes, the first that long ago. Elastic IPs younger than that on their second sighting.")
	fs.IntVar(&o.Knobs.PreAllocate, "pre-allocate", o.Knobs.PreAllocate, "Default free IPs kept in each pool.")
	fs.IntVar(&o.Knobs.MinAllocate, "min-allocate", o.Knobs.MinAllocate, "Default smallest pool.")
	fs.IntVar(&o.Knobs.MaxAllocate, "max-allocate", o.Knobs.MaxAllocate, "Default largest pool (0 = the instance's limit).")
	fs.IntVar(&o.Knobs.MaxAboveWatermark, "max-above-watermark", o.Knobs.MaxAboveWatermark, "Default extra IPs taken beyond the need in one allocation.")
	fs.DurationVar(&o.RoutingPatience, "routing-patience", o.RoutingPatience, "How long addresses may wait for the node's enipam-agent to report them routed before the node gets an AwaitingRouting event.")
	fs.IntVar(&o.Knobs.AgentEndpoints, "agent-endpoint-ips", o.Knobs.AgentEndpoints, "IPs cilium-agent takes for itself on start (router, health), included in a fresh node's first allocation (0 = Cilium's behaviour: a second call).")
	fs.IntVar(&o.FirstInterfaceIndex, "first-interface-index", o.FirstInterfaceIndex, "Default lowest device index whose ENI carries pod IPs.")
	fs.BoolVar(&o.PrefixDelegation, "prefix-delegation", o.PrefixDelegation, "Default: allocate /28 prefixes on nitro and bare metal instances.")
	fs.BoolVar(&o.ReleaseExcessIPs, "release-excess-ips", o.ReleaseExcessIPs, "Default: return excess IPs through Cilium's release handshake.")
	fs.DurationVar(&o.ReleaseDelay, "excess-ip-release-delay", o.ReleaseDelay, "Default time IPs stay in excess before release.")
	fs.BoolVar(&o.Consolidation.Enabled, "consolidate", o.Consolidation.Enabled, "Default: drain the least-used secondary ENI (or /28) of a node holding more than it needs, and delete ENIs left without addresses (with --release-excess-ips).")
	fs.DurationVar(&o.Consolidation.Delay, "consolidation-delay", o.Consolidation.Delay, "Default time a secondary ENI stays without addresses before it is detached and deleted (while the node's other ENIs have room for its headroom).")
	fs.StringVar(&o.Headroom, "headroom", o.Headroom, "Default headroom policy: Fixed (pre-allocate free IPs ahead of the pods) or Adaptive (what each node's arrivals call for, at most pre-allocate; needs --pod-demand).")
	fs.BoolVar(&o.PodDemand, "pod-demand", o.PodDemand, "Watch the pods bound to nodes without an address (a field-selected list and watch of pods), so pools grow for them before their CNI call.")
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "Prometheus metrics address (0 = off).")
	fs.StringVar(&o.HealthAddress, "health-probe-bind-address", o.HealthAddress, "Health and readiness probe address (0 = off).")
	fs.StringVar(&o.PprofAddress, "pprof-bind-address", o.PprofAddress, "Go profiling (net/http/pprof) address; empty or 0 = off.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader among replicas through a Lease; only the leader talks to EC2.")
	fs.StringVar(&o.LeaderNamespace, "leader-election-namespace", o.LeaderNamespace, "Namespace of the leader Lease (env POD_NAMESPACE).")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader Lease.")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error.")
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.ClusterName != "", "--cluster-name (or CLUSTER_NAME) is required: it marks the ENIs this cluster owns")
	check(len(o.ClusterName) <= 200, "--cluster-name is longer than 200 characters")
	check(o.ResyncInterval >= 5*time.Second, "--resync-interval must be at least 5s, got %s", o.ResyncInterval)
	check(o.EC2RateScale > 0 && o.EC2RateScale <= 100, "--ec2-rate-scale must be in (0, 100], got %v", o.EC2RateScale)
	check(o.EC2MaxAttempts >= 1, "--ec2-max-attempts must be at least 1")
	check(o.Workers >= 1 && o.Workers <= 10000, "--workers must be in [1, 10000], got %d", o.Workers)
	check(o.KubeAPIQPS > 0 && o.KubeAPIBurst >= 1, "--kube-api-qps must be above 0 and --kube-api-burst at least 1, got %g and %d", o.KubeAPIQPS, o.KubeAPIBurst)
	check(o.GCInterval >= 100*time.Millisecond, "--gc-interval must be at least 100ms")
	check(o.GCMaxPerPass >= 0, "--gc-max-per-pass must not be negative")
	check(o.GCMinAge >= 0, "--gc-min-age must not be negative")
	k := o.Knobs
	check(k.PreAllocate >= 0 && k.MinAllocate >= 0 && k.MaxAllocate >= 0 && k.MaxAboveWatermark >= 0, "pool knobs must not be negative")
	check(k.AgentEndpoints >= 0 && k.AgentEndpoints <= 8, "--agent-endpoint-ips must be in [0, 8]")
	check(k.MaxAllocate == 0 || k.MinAllocate <= k.MaxAllocate, "--min-allocate %d exceeds --max-allocate %d", k.MinAllocate, k.MaxAllocate)
	check(o.FirstInterfaceIndex >= 0 && o.FirstInterfaceIndex <= 15, "--first-interface-index must be in [0, 15]")
	check(o.ReleaseDelay >= 0, "--excess-ip-release-delay must not be negative")
	check(o.Consolidation.Delay >= 0, "--consolidation-delay must not be negative")
	check(o.Headroom == "Fixed" || o.Headroom == "Adaptive", "--headroom must be Fixed or Adaptive, got %q", o.Headroom)
	check(o.Headroom != "Adaptive" || o.PodDemand, "--headroom=Adaptive learns from the pod watch: it needs --pod-demand")
	check(!o.LeaderElect || o.LeaderNamespace != "", "--leader-election-namespace is required with --leader-elect")
	check(o.RoutingPatience >= 0, "--routing-patience must not be negative")
	switch o.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level must be debug, info, warn or error, got %q", o.LogLevel))
	}
	return errors.Join(errs...)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return fmt.Sprint([]string(*l)) }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
