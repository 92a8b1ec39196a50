package ec2sim_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/enipam/enipam/test/ec2sim"
)

// skewedSigner is the SDK's signer signing as if its clock were off by
// skew, or for another service.
type skewedSigner struct {
	skew    time.Duration
	service string
}

func (s skewedSigner) SignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string, at time.Time, opts ...func(*v4.SignerOptions)) error {
	if s.service != "" {
		service = s.service
	}
	return v4.NewSigner().SignHTTP(ctx, creds, r, payloadHash, service, region, at.Add(s.skew), opts...)
}

// wantStatus asserts err is an EC2 error with code, sent with status.
func wantStatus(t *testing.T, err error, code string, status int) {
	t.Helper()
	wantCode(t, err, code)
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != status {
		t.Fatalf("%s: want HTTP %d, got %v", code, status, err)
	}
}

// TestRequestsAreAuthenticatedAsEC2Does: through the SDK, with the demo
// scenario's default principal, a request signed right is answered; an
// unsigned one, one signed with a wrong secret or an unknown key, one
// dated 20 minutes off either way, one scoped to another region or
// service gets EC2's code and status, is counted as that error and
// changes nothing. 14 minutes of skew still pass.
func TestRequestsAreAuthenticatedAsEC2Does(t *testing.T) {
	e := newEnv(t, ec2sim.DemoScenario())
	// client signs with the default principal unless cfg or opt change it.
	client := func(cfg func(*aws.Config), opt func(*ec2.Options)) *ec2.Client {
		c := aws.Config{Region: "us-east-1", Credentials: staticCreds(ec2sim.DefaultAccessKeyID, ec2sim.DefaultSecretAccessKey),
			HTTPClient: ec2sim.NewHTTPClient(), RetryMaxAttempts: 1}
		if cfg != nil {
			cfg(&c)
		}
		return ec2.NewFromConfig(c, func(o *ec2.Options) {
			o.BaseEndpoint = aws.String(e.url)
			if opt != nil {
				opt(o)
			}
		})
	}
	ctx := e.ctx
	if _, err := client(nil, nil).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{}); err != nil {
		t.Fatalf("a request signed right: %v", err)
	}
	if _, err := client(nil, func(o *ec2.Options) { o.HTTPSignerV4 = skewedSigner{skew: 14 * time.Minute} }).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{}); err != nil {
		t.Fatalf("14 minutes ahead: %v", err)
	}
	noErr(t, e.admin.ResetCounters(ctx))

	signer := func(s skewedSigner) func(*ec2.Options) { return func(o *ec2.Options) { o.HTTPSignerV4 = s } }
	cases := []struct {
		name   string
		cfg    func(*aws.Config)
		opt    func(*ec2.Options)
		code   string
		status int
	}{
		{"unsigned", func(c *aws.Config) { c.Credentials = aws.AnonymousCredentials{} }, nil, "MissingParameter", 400},
		{"wrong secret", func(c *aws.Config) { c.Credentials = staticCreds(ec2sim.DefaultAccessKeyID, "not-the-secret") }, nil, "SignatureDoesNotMatch", 403},
		{"unknown key", func(c *aws.Config) { c.Credentials = staticCreds("AKIDNOBODY", "secret") }, nil, "AuthFailure", 401},
		{"20 minutes late", nil, signer(skewedSigner{skew: -20 * time.Minute}), "RequestExpired", 400},
		{"20 minutes early", nil, signer(skewedSigner{skew: 20 * time.Minute}), "RequestExpired", 400},
		{"another region", func(c *aws.Config) { c.Region = "eu-west-1" }, nil, "AuthFailure", 401},
		{"another service", nil, signer(skewedSigner{service: "s3"}), "AuthFailure", 401},
	}
	for _, c := range cases {
		_, err := client(c.cfg, c.opt).CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: e.subnetByName("demo-pods-a").SubnetId})
		if err == nil {
			t.Errorf("%s: answered", c.name)
			continue
		}
		t.Run(c.name, func(t *testing.T) { wantStatus(t, err, c.code, c.status) })
	}
	d, err := e.admin.Dump(ctx)
	noErr(t, err)
	for _, ni := range d.NetworkInterfaces {
		if ni.Attachment == nil {
			t.Errorf("a refused request created %s", ni.NetworkInterfaceID)
		}
	}
	got := e.counters().Errors["CreateNetworkInterface"]
	if got["AuthFailure"] != 3 || got["RequestExpired"] != 2 || got["SignatureDoesNotMatch"] != 1 || got["MissingParameter"] != 1 {
		t.Errorf("errors counted %v", got)
	}
}

// TestVersionAndSignedBodyAreChecked: a request signed right but without
// Version, or naming another API version, is refused as EC2 does; a body
// changed after signing no longer matches its signature.
func TestVersionAndSignedBodyAreChecked(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ form, code string }{
		{"Action=DescribeVpcs", "MissingParameter"},
		{"Action=DescribeVpcs&Version=2014-10-01", "NoSuchVersion"},
		{"Action=DescribeVpcs&Version=2016-11-15", ""},
	} {
		status, got := e.post(c.form)
		if got.Code != c.code || (c.code == "" && status != 200) || (c.code != "" && status != 400) {
			t.Errorf("%s: %d %s (%s), want %q", c.form, status, got.Code, got.Message, c.code)
		}
		if c.code == "MissingParameter" && !strings.Contains(got.Message, "Version") {
			t.Errorf("%s: message %q does not name Version", c.form, got.Message)
		}
	}
	signed := "Action=DescribeVpcs&Version=2016-11-15"
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(signed+"&VpcId.1=vpc-0123456789abcdef0"))
	noErr(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	signRequest(t, req, []byte(signed), e.region, time.Now())
	resp, err := http.DefaultClient.Do(req)
	noErr(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a body changed after signing: HTTP %d", resp.StatusCode)
	}
}

// staticCreds is a fixed key pair.
func staticCreds(id, secret string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}, nil
	})
}
