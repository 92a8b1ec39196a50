package ec2sim_test

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/enipam/enipam/test/ec2sim"
)

// FuzzQuery throws arbitrary ec2query bodies at the handler: whatever
// arrives, the answer is 200 with an XML document or a 4xx with EC2's error
// XML, never a 500 or a panic. The seeds are real requests of every action
// and known troublemakers. Each input meets a fresh emulator, so a failure
// reproduces from its input alone.
func FuzzQuery(f *testing.F) {
	seeds := []string{
		"Action=DescribeNetworkInterfaces&Version=2016-11-15&MaxResults=5&Filter.1.Name=tag%3Ak&Filter.1.Value.1=v*",
		"Action=DescribeInstances&Version=2016-11-15&Filter.1.Name=instance-type&Filter.1.Value.1=m5.large",
		"Action=DescribeSubnets&Version=2016-11-15&SubnetId.1=subnet-0123456789abcdef0",
		"Action=DescribeVpcs&Version=2016-11-15",
		"Action=DescribeSecurityGroups&GroupName.1=default",
		"Action=DescribeRouteTables&Filter.1.Name=vpc-id&Filter.1.Value.1=x",
		"Action=DescribeInstanceTypes&InstanceType.1=m5.large&MaxResults=5",
		"Action=DescribeAddresses",
		"Action=CreateNetworkInterface&SubnetId=subnet-x&SecondaryPrivateIpAddressCount=2&Ipv4PrefixCount=1&PrivateIpAddresses.1.PrivateIpAddress=10.0.0.9&PrivateIpAddresses.1.Primary=true",
		"Action=CreateNetworkInterface&SubnetId=subnet-x&TagSpecification.1.ResourceType=network-interface&TagSpecification.1.Tag.1.Key=k&ClientToken=t",
		"Action=AttachNetworkInterface&NetworkInterfaceId=eni-1&InstanceId=i-1&DeviceIndex=1",
		"Action=DetachNetworkInterface&AttachmentId=eni-attach-1&Force=true",
		"Action=DeleteNetworkInterface&NetworkInterfaceId=eni-1",
		"Action=ModifyNetworkInterfaceAttribute&NetworkInterfaceId=eni-1&Attachment.AttachmentId=a&Attachment.DeleteOnTermination=true",
		"Action=AssignPrivateIpAddresses&NetworkInterfaceId=eni-1&PrivateIpAddress.1=10.0.0.5&AllowReassignment=true",
		"Action=UnassignPrivateIpAddresses&NetworkInterfaceId=eni-1&Ipv4Prefix.1=10.0.0.16/28",
		"Action=CreateTags&ResourceId.1=eni-1&Tag.1.Key=a&Tag.1.Value=b",
		"Action=DeleteTags&ResourceId.1=eni-1&Tag.1.Key=a",
		"Action=AllocateAddress&Domain=vpc",
		"Action=AssociateAddress&AllocationId=eipalloc-1&InstanceId=i-1",
		"Action=DisassociateAddress&AssociationId=eipassoc-1",
		"Action=ReleaseAddress&PublicIp=198.51.100.1",
		"Action=DescribeVpcs&DryRun=true",
		"Action=DescribeVpcs&Filter.99999999999999999999.Name=x",
		"Action=DescribeNetworkInterfaces&Filter.1.Name=private-ip-address&Filter.1.Value.1=%2A%2A%3F%5C",
		"Action=DescribeInstances&NextToken=aW5zdGFuY2U6LTE",
		"%zz=&&&===",
		"Action",
		"",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	sc, err := ec2sim.ParseScenario([]byte(smallScenario))
	if err != nil {
		f.Fatal(err)
	}
	sc.Principals = []ec2sim.PrincipalSpec{ec2sim.AllowAllPrincipal()}
	// IPv6 on the VPC and its "big" subnet, so that the IPv6 actions reach
	// the model rather than stop at a subnet without it.
	sc.VPCs[0].IPv6CIDR = "2600:1f18:abc:de00::/56"
	sc.VPCs[0].Subnets[1].IPv6CIDR = "2600:1f18:abc:de01::/64"
	first, err := ec2sim.New(sc)
	if err != nil {
		f.Fatal(err)
	}
	// IDs are the same for every emulator built from the scenario: give the
	// mutating seeds real targets.
	d := first.State().Dump()
	eni, inst := d.NetworkInterfaces[0].NetworkInterfaceID, d.Instances[0].InstanceID
	f.Add("Action=CreateNetworkInterface&SubnetId=" + d.Subnets[1].SubnetID + "&SecondaryPrivateIpAddressCount=3")
	f.Add("Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + eni + "&Ipv4PrefixCount=2")
	f.Add("Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + eni + "&PrivateIpAddress.1=10.1.1.77&PrivateIpAddress.2=10.1.1.4")
	f.Add("Action=AssociateAddress&InstanceId=" + inst)
	f.Add("Action=AssignIpv6Addresses&NetworkInterfaceId=" + eni + "&Ipv6AddressCount=2&Ipv6PrefixCount=1")
	f.Add("Action=AssignIpv6Addresses&NetworkInterfaceId=" + eni + "&Ipv6Addresses.1=2600:1f18:abc:de01::99&Ipv6Prefix.1=2600:1f18:abc:de01:7::/80")
	f.Add("Action=UnassignIpv6Addresses&NetworkInterfaceId=" + eni + "&Ipv6Addresses.1=2600:1f18:abc:de01::99&Ipv6Prefix.1=2600:1f18:abc:de01:7::/80")
	f.Add("Action=CreateNetworkInterface&SubnetId=" + d.Subnets[1].SubnetID + "&Ipv6PrefixCount=1&Ipv6Addresses.1.Ipv6Address=2600:1f18:abc:de01::5")
	f.Add("Action=DescribeNetworkInterfaces&Filter.1.Name=ipv6-addresses.ipv6-address&Filter.1.Value.1=2600:1f18:abc:de01::*")
	f.Fuzz(func(t *testing.T, body string) {
		sim, err := ec2sim.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		h := sim.Handler()
		// Signed, and naming the API version first, so that every input
		// reaches the parser of its action.
		body = "Version=2016-11-15&" + body
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		signRequest(t, req, []byte(body), sc.Region, time.Now())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusOK:
			if !bytes.HasPrefix(rec.Body.Bytes(), []byte(xml.Header)) {
				t.Fatalf("200 without an XML document: %q", rec.Body.String())
			}
		case rec.Code >= 400 && rec.Code < 500:
			var e ec2Error
			if err := xml.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" {
				t.Fatalf("%d without EC2's error XML: %v %q", rec.Code, err, rec.Body.String())
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
	})
}
