package ec2sim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestDescribeNetworkInterfacesFiltersAnOperatorUses builds a node with two
// secondary ENIs and a leaked ENI, then asks the questions an operator
// asks: ENIs of an instance, of a subnet, leaked ones by tag and status,
// who holds an address (exact and wildcard), by attachment status.
func TestDescribeNetworkInterfacesFiltersAnOperatorUses(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-m5")
	tagged := func(n int32, cluster string) types.NetworkInterface {
		out, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{
			SubnetId: e.subnetByName("big").SubnetId, SecondaryPrivateIpAddressCount: aws.Int32(n),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface,
				Tags: []types.Tag{{Key: aws.String("enipam.io/cluster"), Value: aws.String(cluster)}}}},
		})
		noErr(t, err)
		return *out.NetworkInterface
	}
	one, two, leaked, foreign := tagged(2, "c1"), tagged(3, "c1"), tagged(1, "c1"), tagged(0, "other")
	for i, ni := range []types.NetworkInterface{one, two} {
		_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(int32(i + 1))})
		noErr(t, err)
	}
	ids := func(fs ...types.Filter) []string {
		t.Helper()
		var out []string
		pages := ec2.NewDescribeNetworkInterfacesPaginator(e.ec2, &ec2.DescribeNetworkInterfacesInput{Filters: fs, MaxResults: aws.Int32(5)})
		for pages.HasMorePages() {
			p, err := pages.NextPage(e.ctx)
			noErr(t, err)
			for _, ni := range p.NetworkInterfaces {
				out = append(out, aws.ToString(ni.NetworkInterfaceId))
			}
		}
		return out
	}
	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}
	id := func(ni types.NetworkInterface) string { return aws.ToString(ni.NetworkInterfaceId) }
	primary := aws.ToString(node.NetworkInterfaces[0].NetworkInterfaceId)

	cases := []struct {
		name    string
		filters []types.Filter
		want    []string
	}{
		{"instance", []types.Filter{f("attachment.instance-id", aws.ToString(node.InstanceId))}, []string{primary, id(one), id(two)}},
		{"leaked", []types.Filter{f("tag:enipam.io/cluster", "c1"), f("status", "available")}, []string{id(leaked)}},
		{"tag key", []types.Filter{f("tag-key", "enipam.io/cluster")}, []string{id(one), id(two), id(leaked), id(foreign)}},
		{"exact address", []types.Filter{f("private-ip-address", addresses(two)[2])}, []string{id(two)}},
		{"address wildcard", []types.Filter{f("addresses.private-ip-address", "10.1.1.1?")}, []string{id(two), id(leaked), id(foreign)}},
		{"attached", []types.Filter{f("attachment.status", "attached"), f("vpc-id", aws.ToString(node.VpcId))}, nil},
		{"device index", []types.Filter{f("attachment.device-index", "2")}, []string{id(two)}},
		{"subnet and not", []types.Filter{f("subnet-id", aws.ToString(e.subnetByName("tiny").SubnetId))}, nil},
		{"mac", []types.Filter{f("mac-address", aws.ToString(one.MacAddress))}, []string{id(one)}},
		{"group", []types.Filter{f("group-name", "nodes")}, []string{primary}},
	}
	for _, c := range cases {
		got := ids(c.filters...)
		if c.name == "attached" {
			if len(got) != 4 { // two instances' primaries and the two secondaries
				t.Errorf("attached: %v", got)
			}
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDescribeNetworkInterfacesPagination pages through 60 ENIs five at a
// time and checks every ENI comes exactly once, in creation order; bad page
// sizes and tokens, and IDs with MaxResults, fail as on EC2.
func TestDescribeNetworkInterfacesPagination(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	var want []string
	// Two from the instances, sixty created.
	all, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{})
	noErr(t, err)
	for _, ni := range all.NetworkInterfaces {
		want = append(want, aws.ToString(ni.NetworkInterfaceId))
	}
	for range 60 {
		want = append(want, aws.ToString(e.createENI("big", 0).NetworkInterfaceId))
	}
	var got []string
	pages := 0
	p := ec2.NewDescribeNetworkInterfacesPaginator(e.ec2, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		page, err := p.NextPage(e.ctx)
		noErr(t, err)
		pages++
		for _, ni := range page.NetworkInterfaces {
			got = append(got, aws.ToString(ni.NetworkInterfaceId))
			if pages == 3 && len(got) == 11 {
				// Deleting behind the cursor does not disturb the walk.
				_, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(want[5])})
				noErr(t, err)
			}
		}
	}
	if !slices.Equal(got, want) || pages != 13 {
		t.Errorf("paged %d ENIs in %d pages, want %d in 13", len(got), pages, len(want))
	}

	for _, n := range []int32{4, 1001} {
		_, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(n)})
		wantCode(t, err, "InvalidParameterValue")
	}
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5), NextToken: aws.String("garbage")})
	wantCode(t, err, "InvalidPaginationToken")
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5), NetworkInterfaceIds: want[:1]})
	wantCode(t, err, "InvalidParameterCombination")
	// A token from one kind of describe is not valid for another.
	inst, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	noErr(t, err)
	if inst.NextToken != nil {
		t.Fatalf("two instances fit one page, got token %q", aws.ToString(inst.NextToken))
	}
	page1, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)})
	noErr(t, err)
	_, err = e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{MaxResults: aws.Int32(5), NextToken: page1.NextToken})
	wantCode(t, err, "InvalidPaginationToken")
}

// TestEventualConsistencyHidesNewENIs turns on a 2 s window: a fresh ENI is
// NotFound by ID and missing from lists until the window has passed.
func TestEventualConsistencyHidesNewENIs(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{EventualConsistency: ec2sim.Duration(2 * time.Second)}))
	ni := e.createENI("big", 0)
	_, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*ni.NetworkInterfaceId}})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	list, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{})
	noErr(t, err)
	if len(list.NetworkInterfaces) != 2 {
		t.Errorf("list shows %d ENIs inside the window, want the 2 old ones", len(list.NetworkInterfaces))
	}
	e.clock.Advance(2 * time.Second)
	if got := e.eni(*ni.NetworkInterfaceId); got.Status != types.NetworkInterfaceStatusAvailable {
		t.Errorf("after the window: %s", got.Status)
	}
}

// TestDescribeNetworkInterfacesIndexesStayCorrect exercises the index
// paths (instance, subnet, address) after addresses moved and ENIs were
// deleted, comparing each with the same question answered by a full scan
// (a wildcard defeats the index).
func TestDescribeNetworkInterfacesIndexesStayCorrect(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	a, b := e.createENI("big", 3), e.createENI("big", 3)
	moved := addresses(a)[2]
	_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{moved}, AllowReassignment: aws.Bool(true)})
	noErr(t, err)
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: a.NetworkInterfaceId})
	noErr(t, err)
	for _, q := range []struct{ name, exact, wildcard string }{
		{"private-ip-address", moved, moved[:len(moved)-1] + "?"},
		{"subnet-id", aws.ToString(a.SubnetId), aws.ToString(a.SubnetId) + "*"},
		{"attachment.instance-id", aws.ToString(e.instanceByName("node-m5").InstanceId), aws.ToString(e.instanceByName("node-m5").InstanceId) + "*"},
	} {
		exact := describeIDs(t, e, types.Filter{Name: aws.String(q.name), Values: []string{q.exact}})
		scan := describeIDs(t, e, types.Filter{Name: aws.String(q.name), Values: []string{q.wildcard}})
		if q.name == "private-ip-address" {
			// The wildcard matches neighbours too; the exact answer must be b.
			if !slices.Equal(exact, []string{aws.ToString(b.NetworkInterfaceId)}) {
				t.Errorf("%s: exact %v", q.name, exact)
			}
			continue
		}
		if !slices.Equal(exact, scan) || len(exact) == 0 {
			t.Errorf("%s: index %v, scan %v", q.name, exact, scan)
		}
	}
}

func describeIDs(t *testing.T, e *env, fs ...types.Filter) []string {
	t.Helper()
	out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: fs})
	noErr(t, err)
	var ids []string
	for _, ni := range out.NetworkInterfaces {
		ids = append(ids, aws.ToString(ni.NetworkInterfaceId))
	}
	return ids
}
