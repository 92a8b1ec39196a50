package ec2_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
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

// TestInstanceTypesReadCardZero: for every type of the catalog (every
// current EC2 type), the adapter reads DescribeInstanceTypes from ec2sim
// over HTTP through the SDK as the catalog's own limits: card 0's
// interfaces (2 for a p5.48xlarge, whose 32 cards hold 64), addresses per
// ENI, hypervisor and bare metal. It asks 200 names a call, EC2's filter
// limit, and its paginator walks every page of each (100 types a page):
// the requests counted on the wire are exactly those pages. The in-memory
// cloud reads the same, so tests on either see one EC2.
func TestInstanceTypesReadCardZero(t *testing.T) {
	sc, err := ec2sim.ParseScenario([]byte(oneVPC))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := ec2sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	var describes atomic.Int32
	handler := sim.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if q, err := url.ParseQuery(string(body)); err == nil && q.Get("Action") == "DescribeInstanceTypes" {
			describes.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		handler.ServeHTTP(w, r)
	}))
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
		if len(got) != len(want) || len(want) < 1300 {
			t.Errorf("%s: %d types, want %d", api, len(got), len(want))
		}
		for _, it := range got {
			if it != want[it.Name] {
				t.Errorf("%s: %s = %+v, want %+v", api, it.Name, it, want[it.Name])
			}
		}
	}
	// Pages of 100 within calls of 200 names: 2 per full call.
	wantPages := 2*(len(names)/200) + (len(names)%200+99)/100
	if n := int(describes.Load()); n != wantPages {
		t.Errorf("the SDK sent %d DescribeInstanceTypes, want %d (every page of every call)", n, wantPages)
	}
	if p5, _ := catalog.Lookup("p5.48xlarge"); p5.Limits().MaxENIs != 2 || p5.MaxInterfaces() != 64 {
		t.Errorf("p5.48xlarge: card 0 %d ENIs, %d in all", p5.Limits().MaxENIs, p5.MaxInterfaces())
	}
}
