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
	"slices"
	"strings"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
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

// ErrNoIPv6: the policy asks for IPv6 on a type without IPv6 addresses.
var ErrNoIPv6 = errors.New("instance type has no IPv6 addresses")

// IPv6PrefixAddresses is what one delegated IPv6 prefix (a /80) holds.
const IPv6PrefixAddresses = 1 << 48

// What limits a node, as Result.LimitedBy says it.
const (
	LimitIPv4    = "IPv4 addresses"
	LimitIPv6    = "IPv6 addresses"
	LimitCeiling = "EKS ceiling"
)

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
	// IPFamilies is the policy's ipFamilies: the families every pod gets
	// an address of; empty means IPv4.
	IPFamilies []enipamv1alpha1.IPFamily
}

// Result is what a node of the type can hold.
type Result struct {
	// PoolIPs is the largest IPv4 pool the operator reaches on the node
	// (0 when the policy asks for IPv6 alone).
	PoolIPs int `json:"poolIPs"`
	// IPv6PoolIPs is the most IPv6 addresses the node can have for
	// pods when the policy asks for IPv6: IPv6PrefixAddresses (one /80)
	// where the type takes prefixes (nitro, bare metal), else each pod
	// ENI's IPv6 slots, less the node's own address on the primary ENI
	// when it carries pods; maxAllocate caps it as it caps the IPv4 pool.
	IPv6PoolIPs int `json:"ipv6PoolIPs,omitempty"`
	// IPv6Prefix is whether IPv6 comes as a /80 prefix.
	IPv6Prefix bool `json:"ipv6Prefix,omitempty"`
	// PodENIs are the card-0 ENIs that carry pods.
	PodENIs int `json:"podENIs"`
	// PrefixDelegation is whether /28s are used (asked and the type
	// delegates them).
	PrefixDelegation bool `json:"prefixDelegation"`
	// MaxAllowed is every pod the node can address: the pool less the
	// agent's own addresses, plus the host-network pods. A dual-stack pod
	// needs an address of each family (and so does cilium-agent, for its
	// router and health endpoints), so the smaller family's count wins.
	MaxAllowed int `json:"maxAllowed"`
	// Recommended is MaxAllowed within EKS's ceiling for the vCPUs.
	Recommended int `json:"recommended"`
	// LimitedBy names what sets Recommended: LimitIPv4, LimitIPv6 or
	// LimitCeiling.
	LimitedBy string `json:"limitedBy"`
}

// Compute returns the node's capacity, or an error wrapping ErrNoPodENI
// when no ENI is left for pods.
func Compute(in Input) (Result, error) {
	t := in.Type
	cfg := &pool.Config{FirstInterfaceIndex: in.FirstInterfaceIndex, PrefixDelegation: in.PrefixDelegation}
	cfg.MaxAllocate = in.MaxAllocate
	if err := enipamv1alpha1.ValidateIPFamilies(in.IPFamilies); err != nil {
		return Result{}, err
	}
	v6 := enipamv1alpha1.WantsIPv6(in.IPFamilies)
	v4 := len(in.IPFamilies) == 0 || slices.Contains(in.IPFamilies, enipamv1alpha1.IPv4Family)
	r := Result{
		PodENIs:          max(t.MaxENIs-in.FirstInterfaceIndex-in.ReservedENIs, 0),
		PrefixDelegation: v4 && in.PrefixDelegation && t.PrefixDelegation(),
	}
	if v4 {
		r.PoolIPs = pool.MaxPoolIPs(t, cfg, in.ReservedENIs)
	}
	if r.PodENIs == 0 {
		return r, fmt.Errorf("%w: %s has %d ENIs on network card 0; first interface index %d and %d reserved leave none",
			ErrNoPodENI, t.Name, t.MaxENIs, in.FirstInterfaceIndex, in.ReservedENIs)
	}
	pods, limit := max(r.PoolIPs-in.AgentEndpointIPs, 0), LimitIPv4
	if v6 {
		if t.IPv6PerENI == 0 {
			return r, fmt.Errorf("%w: %s (ipFamilies %v)", ErrNoIPv6, t.Name, in.IPFamilies)
		}
		r.IPv6PoolIPs, r.IPv6Prefix = ipv6Pool(in)
		pods6 := max(r.IPv6PoolIPs-in.AgentEndpointIPs, 0)
		if !v4 || pods6 < pods {
			pods, limit = pods6, LimitIPv6
		}
	}
	r.MaxAllowed = pods + in.HostNetworkPods
	ceiling := CeilingLowCPU
	if t.VCPUs > highCPU {
		ceiling = CeilingHighCPU
	}
	r.Recommended, r.LimitedBy = r.MaxAllowed, limit
	if ceiling < r.MaxAllowed {
		r.Recommended, r.LimitedBy = ceiling, LimitCeiling
	}
	return r, nil
}

// ipv6Pool is the most IPv6 addresses a node can have for pods, and
// whether they come as a prefix. A type that delegates prefixes gets one
// /80 on an ENI (AssignIpv6Addresses with Ipv6PrefixCount 1), whose 2^48
// addresses never run out; any other type gets single addresses, as many
// as its pod ENIs' IPv6 slots, less the one the node itself holds on the
// primary ENI (a dual-stack subnet gives the instance an address there)
// when the primary carries pods.
func ipv6Pool(in Input) (int, bool) {
	t := in.Type
	n, prefix := IPv6PrefixAddresses, t.PrefixDelegation()
	if !prefix {
		podENIs := max(t.MaxENIs-in.FirstInterfaceIndex-in.ReservedENIs, 0)
		n = podENIs * t.IPv6PerENI
		if in.FirstInterfaceIndex == 0 {
			n--
		}
	}
	if in.MaxAllocate > 0 {
		n = min(n, in.MaxAllocate)
	}
	return max(n, 0), prefix
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
	// IPFamilies is the policy's ipFamilies, comma-separated.
	IPFamilies string
	// ShowMaxAllowed prints MaxAllowed instead of Recommended.
	ShowMaxAllowed bool
	// Output is "text" (the one number) or "json" (the whole Result).
	Output string
}

// DefaultOptions: the operator's defaults (first interface index 0, no
// prefixes, 2 agent endpoint addresses) and 2 host-network pods
// (cilium-agent and enipam-agent).
func DefaultOptions() Options {
	return Options{AgentEndpointIPs: 2, HostNetworkPods: 2, IPFamilies: "IPv4", Output: "text"}
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
	fs.StringVar(&o.IPFamilies, "ip-families", o.IPFamilies, "The policy's ipFamilies, comma-separated: IPv4, IPv6 or IPv4,IPv6 (dual-stack: every pod needs an address of each).")
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
	if err := enipamv1alpha1.ValidateIPFamilies(o.families()); err != nil || o.IPFamilies == "" {
		errs = append(errs, fmt.Errorf("--ip-families %q: want IPv4, IPv6 or IPv4,IPv6", o.IPFamilies))
	}
	return errors.Join(errs...)
}

// Input returns the computation's input for the type's limits.
func (o *Options) Input(t cloud.InstanceType) Input {
	return Input{
		Type: t, FirstInterfaceIndex: o.FirstInterfaceIndex, PrefixDelegation: o.PrefixDelegation, MaxAllocate: o.MaxAllocate,
		ReservedENIs: o.ReservedENIs, AgentEndpointIPs: o.AgentEndpointIPs, HostNetworkPods: o.HostNetworkPods,
		IPFamilies: o.families(),
	}
}

// families splits --ip-families.
func (o *Options) families() []enipamv1alpha1.IPFamily {
	var out []enipamv1alpha1.IPFamily
	for _, f := range strings.Split(o.IPFamilies, ",") {
		out = append(out, enipamv1alpha1.IPFamily(strings.TrimSpace(f)))
	}
	return out
}
