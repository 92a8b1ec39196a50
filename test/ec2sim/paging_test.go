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

func tagFilter(key, value string) types.Filter {
	return types.Filter{Name: aws.String("tag:" + key), Values: []string{value}}
}

// TestFilteredPagesAreUntidy: twelve ENIs, every third tagged, listed by
// tag five a page: as on EC2 a page is five ENIs scanned, so pages come
// short or empty and still carry a token, and the SDK's paginator walks
// them to the four tagged ENIs. A filter an index answers (subnet-id)
// pages over its matches.
func TestFilteredPagesAreUntidy(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	var tagged []string
	for i := range 12 {
		ni := e.createENI("extra", 0)
		if i%3 == 2 {
			id := aws.ToString(ni.NetworkInterfaceId)
			_, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{{Key: aws.String("pick"), Value: aws.String("me")}}})
			noErr(t, err)
			tagged = append(tagged, id)
		}
	}
	in := &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{tagFilter("pick", "me")}, MaxResults: aws.Int32(5)}
	var got []string
	var sizes []int
	for p := ec2.NewDescribeNetworkInterfacesPaginator(e.ec2, in); p.HasMorePages(); {
		out, err := p.NextPage(e.ctx)
		noErr(t, err)
		sizes = append(sizes, len(out.NetworkInterfaces))
		for _, ni := range out.NetworkInterfaces {
			got = append(got, aws.ToString(ni.NetworkInterfaceId))
		}
	}
	// 14 ENIs (the two primaries first, tagged ones 5th, 8th, 11th and
	// 14th): pages scan 5, 5 and 4.
	if !slices.Equal(got, tagged) || !slices.Equal(sizes, []int{1, 1, 2}) {
		t.Errorf("tagged ENIs %v in pages of %v; want %v in pages of [1 1 2]", got, sizes, tagged)
	}
	first, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{tagFilter("pick", "nobody")}, MaxResults: aws.Int32(5)})
	noErr(t, err)
	if len(first.NetworkInterfaces) != 0 || first.NextToken == nil {
		t.Errorf("a filter nothing matches: %d ENIs, token %v; want an empty page with a token", len(first.NetworkInterfaces), first.NextToken)
	}

	subnet := aws.ToString(e.subnetByName("extra").SubnetId)
	out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{{Name: aws.String("subnet-id"), Values: []string{subnet}}}, MaxResults: aws.Int32(12)})
	noErr(t, err)
	if len(out.NetworkInterfaces) != 12 || out.NextToken != nil {
		t.Errorf("subnet-id page: %d ENIs, token %v; want all 12, no token", len(out.NetworkInterfaces), out.NextToken)
	}
}

// TestFullPageCarriesAToken: an unfiltered page that exactly fills
// MaxResults carries a token; the page after it is empty and ends.
func TestFullPageCarriesAToken(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	out, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{MaxResults: aws.Int32(5)})
	noErr(t, err)
	if len(out.Subnets) != 4 || out.NextToken != nil {
		t.Fatalf("4 subnets, page of 5: %d, token %v", len(out.Subnets), out.NextToken)
	}
	inst, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	noErr(t, err)
	if inst.NextToken != nil {
		t.Errorf("two instances in a page of five carry token %q", aws.ToString(inst.NextToken))
	}
	for range 3 {
		_, err := e.admin.AddInstance(e.ctx, ec2sim.LaunchRequest{InstanceType: "t3.medium", SubnetID: "big"})
		noErr(t, err)
	}
	page1, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	noErr(t, err)
	if len(page1.Reservations) != 5 || page1.NextToken == nil {
		t.Fatalf("five instances, page of five: %d, token %v; want 5 and a token", len(page1.Reservations), page1.NextToken)
	}
	page2, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5), NextToken: page1.NextToken})
	noErr(t, err)
	if len(page2.Reservations) != 0 || page2.NextToken != nil {
		t.Errorf("after a full last page: %d, token %v; want an empty page without token", len(page2.Reservations), page2.NextToken)
	}
}

// TestTokensAreBoundAndExpire: a token presented with other filters is
// InvalidParameterValue; with the same filters after TokenTTL it is
// InvalidPaginationToken, as is a token of another describe; MaxResults
// 0 and values out of 5..1000 are refused.
func TestTokensAreBoundAndExpire(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{TokenTTL: ec2sim.Duration(time.Minute)}))
	for range 6 {
		e.createENI("big", 0)
	}
	fs := []types.Filter{{Name: aws.String("status"), Values: []string{"available"}}}
	page1, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: fs, MaxResults: aws.Int32(5)})
	noErr(t, err)
	if page1.NextToken == nil {
		t.Fatal("no token after a page of five of eight ENIs")
	}
	other := []types.Filter{{Name: aws.String("status"), Values: []string{"in-use"}}}
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: other, MaxResults: aws.Int32(5), NextToken: page1.NextToken})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5), NextToken: page1.NextToken})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{Filters: fs, MaxResults: aws.Int32(5), NextToken: page1.NextToken})
	wantCode(t, err, "InvalidPaginationToken")
	e.clock.Advance(30 * time.Second)
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: fs, MaxResults: aws.Int32(5), NextToken: page1.NextToken})
	noErr(t, err)
	e.clock.Advance(31 * time.Second)
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: fs, MaxResults: aws.Int32(5), NextToken: page1.NextToken})
	wantCode(t, err, "InvalidPaginationToken")

	for _, n := range []int32{0, 4, 1001} {
		_, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(n)})
		wantCode(t, err, "InvalidParameterValue")
		_, err = e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(n)})
		wantCode(t, err, "InvalidParameterValue")
	}
	_, err = e.ec2.DescribeRouteTables(e.ctx, &ec2.DescribeRouteTablesInput{MaxResults: aws.Int32(101)})
	wantCode(t, err, "InvalidParameterValue")
}
