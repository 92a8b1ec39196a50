package ec2sim_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestDemoScenarioDescribesLikeEC2 reads the demo scenario back through the
// SDK: one VPC, four tagged subnets over two zones with EC2's exact free
// address counts, the default and two named security groups, the main
// route table, and three running instances of different types whose
// primary ENI sits at device index 0 with DeleteOnTermination.
func TestDemoScenarioDescribesLikeEC2(t *testing.T) {
	e := newEnv(t, nil)

	vpcs, err := e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{})
	noErr(t, err)
	if len(vpcs.Vpcs) != 1 || aws.ToString(vpcs.Vpcs[0].CidrBlock) != "10.0.0.0/16" {
		t.Fatalf("vpcs: %+v", vpcs.Vpcs)
	}
	vpcID := aws.ToString(vpcs.Vpcs[0].VpcId)

	subnets, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{
		Filters: []types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpcID}}, {Name: aws.String("tag:enipam.io/pods"), Values: []string{"true"}}},
	})
	noErr(t, err)
	if len(subnets.Subnets) != 2 {
		t.Fatalf("pod subnets: got %d, want 2", len(subnets.Subnets))
	}
	for _, sn := range subnets.Subnets {
		// A /18 has 16384 addresses, EC2 keeps five.
		if got := aws.ToInt32(sn.AvailableIpAddressCount); got != 16379 {
			t.Errorf("%s availableIpAddressCount = %d, want 16379", aws.ToString(sn.CidrBlock), got)
		}
	}
	nodesA := e.subnetByName("demo-nodes-a")
	// Two instances took one address each of the /20's 4091.
	if got := aws.ToInt32(nodesA.AvailableIpAddressCount); got != 4089 {
		t.Errorf("demo-nodes-a availableIpAddressCount = %d, want 4089", got)
	}
	if aws.ToString(nodesA.AvailabilityZoneId) != "use1-az1" {
		t.Errorf("zone id %q", aws.ToString(nodesA.AvailabilityZoneId))
	}

	groups, err := e.ec2.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{})
	noErr(t, err)
	var names []string
	for _, g := range groups.SecurityGroups {
		names = append(names, aws.ToString(g.GroupName))
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"default", "demo-nodes", "demo-pods"}) {
		t.Errorf("groups %v", names)
	}
	byName, err := e.ec2.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{GroupNames: []string{"demo-pods"}})
	noErr(t, err)
	if len(byName.SecurityGroups) != 1 {
		t.Errorf("by name: %d groups", len(byName.SecurityGroups))
	}

	rts, err := e.ec2.DescribeRouteTables(e.ctx, &ec2.DescribeRouteTablesInput{
		Filters: []types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpcID}}, {Name: aws.String("association.main"), Values: []string{"true"}}},
	})
	noErr(t, err)
	if len(rts.RouteTables) != 1 || aws.ToString(rts.RouteTables[0].Routes[0].DestinationCidrBlock) != "10.0.0.0/16" ||
		aws.ToString(rts.RouteTables[0].Routes[0].GatewayId) != "local" {
		t.Errorf("route tables: %+v", rts.RouteTables)
	}

	insts, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{})
	noErr(t, err)
	var typesSeen []string
	for _, r := range insts.Reservations {
		for _, in := range r.Instances {
			typesSeen = append(typesSeen, string(in.InstanceType))
			if in.State.Name != types.InstanceStateNameRunning || aws.ToInt32(in.State.Code) != 16 {
				t.Errorf("%s state %+v", aws.ToString(in.InstanceId), in.State)
			}
			if len(in.NetworkInterfaces) != 1 {
				t.Fatalf("%s has %d ENIs", aws.ToString(in.InstanceId), len(in.NetworkInterfaces))
			}
			ni := in.NetworkInterfaces[0]
			if aws.ToInt32(ni.Attachment.DeviceIndex) != 0 || !aws.ToBool(ni.Attachment.DeleteOnTermination) ||
				ni.Attachment.Status != types.AttachmentStatusAttached ||
				aws.ToString(ni.PrivateIpAddress) != aws.ToString(in.PrivateIpAddress) {
				t.Errorf("%s primary ENI %+v", aws.ToString(in.InstanceId), ni)
			}
		}
	}
	slices.Sort(typesSeen)
	if !slices.Equal(typesSeen, []string{"m5.4xlarge", "m5.large", "t3.medium"}) {
		t.Errorf("instance types %v", typesSeen)
	}
}

// TestDescribeInstanceTypesReportsRealLimits checks the catalog through
// DescribeInstanceTypes, the way an operator learns ENI and IP limits,
// including paging through the whole catalog.
func TestDescribeInstanceTypesReportsRealLimits(t *testing.T) {
	e := newEnv(t, nil)
	want := map[string][2]int32{
		"t3.medium": {3, 6}, "m5.large": {3, 10}, "m5.xlarge": {4, 15}, "m5.4xlarge": {8, 30},
		"c5.9xlarge": {8, 30}, "m6i.32xlarge": {15, 50}, "c6i.large": {3, 10}, "r5.16xlarge": {15, 50},
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	out, err := e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: toInstanceTypes(names)})
	noErr(t, err)
	if len(out.InstanceTypes) != len(want) {
		t.Fatalf("got %d types", len(out.InstanceTypes))
	}
	for _, it := range out.InstanceTypes {
		w := want[string(it.InstanceType)]
		ni := it.NetworkInfo
		if aws.ToInt32(ni.MaximumNetworkInterfaces) != w[0] || aws.ToInt32(ni.Ipv4AddressesPerInterface) != w[1] ||
			aws.ToInt32(ni.Ipv6AddressesPerInterface) != w[1] || it.Hypervisor != types.InstanceTypeHypervisorNitro {
			t.Errorf("%s: %+v hypervisor %q", it.InstanceType, ni, it.Hypervisor)
		}
	}

	total := 0
	pages := ec2.NewDescribeInstanceTypesPaginator(e.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(10)})
	for pages.HasMorePages() {
		p, err := pages.NextPage(e.ctx)
		noErr(t, err)
		if len(p.InstanceTypes) > 10 {
			t.Fatalf("page of %d", len(p.InstanceTypes))
		}
		total += len(p.InstanceTypes)
	}
	if total != len(ec2sim.Catalog()) || total < 1300 {
		t.Errorf("paged %d types, the catalog has %d", total, len(ec2sim.Catalog()))
	}
	_, err = e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.huge"}})
	wantCode(t, err, "InvalidInstanceType")
	filtered, err := e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{
		Filters: []types.Filter{{Name: aws.String("network-info.maximum-network-interfaces"), Values: []string{"15"}}, {Name: aws.String("instance-type"), Values: []string{"m6i.*"}}},
	})
	noErr(t, err)
	if len(filtered.InstanceTypes) != 4 {
		t.Errorf("m6i with 15 ENIs: got %d, want 4 (16xlarge, 24xlarge, 32xlarge, metal)", len(filtered.InstanceTypes))
	}
}

// TestDescribeInstanceTypesPagesLikeEC2: without MaxResults the answer is
// still paged, 100 types a page with a NextToken until the last, in name
// order, every type exactly once; MaxResults outside 5..100 is refused;
// the architecture filter finds Graviton types.
func TestDescribeInstanceTypesPagesLikeEC2(t *testing.T) {
	e := newEnv(t, nil)
	catalog := ec2sim.Catalog()
	var seen []string
	var in ec2.DescribeInstanceTypesInput
	pages := 0
	for {
		out, err := e.ec2.DescribeInstanceTypes(e.ctx, &in)
		noErr(t, err)
		pages++
		last := out.NextToken == nil
		if want := min(100, len(catalog)-len(seen)); len(out.InstanceTypes) != want {
			t.Fatalf("page %d: %d types, want %d", pages, len(out.InstanceTypes), want)
		}
		for _, it := range out.InstanceTypes {
			seen = append(seen, string(it.InstanceType))
		}
		if last {
			break
		}
		in.NextToken = out.NextToken
	}
	var want []string
	for _, it := range catalog {
		want = append(want, it.Name)
	}
	if !slices.Equal(seen, want) || pages != (len(want)+99)/100 {
		t.Errorf("%d pages of %d types, want every one of %d in name order", pages, len(seen), len(want))
	}
	for _, bad := range []int32{4, 101} {
		_, err := e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(bad)})
		wantCode(t, err, "InvalidParameterValue")
	}

	arm := 0
	p := ec2.NewDescribeInstanceTypesPaginator(e.ec2, &ec2.DescribeInstanceTypesInput{
		Filters: []types.Filter{{Name: aws.String("processor-info.supported-architecture"), Values: []string{"arm64"}}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(e.ctx)
		noErr(t, err)
		for _, it := range page.InstanceTypes {
			if it.ProcessorInfo == nil || !slices.Equal(it.ProcessorInfo.SupportedArchitectures, []types.ArchitectureType{types.ArchitectureTypeArm64}) {
				t.Errorf("%s: %+v", it.InstanceType, it.ProcessorInfo)
			}
			arm++
		}
	}
	wantArm := 0
	for _, it := range catalog {
		if it.Architecture == "arm64" {
			wantArm++
		}
	}
	if arm != wantArm || arm < 300 {
		t.Errorf("%d arm64 types, the catalog has %d", arm, wantArm)
	}
}

func toInstanceTypes(names []string) []types.InstanceType {
	var out []types.InstanceType
	for _, n := range names {
		out = append(out, types.InstanceType(n))
	}
	return out
}

// TestDescribeByUnknownOrMalformedIDFails covers the NotFound and Malformed
// codes of every describe that takes IDs.
func TestDescribeByUnknownOrMalformedIDFails(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0123456789abcdef0"}})
	wantCode(t, err, "InvalidSubnetID.NotFound")
	_, err = e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"nope"}})
	wantCode(t, err, "InvalidSubnetID.Malformed")
	_, err = e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{VpcIds: []string{"vpc-0123456789abcdef0"}})
	wantCode(t, err, "InvalidVpcID.NotFound")
	_, err = e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	_, err = e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-xyz"}})
	wantCode(t, err, "InvalidInstanceID.Malformed")
	_, err = e.ec2.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0123456789abcdef0"}})
	wantCode(t, err, "InvalidGroup.NotFound")
	_, err = e.ec2.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{GroupNames: []string{"nope"}})
	wantCode(t, err, "InvalidGroup.NotFound")
	_, err = e.ec2.DescribeRouteTables(e.ctx, &ec2.DescribeRouteTablesInput{RouteTableIds: []string{"rtb-0123456789abcdef0"}})
	wantCode(t, err, "InvalidRouteTableID.NotFound")
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-0123456789abcdef0"}})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-"}})
	wantCode(t, err, "InvalidNetworkInterfaceID.Malformed")
	_, err = e.ec2.DescribeAddresses(e.ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{"eipalloc-0123456789abcdef0"}})
	wantCode(t, err, "InvalidAllocationID.NotFound")
}

// TestDescribeFiltersFollowEC2Rules checks filter semantics on instances:
// values of one filter OR, filters AND, wildcards, tag filters, and an
// unknown filter name failing with InvalidParameterValue.
func TestDescribeFiltersFollowEC2Rules(t *testing.T) {
	e := newEnv(t, nil)
	count := func(fs ...types.Filter) int {
		t.Helper()
		out, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{Filters: fs})
		noErr(t, err)
		return len(out.Reservations)
	}
	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}
	cases := []struct {
		name    string
		filters []types.Filter
		want    int
	}{
		{"one value", []types.Filter{f("instance-type", "m5.large")}, 1},
		{"values OR", []types.Filter{f("instance-type", "m5.large", "t3.medium")}, 2},
		{"filters AND", []types.Filter{f("instance-type", "m5.large", "t3.medium"), f("availability-zone", "us-east-1b")}, 1},
		{"wildcard *", []types.Filter{f("instance-type", "m5.*")}, 2},
		{"wildcard ?", []types.Filter{f("tag:Name", "demo-node-?1")}, 2},
		{"tag key", []types.Filter{f("tag-key", "kubernetes.io/cluster/demo")}, 3},
		{"tag value miss", []types.Filter{f("tag:kubernetes.io/cluster/demo", "shared")}, 0},
		{"address", []types.Filter{f("private-ip-address", "10.0.16.4")}, 1},
		{"state", []types.Filter{f("instance-state-name", "running")}, 3},
	}
	for _, c := range cases {
		if got := count(c.filters...); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
	_, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{f("no-such-filter", "x")}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{f("instance-type", "x")}})
	wantCode(t, err, "InvalidParameterValue")
}
