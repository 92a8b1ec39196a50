package ec2_test

import (
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator/ec2"
	"github.com/enipam/enipam/test/ec2sim"
)

// simClient serves the ec2sim scenario over HTTP for the test and
// returns the adapter reading it through the SDK, its buckets full.
func simClient(t *testing.T, scenario string) *ec2.Client {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(scenario))
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
	return client
}
