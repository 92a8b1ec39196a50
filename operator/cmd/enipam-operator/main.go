// Command enipam-operator keeps every CiliumNode's IP pool filled with
// ENIs and addresses from EC2. See the README for installation.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	// EC2's and STS's endpoints are HTTPS and the image (FROM scratch)
	// has no CA bundle: Go's own roots, pinned in go.mod, serve when the
	// system has none. SSL_CERT_FILE or SSL_CERT_DIR (a TLS-inspecting
	// proxy's CA) replace them: see docs/install.md.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/enipam/enipam/internal/version"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/operator/metricsreg"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "enipam-operator:", err)
		os.Exit(1)
	}
}

// defaultGCPercent replaces Go's 100: the operator's heap is mostly
// long-lived caches and its CPU mostly idle, so collecting at 15% growth
// keeps its memory near the live heap (under 200 MiB of RSS at every
// reading for a 5000-node cluster, where 25 left 5 of 36 readings above
// it) for about 2 CPU s a minute more (docs/performance.md). GOGC in the
// environment wins.
const defaultGCPercent = 15

// memoryLimitPercent of the container's memory limit is the Go runtime's
// soft memory limit: near it the runtime collects more often and returns
// freed memory at once, so a heap that outgrows its sizing slows the
// operator instead of having it killed. The rest covers what the runtime
// does not count (the binary's pages). Below the limit GOGC alone sets
// the pace.
const memoryLimitPercent = 90

func run() error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if err := setMemoryLimit(os.Getenv("GOMEMLIMIT"), os.Getenv("MEMORY_LIMIT"), debug.SetMemoryLimit); err != nil {
		return err
	}
	opts := operator.DefaultOptions()
	opts.ClusterName = os.Getenv("CLUSTER_NAME")
	opts.Region = os.Getenv("AWS_REGION")
	opts.EC2Endpoint = os.Getenv("AWS_ENDPOINT_URL_EC2")
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		opts.LeaderNamespace = ns
	}
	fs := flag.CommandLine // controller-runtime registers --kubeconfig here
	opts.AddFlags(fs)
	showVersion := version.AddFlag(fs)
	flag.Parse()
	if showVersion.Requested(os.Stdout, "enipam-operator") {
		return nil
	}
	if err := opts.Validate(); err != nil {
		return err
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(opts.LogLevel)); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubernetes config, %w", err)
	}
	restCfg.QPS, restCfg.Burst = float32(opts.KubeAPIQPS), opts.KubeAPIBurst
	loadOpts := []func(*awsconfig.LoadOptions) error{awsconfig.WithEC2IMDSRegion()}
	if opts.Region != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(opts.Region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return fmt.Errorf("AWS config, %w", err)
	}
	if len(opts.VPCIDs) == 0 {
		// The operator runs on a node of the cluster: its VPC is the
		// cluster's, known from the start so that leaked ENIs are found
		// even before any node is served.
		if vpc, err := vpcFromIMDS(ctx, awsCfg); err == nil {
			opts.VPCIDs = append(opts.VPCIDs, vpc)
		} else {
			log.Info("VPC not found in instance metadata; VPCs are learnt from the nodes", "error", err)
		}
	}
	// controller-runtime's metrics endpoint serves ctrlmetrics.Registry:
	// the operator's collectors go into it, the per-node series gathered
	// in a few allocations (metricsreg).
	reg := metricsreg.New(ctrlmetrics.Registry)
	ctrlmetrics.Registry = reg
	op, err := operator.New(opts, restCfg, awsCfg, reg, log)
	if err != nil {
		return err
	}
	log.Info("starting", "cluster", opts.ClusterName, "region", awsCfg.Region, "workers", opts.Workers)
	return op.Run(ctx)
}

// setMemoryLimit sets the runtime's soft memory limit to
// memoryLimitPercent of containerLimit (MEMORY_LIMIT: the container's
// memory limit in bytes, which the chart fills from its resources), unless
// GOMEMLIMIT is set (the runtime applied it already) or neither is.
func setMemoryLimit(gomemlimit, containerLimit string, set func(int64) int64) error {
	if gomemlimit != "" || containerLimit == "" {
		return nil
	}
	limit, err := strconv.ParseInt(containerLimit, 10, 64)
	if err != nil || limit <= 0 {
		return fmt.Errorf("MEMORY_LIMIT=%q: want the container's memory limit in bytes, a positive integer", containerLimit)
	}
	set(limit / 100 * memoryLimitPercent)
	return nil
}

// vpcFromIMDS reads the VPC of the instance the operator runs on.
func vpcFromIMDS(ctx context.Context, cfg aws.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	client := imds.NewFromConfig(cfg)
	get := func(path string) (string, error) {
		out, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
		if err != nil {
			return "", err
		}
		defer out.Content.Close()
		b, err := io.ReadAll(out.Content)
		return strings.TrimSpace(string(b)), err
	}
	mac, err := get("mac")
	if err != nil {
		return "", err
	}
	return get("network/interfaces/macs/" + mac + "/vpc-id")
}
