package cloudfake_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// scenarioYAML: one VPC with two CIDRs, a /24 and a tiny /28 (11 free
// addresses) in one zone and a /24 in another, an m5.large (3 ENIs, 10
// addresses each) and a t3.medium (3 ENIs, 6 addresses).
const scenarioYAML = `
account: "111122223333"
region: eu-west-1
seed: 11
zones: [eu-west-1a, eu-west-1b]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.1.0.0/16, 100.64.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, name: big, cidr: 10.1.1.0/24, zone: eu-west-1a, tags: {role: pods}}
  - {id: subnet-0a000000000000002, name: tiny, cidr: 10.1.0.0/28, zone: eu-west-1a}
  - {id: subnet-0a000000000000003, name: far, cidr: 10.1.2.0/24, zone: eu-west-1b}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
instances:
- {id: i-0a000000000000001, name: node-m5, type: m5.large, subnet: big, securityGroups: [nodes]}
- {id: i-0a000000000000002, name: node-t3, type: t3.medium, subnet: big, secondaryIPs: 2}
`

const (
	vpcID   = "vpc-0a000000000000001"
	big     = "subnet-0a000000000000001"
	tiny    = "subnet-0a000000000000002"
	far     = "subnet-0a000000000000003"
	group   = "sg-0a000000000000001"
	nodeM5  = "i-0a000000000000001"
	nodeT3  = "i-0a000000000000002"
	noENI   = "eni-0123456789abcdef0"
	noInst  = "i-0123456789abcdef0"
	cluster = "c1"
)

// twins are two identical emulated accounts: one behind the fake, one
// behind HTTP and the operator's real EC2 adapter.
type twins struct {
	clock *ec2sim.ManualClock
	fake  *cloudfake.Cloud
	wire  *ec2.Client
	sim   *ec2sim.Sim
}

func newTwins(t *testing.T) *twins {
	t.Helper()
	return newTwinsOf(t, scenarioYAML)
}

// newTwinsOf is newTwins for another scenario.
func newTwinsOf(t *testing.T, scenarioYAML string) *twins {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(scenarioYAML))
	if err != nil {
		t.Fatal(err)
	}
	clk := ec2sim.NewManualClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	st, err := ec2sim.NewState(sc, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	sc2, _ := ec2sim.ParseScenario([]byte(scenarioYAML))
	sc2.ClusterName = cluster // the wire twin answers under the operator's IAM policy
	sim, err := ec2sim.New(sc2, ec2sim.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	opts := ec2.DefaultOptions()
	opts.Endpoint, opts.RateScale, opts.MaxAttempts = srv.URL, 1000, 1
	cfg := aws.Config{Region: "eu-west-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: ec2sim.DefaultAccessKeyID, SecretAccessKey: ec2sim.DefaultSecretAccessKey}, nil
	})}
	wire, err := ec2.New(cfg, opts, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return &twins{clock: clk, fake: cloudfake.New(st), wire: wire, sim: sim}
}

// both applies a change of timing or the like to the two accounts.
func (tw *twins) both(t *testing.T, f func(*ec2sim.State) error) {
	t.Helper()
	for _, st := range []*ec2sim.State{tw.fake.State(), tw.sim.State()} {
		if err := f(st); err != nil {
			t.Fatal(err)
		}
	}
}

// outcome is what a caller sees of one call: its result and its error,
// without the request ID only the wire has.
type outcome struct {
	Result any
	Err    errorView
}

type errorView struct {
	Action, Code, Message, Kind, Text string
}

func view(err error) errorView {
	var ce *cloud.Error
	if errors.As(err, &ce) {
		return errorView{Action: ce.Action, Code: ce.Code, Message: ce.Message, Kind: ce.Kind.Error()}
	}
	if err != nil {
		return errorView{Text: err.Error()}
	}
	return errorView{}
}

var netipEqual = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// step is one call of a script, made the same way on either side.
type step struct {
	name string
	call func(ctx context.Context, api cloud.API) (any, error)
	// want is the error kind expected (nil: success), to keep the script
	// honest about what it exercises.
	want error
}

// run makes each step on the fake and on the wire, fails where the two
// disagree, and returns the fake's results.
func (tw *twins) run(t *testing.T, steps []step) []any {
	t.Helper()
	ctx := context.Background()
	var results []any
	for _, s := range steps {
		fr, ferr := s.call(ctx, tw.fake)
		wr, werr := s.call(ctx, tw.wire)
		fake, wire := outcome{fr, view(ferr)}, outcome{wr, view(werr)}
		if d := cmp.Diff(wire, fake, netipEqual); d != "" {
			t.Errorf("%s: fake and wire differ (-wire +fake):\n%s", s.name, d)
		}
		if !errors.Is(ferr, s.want) || (s.want == nil && ferr != nil) {
			t.Errorf("%s: got %v, want %v", s.name, ferr, s.want)
		}
		results = append(results, fr)
	}
	return results
}

// The steps below are small adapters so that a script reads as calls.

func describeVPC(id string) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return api.DescribeVPC(ctx, id) }
}

func create(req cloud.CreateENIRequest) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return api.CreateENI(ctx, req) }
}

func attach(eni, instance string, index int) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return api.AttachENI(ctx, eni, instance, index) }
}

func assign(eni string, n int) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return api.AssignIPs(ctx, eni, n) }
}

func assignPrefixes(eni string, n int) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return api.AssignPrefixes(ctx, eni, n) }
}

func unassign(eni string, ips ...string) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) {
		var addrs []netip.Addr
		for _, ip := range ips {
			addrs = append(addrs, netip.MustParseAddr(ip))
		}
		return nil, api.UnassignIPs(ctx, eni, addrs)
	}
}

func unassignPrefixes(eni string, prefixes ...string) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) {
		var ps []netip.Prefix
		for _, p := range prefixes {
			ps = append(ps, netip.MustParsePrefix(p))
		}
		return nil, api.UnassignPrefixes(ctx, eni, ps)
	}
}

func deleteENI(eni string) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return nil, api.DeleteENI(ctx, eni) }
}

func getENIs(ids ...string) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return api.GetENIs(ctx, ids) }
}

func getInstances(ids ...string) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) {
		in, enis, err := api.GetInstances(ctx, ids)
		return []any{in, enis}, err
	}
}

func listENIs(ctx context.Context, api cloud.API) (any, error) { return api.ListENIs(ctx, vpcID, nil) }

// TestFakeMatchesAdapter is the no-drift proof: the same script run through
// the fake and through the operator's SDK adapter against ec2sim over HTTP
// gives the same answers, successes and errors alike: describes of every
// kind, create (tags, addresses, prefixes, idempotent token, full subnet),
// attach (limits, busy index, other zone, unknown IDs), assign to the
// limit, idempotent unassign of addresses and prefixes, delete, and the
// orphans GetInstances finds.
func TestFakeMatchesAdapter(t *testing.T) {
	tw := newTwins(t)
	tags := map[string]string{cloud.TagCluster: cluster, cloud.TagInstance: nodeT3, cloud.TagManagedBy: cloud.ManagedBy}
	res := tw.run(t, []step{
		{"describe VPC", describeVPC(vpcID), nil},
		{"describe missing VPC", describeVPC("vpc-0123456789abcdef0"), cloud.ErrNotFound},
		{"list subnets", func(ctx context.Context, api cloud.API) (any, error) { return api.ListSubnets(ctx, vpcID) }, nil},
		{"list groups", func(ctx context.Context, api cloud.API) (any, error) { return api.ListSecurityGroups(ctx, vpcID) }, nil},
		{"list instances", func(ctx context.Context, api cloud.API) (any, error) { return api.ListInstances(ctx, vpcID, nil) }, nil},
		{"instance types", func(ctx context.Context, api cloud.API) (any, error) {
			return api.InstanceTypes(ctx, []string{"m5.large", "t3.medium", "x9.nope"})
		}, nil},
		{"get instances", getInstances(nodeM5, nodeT3, noInst), nil},
		{"get no instance", getInstances(), cloud.ErrInvalid},
		{"create", create(cloud.CreateENIRequest{SubnetID: big, SecurityGroups: []string{group}, Description: "pods", Tags: tags, SecondaryIPs: 4}), nil},
		{"create with token", create(cloud.CreateENIRequest{SubnetID: big, SecondaryIPs: 1, ClientToken: "tok-1"}), nil},
		{"create with token again", create(cloud.CreateENIRequest{SubnetID: big, SecondaryIPs: 1, ClientToken: "tok-1"}), nil},
		{"create with prefixes", create(cloud.CreateENIRequest{SubnetID: big, Prefixes: 2, Tags: tags}), nil},
		{"create in full subnet", create(cloud.CreateENIRequest{SubnetID: tiny, SecondaryIPs: 11}), cloud.ErrSubnetFull},
		{"create prefix in tiny subnet", create(cloud.CreateENIRequest{SubnetID: tiny, Prefixes: 1}), cloud.ErrSubnetFull},
		{"create too many addresses", create(cloud.CreateENIRequest{SubnetID: big, SecondaryIPs: 64}), cloud.ErrIPLimit},
		{"create in missing subnet", create(cloud.CreateENIRequest{SubnetID: "subnet-0123456789abcdef0"}), cloud.ErrNotFound},
		{"create with foreign group", create(cloud.CreateENIRequest{SubnetID: big, SecurityGroups: []string{"sg-0123456789abcdef0"}}), cloud.ErrNotFound},
		{"list ENIs", listENIs, nil},
	})
	enis := res[len(res)-1].([]cloud.ENI)
	if len(enis) != 5 {
		t.Fatalf("want 2 primaries and 3 created ENIs, got %d", len(enis))
	}
	tagged, plain, prefixed := enis[2], enis[3], enis[4]
	addr := func(e cloud.ENI, i int) string { return e.IPs[i].String() }

	tw.run(t, []step{
		{"attach", attach(tagged.ID, nodeM5, 1), nil},
		{"attach again", attach(tagged.ID, nodeM5, 2), cloud.ErrInUse},
		{"attach at a busy index", attach(plain.ID, nodeM5, 1), cloud.ErrInvalid},
		{"attach beyond the type's indexes", attach(plain.ID, nodeM5, 7), cloud.ErrInvalid},
		{"attach missing ENI", attach(noENI, nodeM5, 2), cloud.ErrNotFound},
		{"attach to missing instance", attach(plain.ID, noInst, 2), cloud.ErrNotFound},
		{"attach second", attach(plain.ID, nodeM5, 2), nil},
		{"attach over the limit", attach(prefixed.ID, nodeM5, 3), cloud.ErrENILimit},
		{"delete on termination", func(ctx context.Context, api cloud.API) (any, error) {
			enis, err := api.GetENIs(ctx, []string{tagged.ID})
			if err != nil {
				return nil, err
			}
			return nil, api.SetDeleteOnTermination(ctx, tagged.ID, enis[0].AttachmentID)
		}, nil},
		{"delete on termination, wrong attachment", func(ctx context.Context, api cloud.API) (any, error) {
			return nil, api.SetDeleteOnTermination(ctx, tagged.ID, "eni-attach-0123456789abcdef0")
		}, cloud.ErrNotFound},
		{"assign", assign(tagged.ID, 3), nil},
		{"assign past the limit", assign(tagged.ID, 3), cloud.ErrIPLimit},
		{"assign on missing ENI", assign(noENI, 1), cloud.ErrNotFound},
		{"assign nothing", assign(plain.ID, 0), cloud.ErrInvalid},
		{"assign prefixes", assignPrefixes(prefixed.ID, 1), nil},
		{"unassign", unassign(tagged.ID, addr(tagged, 0), addr(tagged, 1)), nil},
		{"unassign again, idempotent", unassign(tagged.ID, addr(tagged, 0), addr(tagged, 2)), nil},
		// EC2 refuses both; the adapter finds the ENI does not hold them
		// as secondaries and has nothing left to do.
		{"unassign what it never held", unassign(tagged.ID, "10.1.1.250"), nil},
		{"unassign the primary", unassign(tagged.ID, tagged.PrimaryIP.String()), nil},
		{"unassign on missing ENI", unassign(noENI, "10.1.1.9"), cloud.ErrNotFound},
		{"unassign prefixes", unassignPrefixes(prefixed.ID, prefixed.Prefixes[0].String()), nil},
		{"unassign prefixes again", unassignPrefixes(prefixed.ID, prefixed.Prefixes[0].String(), prefixed.Prefixes[1].String()), nil},
		{"get ENIs", getENIs(tagged.ID, plain.ID, prefixed.ID, noENI), nil},
		{"get instances with orphans", getInstances(nodeM5, nodeT3), nil},
		{"delete attached", deleteENI(tagged.ID), cloud.ErrInvalid},
		{"delete", deleteENI(prefixed.ID), nil},
		{"delete again", deleteENI(prefixed.ID), cloud.ErrNotFound},
		{"list ENIs at the end", listENIs, nil},
	})
	tw.sameCalls(t)
}

// sameCalls fails unless both sides made the same EC2 calls.
func (tw *twins) sameCalls(t *testing.T) {
	t.Helper()
	wire := map[cloudfake.Action]int{}
	for action, n := range tw.sim.Counters().Calls {
		wire[cloudfake.Action(action)] = int(n)
	}
	if d := cmp.Diff(wire, tw.fake.Calls()); d != "" {
		t.Errorf("EC2 calls differ (-wire +fake):\n%s", d)
	}
}

// TestFakeMatchesAdapterUnderEventualConsistency runs both sides through a
// new ENI's lag (describes 1 s, changes 2 s): GetENIs leaves it out, then
// shows it while Attach and Assign are still NotFound, then they succeed.
// Forced subnet-full forms reach both sides as ErrSubnetFull.
func TestFakeMatchesAdapterUnderEventualConsistency(t *testing.T) {
	tw := newTwins(t)
	tw.both(t, func(st *ec2sim.State) error {
		return st.SetTiming(ec2sim.TimingConfig{EventualConsistency: ec2sim.Duration(time.Second), MutationConsistency: ec2sim.Duration(2 * time.Second)})
	})
	res := tw.run(t, []step{{"create", create(cloud.CreateENIRequest{SubnetID: big, SecondaryIPs: 1}), nil}})
	eni := res[0].(cloud.ENI)
	res = tw.run(t, []step{
		{"get the new ENI", getENIs(eni.ID), nil},
		{"attach the new ENI", attach(eni.ID, nodeM5, 1), cloud.ErrNotFound},
		{"assign on the new ENI", assign(eni.ID, 1), cloud.ErrNotFound},
		{"unassign on the new ENI", unassign(eni.ID, eni.IPs[0].String()), cloud.ErrNotFound},
		{"delete the new ENI", deleteENI(eni.ID), cloud.ErrNotFound},
	})
	if got := res[0].([]cloud.ENI); len(got) != 0 {
		t.Errorf("GetENIs shows the new ENI inside the window: %v", got)
	}
	tw.clock.Advance(time.Second)
	tw.run(t, []step{
		{"get the ENI after the describe window", getENIs(eni.ID), nil},
		{"attach inside the mutation window", attach(eni.ID, nodeM5, 1), cloud.ErrNotFound},
	})
	tw.clock.Advance(time.Second)
	tw.run(t, []step{
		{"attach after the windows", attach(eni.ID, nodeM5, 1), nil},
		{"assign after the windows", assign(eni.ID, 1), nil},
	})

	for _, code := range []string{"InsufficientFreeAddressesInSubnet", "InvalidParameterValue", "InsufficientCidrBlocks"} {
		tw.both(t, func(st *ec2sim.State) error { return st.SetSubnetFullError(code) })
		tw.run(t, []step{
			{"full subnet answering " + code, create(cloud.CreateENIRequest{SubnetID: tiny, SecondaryIPs: 11}), cloud.ErrSubnetFull},
			{"prefix in a full subnet answering " + code, create(cloud.CreateENIRequest{SubnetID: tiny, Prefixes: 1}), cloud.ErrSubnetFull},
		})
	}
	tw.sameCalls(t)
}

// TestFakeMatchesAdapterOnElasticIPs runs both sides through the Elastic
// IP calls of a node's static address: list (tags, no association), an
// association with the primary address, a second writer refused without
// reassociation, the move with it, and disassociating twice.
func TestFakeMatchesAdapterOnElasticIPs(t *testing.T) {
	tw := newTwins(t)
	for range 2 {
		tw.both(t, func(st *ec2sim.State) error {
			_, err := st.AllocateAddress(ec2sim.AllocateAddressRequest{TagSpecifications: []ec2sim.TagSpecification{{
				ResourceType: "elastic-ip", Tags: []ec2sim.Tag{{Key: "pool", Value: "egress"}},
			}}})
			return err
		})
	}
	list := func(ctx context.Context, api cloud.API) (any, error) { return api.ListAddresses(ctx) }
	res := tw.run(t, []step{
		{"list addresses", list, nil},
		{"list instances", func(ctx context.Context, api cloud.API) (any, error) { return api.ListInstances(ctx, vpcID, nil) }, nil},
	})
	addrs, instances := res[0].([]cloud.Address), res[1].([]cloud.Instance)
	if len(addrs) != 2 || addrs[0].Tags["pool"] != "egress" || addrs[0].Associated() {
		t.Fatalf("want two free tagged addresses, got %+v", addrs)
	}
	var m5, t3 cloud.ENI
	enis := tw.run(t, []step{{"list ENIs", listENIs, nil}})[0].([]cloud.ENI)
	for _, e := range enis {
		switch e.InstanceID {
		case instances[0].ID:
			m5 = e
		case instances[1].ID:
			t3 = e
		}
	}
	associate := func(alloc, eni string, ip netip.Addr, re bool) func(context.Context, cloud.API) (any, error) {
		return func(ctx context.Context, api cloud.API) (any, error) {
			_, err := api.AssociateAddress(ctx, alloc, eni, ip, re)
			return nil, err
		}
	}
	disassociate := func(ctx context.Context, api cloud.API) (any, error) {
		addrs, err := api.ListAddresses(ctx)
		if err != nil {
			return nil, err
		}
		return nil, api.DisassociateAddress(ctx, addrs[0].AssociationID)
	}
	res = tw.run(t, []step{
		{"associate", associate(addrs[0].AllocationID, m5.ID, m5.PrimaryIP, false), nil},
		{"associate taken", associate(addrs[0].AllocationID, t3.ID, t3.PrimaryIP, false), cloud.ErrInUse},
		{"associate elsewhere on the ENI", associate(addrs[1].AllocationID, m5.ID, netip.MustParseAddr("10.1.1.254"), false), cloud.ErrInvalid},
		{"associate unknown", associate("eipalloc-0123456789abcdef0", m5.ID, m5.PrimaryIP, false), cloud.ErrNotFound},
		{"move", associate(addrs[0].AllocationID, t3.ID, t3.PrimaryIP, true), nil},
		{"list after the move", list, nil},
		{"disassociate", disassociate, nil},
		{"disassociate gone", func(ctx context.Context, api cloud.API) (any, error) {
			return nil, api.DisassociateAddress(ctx, "eipassoc-0123456789abcdef0")
		}, cloud.ErrNotFound},
		{"list at the end", list, nil},
	})
	moved := res[5].([]cloud.Address)
	if moved[0].ENIID != t3.ID || moved[0].PrivateIP != t3.PrimaryIP || moved[0].InstanceID != nodeT3 {
		t.Errorf("after the move: %+v, want on %s %s", moved[0], t3.ID, t3.PrimaryIP)
	}
	if res[8].([]cloud.Address)[0].Associated() {
		t.Error("still associated after DisassociateAddress")
	}
	tw.sameCalls(t)
}

// TestFakeMatchesAdapterOnClaimElasticIPs runs both sides through the
// Elastic IP calls of a static-IP claim's public IP: allocating tagged
// addresses up to the account's limit (and one beyond it), an association
// with a secondary address, a release refused while associated, the
// address moved to another ENI (its association with it), unassigned (the
// association gone), released, and released again.
func TestFakeMatchesAdapterOnClaimElasticIPs(t *testing.T) {
	tw := newTwins(t)
	tags := map[string]string{cloud.TagCluster: cluster, cloud.TagClaim: "default/db-0", cloud.TagClaimUID: "uid-1"}
	allocate := func(ctx context.Context, api cloud.API) (any, error) { return api.AllocateAddress(ctx, tags) }
	list := func(ctx context.Context, api cloud.API) (any, error) { return api.ListAddresses(ctx) }
	release := func(id string) func(context.Context, cloud.API) (any, error) {
		return func(ctx context.Context, api cloud.API) (any, error) { return nil, api.ReleaseAddress(ctx, id) }
	}
	instances := tw.run(t, []step{{"list instances", func(ctx context.Context, api cloud.API) (any, error) { return api.ListInstances(ctx, vpcID, nil) }, nil}})[0].([]cloud.Instance)
	var m5, t3 cloud.ENI
	for _, e := range tw.run(t, []step{{"list ENIs", listENIs, nil}})[0].([]cloud.ENI) {
		switch e.InstanceID {
		case instances[0].ID:
			m5 = e
		case instances[1].ID:
			t3 = e
		}
	}
	res := tw.run(t, []step{
		{"allocate", allocate, nil},
		{"allocate", allocate, nil},
		{"allocate", allocate, nil},
		{"allocate", allocate, nil},
		{"allocate", allocate, nil},
		{"allocate beyond the limit", allocate, cloud.ErrAddressLimit},
		{"assign", assign(m5.ID, 1), nil},
	})
	first := res[0].(cloud.Address)
	if !first.PublicIP.IsValid() || first.Tags[cloud.TagClaim] != "default/db-0" {
		t.Fatalf("allocated %+v", first)
	}
	ip := res[6].([]netip.Addr)[0]
	res = tw.run(t, []step{
		{"list", list, nil},
		{"associate", func(ctx context.Context, api cloud.API) (any, error) {
			_, err := api.AssociateAddress(ctx, first.AllocationID, m5.ID, ip, false)
			return nil, err
		}, nil},
		{"release associated", release(first.AllocationID), cloud.ErrInUse},
		{"move the address", func(ctx context.Context, api cloud.API) (any, error) {
			return nil, api.AssignAddresses(ctx, t3.ID, []netip.Addr{ip}, true)
		}, nil},
		{"list after the move", list, nil},
		{"unassign", unassign(t3.ID, ip.String()), nil},
		{"list after the unassign", list, nil},
		{"release", release(first.AllocationID), nil},
		{"release again", release(first.AllocationID), cloud.ErrNotFound},
		{"list at the end", list, nil},
	})
	listed := res[0].([]cloud.Address)
	if i := slices.IndexFunc(listed, func(a cloud.Address) bool { return a.AllocationID == first.AllocationID }); i < 0 || listed[i].Tags[cloud.TagClaimUID] != "uid-1" {
		t.Errorf("the list lacks %s with its tags: %+v", first.AllocationID, listed)
	}
	find := func(list []cloud.Address) (cloud.Address, bool) {
		i := slices.IndexFunc(list, func(a cloud.Address) bool { return a.AllocationID == first.AllocationID })
		if i < 0 {
			return cloud.Address{}, false
		}
		return list[i], true
	}
	if a, _ := find(res[4].([]cloud.Address)); a.ENIID != t3.ID || a.PrivateIP != ip || a.InstanceID != nodeT3 {
		t.Errorf("after the move: %+v, want on %s %s", a, t3.ID, ip)
	}
	if a, _ := find(res[6].([]cloud.Address)); a.Associated() {
		t.Errorf("still associated once its address left: %+v", a)
	}
	if _, ok := find(res[9].([]cloud.Address)); ok {
		t.Error("still listed after ReleaseAddress")
	}
	tw.sameCalls(t)
}
