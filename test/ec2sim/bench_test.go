package ec2sim_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// scaleScenario is the VPC the issue asks to stay responsive: five /16
// CIDRs with a /16 subnet each, 1000 m5.4xlarge per subnet (5000), each
// with its primary ENI and seven secondary ENIs (40,000 ENIs) holding 60
// addresses in all (300,000 addresses).
func scaleScenario() string {
	var b strings.Builder
	b.WriteString("account: \"111122223333\"\nregion: us-east-1\nseed: 42\nzones: [us-east-1a, us-east-1b]\nvpcs:\n- name: scale\n  cidrs: [")
	for i := range 5 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "10.%d.0.0/16", i)
	}
	b.WriteString("]\n  subnets:\n")
	for i := range 5 {
		fmt.Fprintf(&b, "  - {name: s%d, cidr: 10.%d.0.0/16, zone: us-east-1%c}\n", i, i, 'a'+rune(i%2))
	}
	b.WriteString("instances:\n")
	for i := range 5 {
		fmt.Fprintf(&b, `- name: n%d
  count: 1000
  type: m5.4xlarge
  subnet: s%d
  secondaryIPs: 6
  enis:
  - {deviceIndex: 1, secondaryIPs: 7, tags: {enipam.io/cluster: scale}}
  - {deviceIndex: 2, secondaryIPs: 7, tags: {enipam.io/cluster: scale}}
  - {deviceIndex: 3, secondaryIPs: 7, tags: {enipam.io/cluster: scale}}
  - {deviceIndex: 4, secondaryIPs: 7, tags: {enipam.io/cluster: scale}}
  - {deviceIndex: 5, secondaryIPs: 6, tags: {enipam.io/cluster: scale}}
  - {deviceIndex: 6, secondaryIPs: 6, tags: {enipam.io/cluster: scale}}
  - {deviceIndex: 7, secondaryIPs: 6, tags: {enipam.io/cluster: scale}}
`, i, i)
	}
	return b.String()
}

// scaleFixture is built once per benchmark binary: the emulator, an SDK
// client over HTTP, and what the build cost.
type scaleFixture struct {
	sim       *ec2sim.Sim
	ec2       *ec2.Client
	heapBytes uint64
	buildTime time.Duration
	instance  string
	address   string
}

var (
	scaleOnce sync.Once
	scale     *scaleFixture
)

func scaleEnv(b *testing.B) *scaleFixture {
	b.Helper()
	scaleOnce.Do(func() {
		sc, err := ec2sim.ParseScenario([]byte(scaleScenario()))
		if err != nil {
			b.Fatal(err)
		}
		// As newEnv: ec2sim's own measurements are not held to a policy.
		sc.Principals = []ec2sim.PrincipalSpec{ec2sim.AllowAllPrincipal()}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		sim, err := ec2sim.New(sc)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		srv := httptest.NewServer(sim.Handler())
		e := &env{url: srv.URL, backoff: &backoffRecorder{}, region: sc.Region}
		f := &scaleFixture{sim: sim, ec2: e.newEC2Client(1), heapBytes: after.HeapAlloc - before.HeapAlloc, buildTime: took}
		d, err := sim.State().DescribeInstances(ec2sim.DescribeRequest{Page: ec2sim.Page{MaxResults: 5}})
		if err != nil {
			b.Fatal(err)
		}
		in := d.Reservations[0].Instances[0]
		f.instance = in.InstanceID
		f.address = in.NetworkInterfaces[3].PrivateIPAddresses[2].PrivateIPAddress
		scale = f
	})
	return scale
}

// BenchmarkScaleState reports what the 5000-instance VPC costs to hold:
// heap after GC and build time, and checks its size.
func BenchmarkScaleState(b *testing.B) {
	f := scaleEnv(b)
	d := f.sim.State().Dump()
	ips := 0
	for _, ni := range d.NetworkInterfaces {
		ips += len(ni.PrivateIPAddresses)
	}
	if len(d.Instances) != 5000 || len(d.NetworkInterfaces) != 40000 || ips != 300000 {
		b.Fatalf("scale state: %d instances, %d ENIs, %d addresses", len(d.Instances), len(d.NetworkInterfaces), ips)
	}
	for b.Loop() {
	}
	b.ReportMetric(float64(f.heapBytes)/(1<<20), "heap-MiB")
	b.ReportMetric(f.buildTime.Seconds(), "build-s")
}

// BenchmarkDescribeNetworkInterfacesPage walks the 40,000 ENIs in pages,
// the way an operator's VPC-wide resync does, and reports the time per
// page: in the engine alone, and through HTTP, XML and the SDK's decoder.
func BenchmarkDescribeNetworkInterfacesPage(b *testing.B) {
	f := scaleEnv(b)
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("engine/%d", size), func(b *testing.B) {
			token := ""
			for b.Loop() {
				out, err := f.sim.State().DescribeNetworkInterfaces(ec2sim.DescribeNetworkInterfacesRequest{Page: ec2sim.Page{MaxResults: size, NextToken: token}})
				if err != nil {
					b.Fatal(err)
				}
				token = out.NextToken
			}
		})
		b.Run(fmt.Sprintf("sdk-over-http/%d", size), func(b *testing.B) {
			var token *string
			for b.Loop() {
				out, err := f.ec2.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(int32(size)), NextToken: token})
				if err != nil {
					b.Fatal(err)
				}
				if len(out.NetworkInterfaces) != size {
					b.Fatalf("page of %d", len(out.NetworkInterfaces))
				}
				token = out.NextToken
			}
		})
	}
	b.Run(fmt.Sprintf("handler-only/%d", 1000), func(b *testing.B) {
		h := f.sim.Handler()
		token := ""
		for b.Loop() {
			form := "Action=DescribeNetworkInterfaces&Version=2016-11-15&MaxResults=1000"
			if token != "" {
				form += "&NextToken=" + token
			}
			req := httptest.NewRequest("POST", "/", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			signRequest(b, req, []byte(form), "us-east-1", time.Now())
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatalf("%d %s", rec.Code, rec.Body.String())
			}
			b.ReportMetric(float64(rec.Body.Len())/(1<<20), "MiB/page")
			body := rec.Body.String()
			if i := strings.Index(body, "<nextToken>"); i >= 0 {
				token = body[i+len("<nextToken>") : i+strings.Index(body[i:], "</nextToken>")]
			} else {
				token = ""
			}
		}
	})
	b.Run("sdk-over-http/instance-filter", func(b *testing.B) {
		for b.Loop() {
			out, err := f.ec2.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{
				Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{f.instance}}},
			})
			if err != nil {
				b.Fatal(err)
			}
			if len(out.NetworkInterfaces) != 8 {
				b.Fatalf("%d ENIs", len(out.NetworkInterfaces))
			}
		}
	})
	b.Run("sdk-over-http/address-filter", func(b *testing.B) {
		for b.Loop() {
			out, err := f.ec2.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{
				Filters: []types.Filter{{Name: aws.String("private-ip-address"), Values: []string{f.address}}},
			})
			if err != nil {
				b.Fatal(err)
			}
			if len(out.NetworkInterfaces) != 1 {
				b.Fatalf("%d ENIs", len(out.NetworkInterfaces))
			}
		}
	})
	b.Run("sdk-over-http/tag-filter-scan/1000", func(b *testing.B) {
		var token *string
		for b.Loop() {
			out, err := f.ec2.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{
				MaxResults: aws.Int32(1000), NextToken: token,
				Filters: []types.Filter{{Name: aws.String("tag:enipam.io/cluster"), Values: []string{"scale"}}, {Name: aws.String("status"), Values: []string{"in-use"}}},
			})
			if err != nil {
				b.Fatal(err)
			}
			token = out.NextToken
		}
	})
}

// BenchmarkAssignAndUnassignAtScale measures one address in and out of an
// ENI of the 5000-instance VPC, the operator's hot path.
func BenchmarkAssignAndUnassignAtScale(b *testing.B) {
	f := scaleEnv(b)
	d, err := f.sim.State().DescribeNetworkInterfaces(ec2sim.DescribeNetworkInterfacesRequest{
		Filters: []ec2sim.Filter{{Name: "attachment.instance-id", Values: []string{f.instance}}, {Name: "attachment.device-index", Values: []string{"7"}}},
	})
	if err != nil || len(d.NetworkInterfaces) != 1 {
		b.Fatalf("%v", err)
	}
	eni := aws.String(d.NetworkInterfaces[0].NetworkInterfaceID)
	for b.Loop() {
		out, err := f.ec2.AssignPrivateIpAddresses(context.Background(), &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(1)})
		if err != nil {
			b.Fatal(err)
		}
		_, err = f.ec2.UnassignPrivateIpAddresses(context.Background(), &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: eni,
			PrivateIpAddresses: []string{aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress)}})
		if err != nil {
			b.Fatal(err)
		}
	}
}
