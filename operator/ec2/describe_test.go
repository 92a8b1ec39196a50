package ec2_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator/catalog"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

const oneVPC = `
account: "123456789012"
region: us-east-1
zones: [us-east-1a]
vpcs:
- cidrs: [10.0.0.0/16]
  subnets:
  - {name: a, cidr: 10.0.0.0/24, zone: us-east-1a}
`

// TestInstanceTypesReadCardZero: for every type of the catalog, the
// adapter reads DescribeInstanceTypes from ec2sim through the SDK as the
// catalog's own limits: card 0's interfaces (2 for a p5.48xlarge, whose
// 32 cards hold 64), addresses per ENI, hypervisor and bare metal. The
// in-memory cloud reads the same, so tests on either see one EC2.
func TestInstanceTypesReadCardZero(t *testing.T) {
	sc, err := ec2sim.ParseScenario([]byte(oneVPC))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := ec2sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	opts := ec2.DefaultOptions()
	opts.Endpoint, opts.InitialBucketFill = srv.URL, 1
	client, err := ec2.New(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(ec2sim.DefaultAccessKeyID, ec2sim.DefaultSecretAccessKey, "")}, opts, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	want := map[string]cloud.InstanceType{}
	for _, it := range catalog.All() {
		names = append(names, it.Name)
		want[it.Name] = it.Limits()
	}
	ctx := context.Background()
	for api, c := range map[string]cloud.API{"SDK": client, "cloudfake": cloudfake.New(sim.State())} {
		got, err := c.InstanceTypes(ctx, names)
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d types, want %d", api, len(got), len(want))
		}
		for _, it := range got {
			if it != want[it.Name] {
				t.Errorf("%s: %s = %+v, want %+v", api, it.Name, it, want[it.Name])
			}
		}
	}
	if p5, _ := catalog.Lookup("p5.48xlarge"); p5.Limits().MaxENIs != 2 || p5.MaxInterfaces() != 64 {
		t.Errorf("p5.48xlarge: card 0 %d ENIs, %d in all", p5.Limits().MaxENIs, p5.MaxInterfaces())
	}
}
