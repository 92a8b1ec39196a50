package state

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/enipam/enipam/test/ec2sim/behaviour"
	"github.com/enipam/enipam/test/ec2sim/iam"
)

//go:embed demo.yaml
var demoYAML []byte

// Scenario is what the emulator starts from: one account in one region, its
// VPCs, subnets, security groups and instances, and how the emulated EC2
// behaves (delays, throttling, latency, faults). It is read from YAML; field
// names are the json tags below.
type Scenario struct {
	// Account is the 12-digit owner ID stamped on every resource.
	Account string `json:"account"`
	Region  string `json:"region"`
	// Seed makes IDs, MACs, delays and fault draws reproducible.
	Seed uint64 `json:"seed,omitempty"`
	// Principals may call EC2, each signing with its access key and held
	// to its IAM policy (package iam). None: DefaultPrincipal, the
	// default credentials under the repository's policy for ClusterName.
	Principals []iam.PrincipalSpec `json:"principals,omitempty"`
	// ClusterName is the clusterName of the enipam cluster the account
	// hosts: the repository's policy is written for it (the README's
	// example prod-eu-1 when empty).
	ClusterName string `json:"clusterName,omitempty"`
	// Zones are the availability zones, e.g. us-east-1a.
	Zones []string `json:"zones"`
	// InstanceTypes add to or replace entries of the built-in catalog.
	InstanceTypes []InstanceType `json:"instanceTypes,omitempty"`
	VPCs          []VPCSpec      `json:"vpcs"`
	Instances     []InstanceSpec `json:"instances,omitempty"`
	// ElasticIPLimit caps allocated Elastic IPs (EC2's default is 5).
	ElasticIPLimit int `json:"elasticIPLimit,omitempty"`
	// ElasticIPs are allocated at start, unassociated, as an account's
	// pool of public addresses (e.g. for Cilium's ipam-static-ip-tags).
	ElasticIPs []ElasticIPSpec `json:"elasticIPs,omitempty"`
	// Profile "realistic" turns on EC2's default throttling, realistic call
	// latencies and RealisticTiming (delays, moves, cooldowns, lags);
	// explicit settings below win, field by field for timing.
	Profile    string                   `json:"profile,omitempty"`
	Timing     *TimingConfig            `json:"timing,omitempty"`
	Throttling behaviour.ThrottleConfig `json:"throttling,omitempty"`
	Latency    *behaviour.LatencyConfig `json:"latency,omitempty"`
	Faults     behaviour.FaultConfig    `json:"faults,omitempty"`
	// SubnetFullError forces the form of every "subnet full" answer:
	// InsufficientFreeAddressesInSubnet, InvalidParameterValue (with EC2's
	// "There aren't sufficient free Ipv4 addresses or prefixes") or
	// InsufficientCidrBlocks. Empty answers by cause as EC2 usually does
	// (see doc.go).
	SubnetFullError string `json:"subnetFullError,omitempty"`
}

// ElasticIPSpec seeds one Elastic IP with its tags.
type ElasticIPSpec struct {
	Tags map[string]string `json:"tags,omitempty"`
}

// VPCSpec seeds one VPC. A default security group and a main route table are
// created with it, as EC2 does.
type VPCSpec struct {
	// ID is optional; one is generated when empty.
	ID    string   `json:"id,omitempty"`
	Name  string   `json:"name,omitempty"`
	CIDRs []string `json:"cidrs"`
	// IPv6CIDR is the VPC's Amazon-provided IPv6 /56, as EC2 assigns one
	// (AmazonProvidedIpv6CidrBlock); empty for an IPv4-only VPC.
	IPv6CIDR string            `json:"ipv6Cidr,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`

	Subnets        []SubnetSpec        `json:"subnets"`
	SecurityGroups []SecurityGroupSpec `json:"securityGroups,omitempty"`
}

// SubnetSpec seeds one subnet. Name becomes the Name tag and is how instances
// refer to the subnet (its ID works too).
type SubnetSpec struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	CIDR string `json:"cidr"`
	// IPv6CIDR is a /64 of the VPC's /56; empty for a subnet without
	// IPv6.
	IPv6CIDR string            `json:"ipv6Cidr,omitempty"`
	Zone     string            `json:"zone"`
	Tags     map[string]string `json:"tags,omitempty"`
}

// SecurityGroupSpec seeds one security group.
type SecurityGroupSpec struct {
	ID          string            `json:"id,omitempty"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// InstanceSpec seeds running instances, each with its primary ENI (device
// index 0, DeleteOnTermination) holding the next free address of its subnet
// unless PrivateIP says otherwise.
type InstanceSpec struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	Type string `json:"type"`
	// Subnet is a subnet ID or name.
	Subnet string `json:"subnet"`
	// SecurityGroups are IDs or names in the subnet's VPC; the VPC's default
	// group when empty.
	SecurityGroups []string          `json:"securityGroups,omitempty"`
	PrivateIP      string            `json:"privateIP,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
	// SecondaryIPs are extra addresses already on the primary ENI.
	SecondaryIPs int `json:"secondaryIPs,omitempty"`
	// IPv6Addresses and IPv6Prefixes (/80s) are already on the primary
	// ENI; its subnet needs an IPv6 CIDR.
	IPv6Addresses int `json:"ipv6Addresses,omitempty"`
	IPv6Prefixes  int `json:"ipv6Prefixes,omitempty"`
	// ENIs are secondary ENIs already attached, to test adoption.
	ENIs []ENISpec `json:"enis,omitempty"`
	// Count > 1 creates that many alike instances, named Name-1, Name-2, ...;
	// ID and PrivateIP must then be empty.
	Count int `json:"count,omitempty"`
}

// ENISpec seeds a secondary ENI attached to an instance: for adoption
// tests, or the EFAs and other-card interfaces a type boots with.
type ENISpec struct {
	DeviceIndex int `json:"deviceIndex"`
	// NetworkCard is the attachment's network card index (0 by default).
	NetworkCard int `json:"networkCard,omitempty"`
	// InterfaceType is interface (the default), efa, efa-only, trunk or
	// branch; an efa-only ENI holds no address.
	InterfaceType string `json:"interfaceType,omitempty"`
	// Subnet defaults to the instance's.
	Subnet       string `json:"subnet,omitempty"`
	Description  string `json:"description,omitempty"`
	SecondaryIPs int    `json:"secondaryIPs,omitempty"`
	Prefixes     int    `json:"prefixes,omitempty"`
	// IPv6Addresses and IPv6Prefixes (/80s), in a subnet with IPv6.
	IPv6Addresses       int               `json:"ipv6Addresses,omitempty"`
	IPv6Prefixes        int               `json:"ipv6Prefixes,omitempty"`
	DeleteOnTermination bool              `json:"deleteOnTermination,omitempty"`
	Tags                map[string]string `json:"tags,omitempty"`
}

// ScenarioError says which part of a scenario is wrong.
type ScenarioError struct {
	Path string
	Err  error
}

func (e *ScenarioError) Error() string { return "scenario: " + e.Path + ": " + e.Err.Error() }
func (e *ScenarioError) Unwrap() error { return e.Err }

func scenarioErr(path string, format string, args ...any) error {
	return &ScenarioError{Path: path, Err: fmt.Errorf(format, args...)}
}

// DemoScenario returns the built-in scenario of `make demo`: one VPC
// 10.0.0.0/16 over two zones, tagged node and pod subnets, two security
// groups and three instances of different types.
func DemoScenario() *Scenario {
	sc, err := ParseScenario(demoYAML)
	if err != nil {
		panic(fmt.Sprintf("ec2sim: embedded demo scenario: %v", err))
	}
	return sc
}

// LoadScenario reads a scenario file; the name "demo" returns DemoScenario.
func LoadScenario(path string) (*Scenario, error) {
	if path == "demo" {
		return DemoScenario(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario, %w", err)
	}
	return ParseScenario(b)
}

// ParseScenario decodes YAML (or JSON), rejecting unknown fields, and
// validates the result. Under the realistic profile a timing section
// changes only the fields it names: the others keep RealisticTiming's.
func ParseScenario(b []byte) (*Scenario, error) {
	var sc Scenario
	if err := yaml.UnmarshalStrict(b, &sc); err != nil {
		return nil, &ScenarioError{Path: "(document)", Err: err}
	}
	if sc.Profile == ProfileRealistic && sc.Timing != nil {
		var raw struct {
			Timing json.RawMessage `json:"timing"`
		}
		js, err := yaml.YAMLToJSON(b)
		if err == nil {
			err = json.Unmarshal(js, &raw)
		}
		t := RealisticTiming()
		if err == nil {
			err = json.Unmarshal(raw.Timing, &t)
		}
		if err != nil {
			return nil, &ScenarioError{Path: "timing", Err: err}
		}
		sc.Timing = &t
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return &sc, nil
}

var (
	accountRE = regexp.MustCompile(`^[0-9]{12}$`)
	regionRE  = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
)

// Validate checks what can be checked without building the state: shapes of
// fields, CIDR sizes and nesting, zone names, references by name. Conflicts
// between resources (an address already taken, a device index twice) are
// found when the state is built.
func (sc *Scenario) Validate() error {
	if !accountRE.MatchString(sc.Account) {
		return scenarioErr("account", "%q is not 12 digits", sc.Account)
	}
	if !regionRE.MatchString(sc.Region) {
		return scenarioErr("region", "%q is not a region name like us-east-1", sc.Region)
	}
	if _, err := sc.IAMPrincipals(); err != nil {
		return err
	}
	if len(sc.Zones) == 0 {
		return scenarioErr("zones", "at least one zone is needed")
	}
	zones := map[string]bool{}
	for i, z := range sc.Zones {
		if !strings.HasPrefix(z, sc.Region) || len(z) != len(sc.Region)+1 || z[len(z)-1] < 'a' || z[len(z)-1] > 'z' {
			return scenarioErr(fmt.Sprintf("zones[%d]", i), "%q is not a zone of %s", z, sc.Region)
		}
		zones[z] = true
	}
	for i, t := range sc.InstanceTypes {
		if err := t.Validate(); err != nil {
			return &ScenarioError{Path: fmt.Sprintf("instanceTypes[%d]", i), Err: err}
		}
	}
	if len(sc.VPCs) == 0 {
		return scenarioErr("vpcs", "at least one VPC is needed")
	}
	for i, v := range sc.VPCs {
		if err := v.validate(fmt.Sprintf("vpcs[%d]", i), zones); err != nil {
			return err
		}
	}
	for i, in := range sc.Instances {
		if err := in.validate(fmt.Sprintf("instances[%d]", i)); err != nil {
			return err
		}
	}
	if sc.ElasticIPLimit < 0 {
		return scenarioErr("elasticIPLimit", "negative")
	}
	if limit := cmp.Or(sc.ElasticIPLimit, 5); len(sc.ElasticIPs) > limit {
		return scenarioErr("elasticIPs", "%d addresses over the limit of %d (elasticIPLimit)", len(sc.ElasticIPs), limit)
	}
	if sc.Profile != "" && sc.Profile != ProfileRealistic {
		return scenarioErr("profile", "%q is not %q", sc.Profile, ProfileRealistic)
	}
	if sc.Timing != nil {
		if err := sc.Timing.Validate(); err != nil {
			return &ScenarioError{Path: "timing", Err: err}
		}
	}
	if err := sc.Throttling.Validate(); err != nil {
		return &ScenarioError{Path: "throttling", Err: err}
	}
	if sc.Latency != nil {
		if err := sc.Latency.Validate(); err != nil {
			return &ScenarioError{Path: "latency", Err: err}
		}
	}
	if err := sc.Faults.Validate(); err != nil {
		return &ScenarioError{Path: "faults", Err: err}
	}
	if err := validSubnetFullError(sc.SubnetFullError); err != nil {
		return &ScenarioError{Path: "subnetFullError", Err: err}
	}
	return nil
}

func (v VPCSpec) validate(path string, zones map[string]bool) error {
	if v.ID != "" && !wellFormedID(v.ID, "vpc") {
		return scenarioErr(path+".id", "%q is not a VPC ID", v.ID)
	}
	if len(v.CIDRs) == 0 || len(v.CIDRs) > 5 {
		return scenarioErr(path+".cidrs", "a VPC has 1 to 5 IPv4 CIDRs, got %d", len(v.CIDRs))
	}
	var cidrs []netip.Prefix
	for j, c := range v.CIDRs {
		p, err := parseCIDR(c)
		if err != nil {
			return &ScenarioError{Path: fmt.Sprintf("%s.cidrs[%d]", path, j), Err: err}
		}
		for _, q := range cidrs {
			if p.Overlaps(q) {
				return scenarioErr(fmt.Sprintf("%s.cidrs[%d]", path, j), "%s overlaps %s", p, q)
			}
		}
		cidrs = append(cidrs, p)
	}
	var vpc6 netip.Prefix
	if v.IPv6CIDR != "" {
		p, err := parseIPv6CIDR(v.IPv6CIDR, 56)
		if err != nil {
			return &ScenarioError{Path: path + ".ipv6Cidr", Err: err}
		}
		vpc6 = p
	}
	subnets6 := map[netip.Prefix]bool{}
	var subnets []netip.Prefix
	for j, s := range v.Subnets {
		sp := fmt.Sprintf("%s.subnets[%d]", path, j)
		if s.ID != "" && !wellFormedID(s.ID, "subnet") {
			return scenarioErr(sp+".id", "%q is not a subnet ID", s.ID)
		}
		p, err := parseCIDR(s.CIDR)
		if err != nil {
			return &ScenarioError{Path: sp + ".cidr", Err: err}
		}
		inside := false
		for _, c := range cidrs {
			inside = inside || (c.Contains(p.Addr()) && p.Bits() >= c.Bits())
		}
		if !inside {
			return scenarioErr(sp+".cidr", "%s is not inside the VPC's CIDRs", p)
		}
		for _, q := range subnets {
			if p.Overlaps(q) {
				return scenarioErr(sp+".cidr", "%s overlaps subnet %s", p, q)
			}
		}
		subnets = append(subnets, p)
		if !zones[s.Zone] {
			return scenarioErr(sp+".zone", "%q is not one of the scenario's zones", s.Zone)
		}
		if s.IPv6CIDR != "" {
			q, err := parseIPv6CIDR(s.IPv6CIDR, 64)
			switch {
			case err != nil:
				return &ScenarioError{Path: sp + ".ipv6Cidr", Err: err}
			case !vpc6.IsValid():
				return scenarioErr(sp+".ipv6Cidr", "the VPC has no IPv6 CIDR (ipv6Cidr)")
			case !vpc6.Contains(q.Addr()):
				return scenarioErr(sp+".ipv6Cidr", "%s is not inside the VPC's IPv6 CIDR %s", q, vpc6)
			case subnets6[q]:
				return scenarioErr(sp+".ipv6Cidr", "%s is another subnet's too", q)
			}
			subnets6[q] = true
		}
	}
	names := map[string]bool{"default": true}
	for j, g := range v.SecurityGroups {
		gp := fmt.Sprintf("%s.securityGroups[%d]", path, j)
		if g.ID != "" && !wellFormedID(g.ID, "sg") {
			return scenarioErr(gp+".id", "%q is not a security group ID", g.ID)
		}
		if g.Name == "" || names[g.Name] {
			return scenarioErr(gp+".name", "%q is empty, \"default\" or not unique in the VPC", g.Name)
		}
		names[g.Name] = true
	}
	return nil
}

func (in InstanceSpec) validate(path string) error {
	if in.ID != "" && !wellFormedID(in.ID, "i") {
		return scenarioErr(path+".id", "%q is not an instance ID", in.ID)
	}
	if in.Type == "" {
		return scenarioErr(path+".type", "empty")
	}
	if in.Subnet == "" {
		return scenarioErr(path+".subnet", "empty")
	}
	if in.PrivateIP != "" {
		if _, err := netip.ParseAddr(in.PrivateIP); err != nil {
			return &ScenarioError{Path: path + ".privateIP", Err: err}
		}
	}
	if in.Count < 0 || in.Count > 100000 {
		return scenarioErr(path+".count", "%d outside 0..100000", in.Count)
	}
	if in.Count > 1 && (in.ID != "" || in.PrivateIP != "") {
		return scenarioErr(path+".count", "id and privateIP cannot be repeated")
	}
	if in.SecondaryIPs < 0 || in.IPv6Addresses < 0 || in.IPv6Prefixes < 0 {
		return scenarioErr(path, "negative secondaryIPs, ipv6Addresses or ipv6Prefixes")
	}
	for k, e := range in.ENIs {
		if (e.NetworkCard == 0 && e.DeviceIndex < 1) || e.DeviceIndex < 0 || e.NetworkCard < 0 || e.SecondaryIPs < 0 || e.Prefixes < 0 ||
			e.IPv6Addresses < 0 || e.IPv6Prefixes < 0 {
			return scenarioErr(fmt.Sprintf("%s.enis[%d]", path, k), "device index must be >= 1 on card 0 (>= 0 on others), card and counts >= 0")
		}
	}
	return nil
}

// parseIPv6CIDR accepts an IPv6 network of exactly bits written in
// canonical form: EC2 gives a VPC a /56 and a subnet a /64 of it.
func parseIPv6CIDR(s string, bits int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil || !p.Addr().Is6() || p.Addr().Is4In6():
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv6 CIDR", s)
	case p.Bits() != bits:
		return netip.Prefix{}, fmt.Errorf("%s is a /%d, EC2 assigns a /%d here", s, p.Bits(), bits)
	case p.Masked() != p || p.String() != s:
		return netip.Prefix{}, fmt.Errorf("%q is not in canonical form (%s)", s, p.Masked())
	}
	return p, nil
}

// parseCIDR accepts an IPv4 network of /16 to /28 written in canonical form,
// the sizes EC2 allows for VPCs and subnets.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if !p.Addr().Is4() || p.Bits() < 16 || p.Bits() > 28 {
		return netip.Prefix{}, fmt.Errorf("%s: only IPv4 /16 to /28 is allowed", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%s: host bits set, the network is %s", s, p.Masked())
	}
	return p, nil
}

// errNoSuchRef is wrapped when a scenario names a subnet or group that does
// not exist.
var errNoSuchRef = errors.New("no such resource")

// ProfileRealistic is the Scenario.Profile that turns EC2's default
// throttling, RealisticLatency and RealisticTiming on.
const ProfileRealistic = "realistic"

// IAMPrincipals builds the principals that may call, keyed by access key
// ID: the scenario's own, or iam.DefaultPrincipal for its cluster name. A
// spec that cannot be used is a ScenarioError naming its field.
func (sc *Scenario) IAMPrincipals() (map[string]*iam.Principal, error) {
	ps, err := iam.Principals(sc.Principals, sc.Account, sc.ClusterName)
	if se := (*iam.SpecError)(nil); errors.As(err, &se) {
		return nil, &ScenarioError{Path: "principals" + se.Path, Err: se.Err}
	}
	return ps, err
}
