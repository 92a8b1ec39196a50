// Command enipam is enipam's command line for people and for node
// bootstrap scripts. It needs no access to the cluster.
//
//	enipam max-pods --instance-type m5.large [--first-interface-index 1] [--prefix-delegation] ...
//
// prints the kubelet maxPods of a node of that type under enipam's
// policy: the pool enipam-operator reaches on it (from the operator's own
// limits code), less the addresses cilium-agent takes for itself, plus
// the host-network pods, within EKS's recommended ceiling unless
// --show-max-allowed. `enipam max-pods -h` lists the flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/internal/version"
	"github.com/enipam/enipam/operator/catalog"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/operator/maxpods"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: enipam <command> [flags]

commands:
  max-pods   the kubelet maxPods of a node of an instance type under enipam
  version    print the version (also: enipam --version)
`

// run executes one command and returns the exit code: 0, 1 for a failure,
// 2 for bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "max-pods":
		return maxPods(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, version.Line("enipam"))
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "enipam: unknown command %q\n%s", args[0], usage)
	return 2
}

// report is max-pods' JSON output.
type report struct {
	InstanceType string `json:"instanceType"`
	// Source is where the limits came from: catalog or ec2.
	Source          string `json:"source"`
	CardZeroENIs    int    `json:"cardZeroENIs"`
	AddressesPerENI int    `json:"addressesPerENI"`
	// IPv6PerENI is the type's IPv6 addresses per ENI (0: no IPv6).
	IPv6PerENI int `json:"ipv6AddressesPerENI"`
	VCPUs      int `json:"vcpus"`
	maxpods.Result
}

func maxPods(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts := maxpods.DefaultOptions()
	fs := flag.NewFlagSet("enipam max-pods", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(stderr, "enipam max-pods:", err)
		return 2
	}
	t, source, err := limits(ctx, &opts)
	if err != nil {
		fmt.Fprintln(stderr, "enipam max-pods:", err)
		return 1
	}
	res, err := maxpods.Compute(opts.Input(t))
	if err != nil {
		fmt.Fprintln(stderr, "enipam max-pods:", err)
		return 1
	}
	if opts.Output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report{InstanceType: t.Name, Source: source, CardZeroENIs: t.MaxENIs, AddressesPerENI: t.IPv4PerENI, IPv6PerENI: t.IPv6PerENI, VCPUs: t.VCPUs, Result: res})
		return 0
	}
	n := res.Recommended
	if opts.ShowMaxAllowed {
		n = res.MaxAllowed
	}
	fmt.Fprintln(stdout, n)
	return 0
}

// limits finds the type's limits: from DescribeInstanceTypes through the
// operator's EC2 adapter with --ec2, else from the built-in catalog.
func limits(ctx context.Context, opts *maxpods.Options) (cloud.InstanceType, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var cfg aws.Config
	if opts.FromIMDS || opts.EC2 {
		loadOpts := []func(*awsconfig.LoadOptions) error{awsconfig.WithEC2IMDSRegion()}
		if opts.Region != "" {
			loadOpts = append(loadOpts, awsconfig.WithRegion(opts.Region))
		}
		var err error
		if cfg, err = awsconfig.LoadDefaultConfig(ctx, loadOpts...); err != nil {
			return cloud.InstanceType{}, "", fmt.Errorf("AWS config, %w", err)
		}
	}
	name := opts.InstanceType
	if opts.FromIMDS {
		out, err := imds.NewFromConfig(cfg).GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-type"})
		if err != nil {
			return cloud.InstanceType{}, "", fmt.Errorf("instance type from instance metadata, %w", err)
		}
		b, err := io.ReadAll(out.Content)
		out.Content.Close()
		if err != nil {
			return cloud.InstanceType{}, "", fmt.Errorf("instance type from instance metadata, %w", err)
		}
		name = strings.TrimSpace(string(b))
	}
	if !opts.EC2 {
		t, ok := catalog.Lookup(name)
		if !ok {
			return cloud.InstanceType{}, "", fmt.Errorf("%s is not in the built-in catalog; --ec2 asks DescribeInstanceTypes", name)
		}
		return t.Limits(), "catalog", nil
	}
	eopts := ec2.DefaultOptions()
	eopts.Endpoint, eopts.InitialBucketFill, eopts.MaxAttempts = opts.EC2Endpoint, 1, 3
	client, err := ec2.New(cfg, eopts, prometheus.NewRegistry())
	if err != nil {
		return cloud.InstanceType{}, "", err
	}
	types, err := client.InstanceTypes(ctx, []string{name})
	if err != nil {
		return cloud.InstanceType{}, "", fmt.Errorf("DescribeInstanceTypes %s, %w", name, err)
	}
	for _, t := range types {
		if t.Name == name {
			return t, "ec2", nil
		}
	}
	return cloud.InstanceType{}, "", fmt.Errorf("EC2 does not know instance type %s", name)
}
