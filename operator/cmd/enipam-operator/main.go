// Command enipam-operator keeps every CiliumNode's IP pool filled with
// ENIs and addresses from EC2. See the README for installation.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/enipam/enipam/operator"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "enipam-operator:", err)
		os.Exit(1)
	}
}

func run() error {
	opts := operator.DefaultOptions()
	opts.ClusterName = os.Getenv("CLUSTER_NAME")
	opts.Region = os.Getenv("AWS_REGION")
	opts.EC2Endpoint = os.Getenv("AWS_ENDPOINT_URL_EC2")
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		opts.LeaderNamespace = ns
	}
	fs := flag.CommandLine // controller-runtime registers --kubeconfig here
	opts.AddFlags(fs)
	flag.Parse()
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
	loadOpts := []func(*awsconfig.LoadOptions) error{awsconfig.WithEC2IMDSRegion()}
	if opts.Region != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(opts.Region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return fmt.Errorf("AWS config, %w", err)
	}
	op, err := operator.New(opts, restCfg, awsCfg, ctrlmetrics.Registry, log)
	if err != nil {
		return err
	}
	log.Info("starting", "cluster", opts.ClusterName, "region", awsCfg.Region, "workers", opts.Workers)
	return op.Run(ctx)
}
