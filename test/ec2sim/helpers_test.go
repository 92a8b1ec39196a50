package ec2sim_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/enipam/enipam/test/ec2sim"
)

func newManualClock() *ec2sim.ManualClock {
	return ec2sim.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

// env is one emulator behind an httptest server, with the SDK's EC2 client
// pointed at it.
type env struct {
	t       *testing.T
	ctx     context.Context
	sim     *ec2sim.Sim
	url     string
	ec2     *ec2.Client
	admin   *ec2sim.AdminClient
	clock   *ec2sim.ManualClock
	backoff *backoffRecorder
	region  string
}

// backoffRecorder is the retryer's backoff: it records each retry and waits
// a millisecond, so retries are visible and fast. onBackoff, when set, runs
// at each backoff (a test moves its clock there, as time passes while a
// real client backs off).
type backoffRecorder struct {
	retries   atomic.Int64
	onBackoff func()
}

func (b *backoffRecorder) BackoffDelay(attempt int, err error) (time.Duration, error) {
	b.retries.Add(1)
	if b.onBackoff != nil {
		b.onBackoff()
	}
	return time.Millisecond, nil
}

// newEnv starts an emulator for sc (the demo scenario when nil) on a manual
// clock. A scenario without principals gets AllowAllPrincipal: these tests
// call actions the operator's policy never allows (auth_test.go and
// iam_test.go hold ec2sim to a policy).
func newEnv(t *testing.T, sc *ec2sim.Scenario) *env {
	t.Helper()
	if sc == nil {
		sc = ec2sim.DemoScenario()
	}
	if sc.Principals == nil {
		sc.Principals = []ec2sim.PrincipalSpec{ec2sim.AllowAllPrincipal()}
	}
	clock := newManualClock()
	sim, err := ec2sim.New(sc, ec2sim.WithClock(clock.Now))
	if err != nil {
		t.Fatalf("ec2sim.New: %v", err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	e := &env{t: t, ctx: context.Background(), sim: sim, url: srv.URL, clock: clock, backoff: &backoffRecorder{}, region: sc.Region,
		admin: ec2sim.NewAdminClient(srv.URL, srv.Client())}
	e.ec2 = e.newEC2Client(3)
	return e
}

// newEC2Client is an unmodified SDK client, signing with the default
// credentials for the scenario's region, except for a fast, recorded
// backoff and no client-side retry quota.
func (e *env) newEC2Client(maxAttempts int) *ec2.Client {
	return e.newEC2ClientAs(maxAttempts, ec2sim.DefaultAccessKeyID, ec2sim.DefaultSecretAccessKey)
}

// newEC2ClientAs is newEC2Client signing with another key.
func (e *env) newEC2ClientAs(maxAttempts int, keyID, secret string) *ec2.Client {
	cfg := aws.Config{
		Region:     e.region,
		HTTPClient: ec2sim.NewHTTPClient(),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secret}, nil
		}),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				o.Backoff = e.backoff
				o.RateLimiter = ratelimit.None
			})
		},
	}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(e.url) })
}

// imdsClient returns the SDK's IMDS client for one instance.
func (e *env) imdsClient(instanceID string) *imds.Client {
	e.t.Helper()
	endpoint, err := e.admin.IMDSEndpoint(e.ctx, instanceID)
	if err != nil {
		e.t.Fatalf("IMDSEndpoint: %v", err)
	}
	return imds.New(imds.Options{Endpoint: endpoint, ClientEnableState: imds.ClientEnabled, EnableFallback: aws.FalseTernary})
}

func (e *env) counters() ec2sim.Counters {
	e.t.Helper()
	c, err := e.admin.Counters(e.ctx)
	if err != nil {
		e.t.Fatalf("Counters: %v", err)
	}
	return c
}

// noErr fails the test on err.
func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// wantCode asserts err is an EC2 API error with code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want API error %s, got %v", code, err)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("want API error %s, got %s: %s", code, ae.ErrorCode(), ae.ErrorMessage())
	}
}

// isCode reports whether err is an EC2 API error with code.
func isCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

// subnetByName finds a subnet by its Name tag.
func (e *env) subnetByName(name string) types.Subnet {
	e.t.Helper()
	out, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{
		Filters: []types.Filter{{Name: aws.String("tag:Name"), Values: []string{name}}},
	})
	noErr(e.t, err)
	if len(out.Subnets) != 1 {
		e.t.Fatalf("subnet %s: found %d", name, len(out.Subnets))
	}
	return out.Subnets[0]
}

// instanceByName finds an instance by its Name tag.
func (e *env) instanceByName(name string) types.Instance {
	e.t.Helper()
	out, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{
		Filters: []types.Filter{{Name: aws.String("tag:Name"), Values: []string{name}}},
	})
	noErr(e.t, err)
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		e.t.Fatalf("instance %s: found %d reservations", name, len(out.Reservations))
	}
	return out.Reservations[0].Instances[0]
}

// eni describes one ENI by ID.
func (e *env) eni(id string) types.NetworkInterface {
	e.t.Helper()
	out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	noErr(e.t, err)
	if len(out.NetworkInterfaces) != 1 {
		e.t.Fatalf("eni %s: found %d", id, len(out.NetworkInterfaces))
	}
	return out.NetworkInterfaces[0]
}

// createENI creates an ENI in a subnet (by name) with n secondary addresses.
func (e *env) createENI(subnet string, n int32) types.NetworkInterface {
	e.t.Helper()
	out, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:                       e.subnetByName(subnet).SubnetId,
		SecondaryPrivateIpAddressCount: aws.Int32(n),
	})
	noErr(e.t, err)
	return *out.NetworkInterface
}

// addresses lists an ENI's addresses, primary first.
func addresses(ni types.NetworkInterface) []string {
	var out []string
	for _, a := range ni.PrivateIpAddresses {
		out = append(out, aws.ToString(a.PrivateIpAddress))
	}
	return out
}

// scenario parses a YAML scenario or fails the test.
func scenario(t *testing.T, yaml string) *ec2sim.Scenario {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(yaml))
	if err != nil {
		t.Fatalf("ParseScenario: %v", err)
	}
	return sc
}

// smallScenario is one VPC with a tiny /28 subnet (11 usable addresses) and
// a /24, one zone each side, and one m5.large and one t3.medium.
const smallScenario = `
account: "111122223333"
region: eu-west-1
seed: 7
zones: [eu-west-1a, eu-west-1b]
vpcs:
- name: small
  cidrs: [10.1.0.0/16, 100.64.0.0/16]
  subnets:
  - {name: tiny, cidr: 10.1.0.0/28, zone: eu-west-1a}
  - {name: big, cidr: 10.1.1.0/24, zone: eu-west-1a, tags: {role: pods}}
  - {name: other-zone, cidr: 10.1.2.0/24, zone: eu-west-1b}
  - {name: extra, cidr: 100.64.0.0/24, zone: eu-west-1a}
  securityGroups:
  - {name: nodes}
  - {name: pods, tags: {role: pods}}
instances:
- {name: node-m5, type: m5.large, subnet: big, securityGroups: [nodes]}
- {name: node-t3, type: t3.medium, subnet: big}
`

// signRequest signs a raw request with the default credentials as the SDK
// does, at the time given.
func signRequest(t testing.TB, req *http.Request, body []byte, region string, at time.Time) {
	t.Helper()
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: ec2sim.DefaultAccessKeyID, SecretAccessKey: ec2sim.DefaultSecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "ec2", region, at); err != nil {
		t.Fatalf("signing: %v", err)
	}
}
