// Package maxpods computes the pod capacity of a node of an instance type
// under enipam's policy: the figure kubelet's maxPods should be, as the
// EKS max-pods calculator computes it for the AWS VPC CNI. The pool part
// is pool.MaxPoolIPs, the operator's own limit, so the figure is the pool
// the operator reaches on such a node.
package maxpods

import (
	"errors"
	"flag"
	"fmt"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// Ceilings EKS recommends for kubelet's maxPods: 110 pods up to 30 vCPUs,
// 250 above (the EKS max-pods calculator's MAX_POD_CEILING_FOR_LOW_CPU
// and MAX_POD_CEILING_FOR_HIGH_CPU).
const (
	CeilingLowCPU  = 110
	CeilingHighCPU = 250
	highCPU        = 30
)

// ErrNoPodENI: the policy leaves no ENI of card 0 for pods.
var ErrNoPodENI = errors.New("no ENI left for pods")

// Input is a node's type and policy.
type Input struct {
	Type cloud.InstanceType
	// FirstInterfaceIndex and PrefixDelegation are the ENIPolicy's fields
	// of the same name; MaxAllocate its maxAllocate (0: none).
	FirstInterfaceIndex int
	PrefixDelegation    bool
	MaxAllocate         int
	// ReservedENIs counts card-0 interfaces at or above the first
	// interface index that carry no pods: an EFA-only interface at device
	// 1, a trunk, an ENI excluded by tags.
	ReservedENIs int
	// AgentEndpointIPs are the pool addresses cilium-agent takes for
	// itself: its router and, with endpoint health checking, the health
	// endpoint (Cilium's infraIPAllocator.allocateRouterIPs and
	// allocateHealthIPs), the operator's --agent-endpoint-ips.
	AgentEndpointIPs int
	// HostNetworkPods are pods on the host network, which count against
	// maxPods but take no pool address: cilium-agent, enipam-agent, and
	// whatever else runs that way (kube-proxy, cilium-envoy, ...).
	HostNetworkPods int
}

// Result is what a node of the type can hold.
type Result struct {
	// PoolIPs is the largest pool the operator reaches on the node.
	PoolIPs int `json:"poolIPs"`
	// PodENIs are the card-0 ENIs that carry pods.
	PodENIs int `json:"podENIs"`
	// PrefixDelegation is whether /28s are used (asked and the type
	// delegates them).
	PrefixDelegation bool `json:"prefixDelegation"`
	// MaxAllowed is every pod the node can address: the pool less the
	// agent's own addresses, plus the host-network pods.
	MaxAllowed int `json:"maxAllowed"`
	// Recommended is MaxAllowed within EKS's ceiling for the vCPUs.
	Recommended int `json:"recommended"`
}

// Compute returns the node's capacity, or an error wrapping ErrNoPodENI
// when no ENI is left for pods.
func Compute(in Input) (Result, error) {
	t := in.Type
	cfg := &pool.Config{FirstInterfaceIndex: in.FirstInterfaceIndex, PrefixDelegation: in.PrefixDelegation}
	cfg.MaxAllocate = in.MaxAllocate
	r := Result{
		PoolIPs:          pool.MaxPoolIPs(t, cfg, in.ReservedENIs),
		PodENIs:          max(t.MaxENIs-in.FirstInterfaceIndex-in.ReservedENIs, 0),
		PrefixDelegation: in.PrefixDelegation && t.PrefixDelegation(),
	}
	if r.PodENIs == 0 {
		return r, fmt.Errorf("%w: %s has %d ENIs on network card 0; first interface index %d and %d reserved leave none",
			ErrNoPodENI, t.Name, t.MaxENIs, in.FirstInterfaceIndex, in.ReservedENIs)
	}
	r.MaxAllowed = max(r.PoolIPs-in.AgentEndpointIPs, 0) + in.HostNetworkPods
	ceiling := CeilingLowCPU
	if t.VCPUs > highCPU {
		ceiling = CeilingHighCPU
	}
	r.Recommended = min(r.MaxAllowed, ceiling)
	return r, nil
}

// Options are enipam max-pods' flags.
type Options struct {
	InstanceType string
	// FromIMDS reads the instance type of the machine it runs on.
	FromIMDS bool
	// EC2 asks DescribeInstanceTypes (credentials with
	// ec2:DescribeInstanceTypes) instead of the built-in catalog.
	EC2         bool
	Region      string
	EC2Endpoint string

	FirstInterfaceIndex int
	PrefixDelegation    bool
	MaxAllocate         int
	ReservedENIs        int
	AgentEndpointIPs    int
	HostNetworkPods     int
	// ShowMaxAllowed prints MaxAllowed instead of Recommended.
	ShowMaxAllowed bool
	// Output is "text" (the one number) or "json" (the whole Result).
	Output string
}

// DefaultOptions: the operator's defaults (first interface index 0, no
// prefixes, 2 agent endpoint addresses) and 2 host-network pods
// (cilium-agent and enipam-agent).
func DefaultOptions() Options {
	return Options{AgentEndpointIPs: 2, HostNetworkPods: 2, Output: "text"}
}

// AddFlags registers the options on fs, with the current values as
// defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.InstanceType, "instance-type", o.InstanceType, "EC2 instance type, e.g. m5.large.")
	fs.BoolVar(&o.FromIMDS, "instance-type-from-imds", o.FromIMDS, "Read the instance type of this machine from instance metadata.")
	fs.BoolVar(&o.EC2, "ec2", o.EC2, "Read the type's limits with DescribeInstanceTypes (needs ec2:DescribeInstanceTypes) instead of the built-in catalog.")
	fs.StringVar(&o.Region, "aws-region", o.Region, "AWS region for --ec2 (else the SDK's: AWS_REGION, profile, instance metadata).")
	fs.StringVar(&o.EC2Endpoint, "ec2-endpoint", o.EC2Endpoint, "EC2 endpoint URL override for --ec2.")
	fs.IntVar(&o.FirstInterfaceIndex, "first-interface-index", o.FirstInterfaceIndex, "The policy's firstInterfaceIndex: lowest device index whose ENI carries pods.")
	fs.BoolVar(&o.PrefixDelegation, "prefix-delegation", o.PrefixDelegation, "The policy's prefixDelegation: /28 prefixes (nitro and bare metal types).")
	fs.IntVar(&o.MaxAllocate, "max-allocate", o.MaxAllocate, "The policy's maxAllocate (0: none).")
	fs.IntVar(&o.ReservedENIs, "reserved-enis", o.ReservedENIs, "Card-0 interfaces at or above the first interface index that carry no pods (an EFA-only interface at device 1, a trunk).")
	fs.IntVar(&o.AgentEndpointIPs, "agent-endpoint-ips", o.AgentEndpointIPs, "Pool addresses cilium-agent takes for itself (router, health): the operator's --agent-endpoint-ips.")
	fs.IntVar(&o.HostNetworkPods, "host-network-pods", o.HostNetworkPods, "Pods on the host network of every node (cilium-agent, enipam-agent, kube-proxy, cilium-envoy, ...): counted by maxPods, no pool address.")
	fs.BoolVar(&o.ShowMaxAllowed, "show-max-allowed", o.ShowMaxAllowed, "Print every pod the node can address, not EKS's recommended ceiling (110 up to 30 vCPUs, 250 above).")
	fs.StringVar(&o.Output, "output", o.Output, "text (the number) or json (the details).")
}

// Validate says which option is wrong.
func (o *Options) Validate() error {
	var errs []error
	check := func(ok bool, msg string) {
		if !ok {
			errs = append(errs, errors.New(msg))
		}
	}
	check((o.InstanceType != "") != o.FromIMDS, "one of --instance-type and --instance-type-from-imds is needed")
	check(o.FirstInterfaceIndex >= 0 && o.FirstInterfaceIndex <= 15, "--first-interface-index must be in [0, 15]")
	check(o.MaxAllocate >= 0, "--max-allocate must not be negative")
	check(o.ReservedENIs >= 0, "--reserved-enis must not be negative")
	check(o.AgentEndpointIPs >= 0 && o.AgentEndpointIPs <= 8, "--agent-endpoint-ips must be in [0, 8]")
	check(o.HostNetworkPods >= 0, "--host-network-pods must not be negative")
	check(o.Output == "text" || o.Output == "json", "--output must be text or json")
	return errors.Join(errs...)
}

// Input returns the computation's input for the type's limits.
func (o *Options) Input(t cloud.InstanceType) Input {
	return Input{
		Type: t, FirstInterfaceIndex: o.FirstInterfaceIndex, PrefixDelegation: o.PrefixDelegation, MaxAllocate: o.MaxAllocate,
		ReservedENIs: o.ReservedENIs, AgentEndpointIPs: o.AgentEndpointIPs, HostNetworkPods: o.HostNetworkPods,
	}
}
