package ec2sim_test

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// ec2Error is EC2's error document.
type ec2Error struct {
	Code      string `xml:"Errors>Error>Code"`
	Message   string `xml:"Errors>Error>Message"`
	RequestID string `xml:"RequestID"`
}

// post sends a raw ec2query form, signed with the default credentials,
// and returns the status and error code.
func (e *env) post(form string) (int, ec2Error) {
	t := e.t
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(form))
	noErr(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	signRequest(t, req, []byte(form), e.region, time.Now())
	resp, err := http.DefaultClient.Do(req)
	noErr(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	noErr(t, err)
	var answer ec2Error
	if resp.StatusCode != http.StatusOK {
		if err := xml.Unmarshal(b, &answer); err != nil {
			t.Fatalf("error body is not EC2's error XML: %v\n%s", err, b)
		}
		if resp.Header.Get("X-Amzn-Requestid") == "" || answer.RequestID != resp.Header.Get("X-Amzn-Requestid") {
			t.Errorf("request ID header %q body %q", resp.Header.Get("X-Amzn-Requestid"), answer.RequestID)
		}
	}
	return resp.StatusCode, answer
}

// TestMalformedRequestsGetEC2Codes sends what a buggy client might: bad
// numbers and booleans, missing and unknown parameters, unknown filters and
// actions, addresses outside the subnet, broken list indexes. Each gets a
// 4xx with EC2's code, never a 500.
func TestMalformedRequestsGetEC2Codes(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	eni := e.createENI("big", 0)
	id := *eni.NetworkInterfaceId
	subnet := *e.subnetByName("big").SubnetId
	v := "&Version=2016-11-15"
	cases := []struct {
		name, form, code string
		status           int
	}{
		{"no action", "Version=2016-11-15", "MissingAction", 400},
		{"unknown action", "Action=RunInstances" + v, "InvalidAction", 400},
		{"bad count", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + id + "&SecondaryPrivateIpAddressCount=three" + v, "InvalidParameterValue", 400},
		{"huge count", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + id + "&SecondaryPrivateIpAddressCount=99999999999" + v, "InvalidParameterValue", 400},
		{"negative count", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + id + "&SecondaryPrivateIpAddressCount=-1" + v, "InvalidParameterValue", 400},
		{"bad bool", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + id + "&SecondaryPrivateIpAddressCount=1&AllowReassignment=yes" + v, "InvalidParameterValue", 400},
		{"missing ENI", "Action=AssignPrivateIpAddresses&SecondaryPrivateIpAddressCount=1" + v, "MissingParameter", 400},
		{"missing subnet", "Action=CreateNetworkInterface" + v, "MissingParameter", 400},
		{"missing device index", "Action=AttachNetworkInterface&NetworkInterfaceId=" + id + "&InstanceId=i-0123456789abcdef0" + v, "MissingParameter", 400},
		{"bad device index", "Action=AttachNetworkInterface&NetworkInterfaceId=" + id + "&InstanceId=i-0123456789abcdef0&DeviceIndex=1.5" + v, "InvalidParameterValue", 400},
		{"missing attachment", "Action=DetachNetworkInterface" + v, "MissingParameter", 400},
		{"unknown parameter", "Action=DescribeVpcs&Colour=blue" + v, "UnknownParameter", 400},
		{"wrong list name", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + id + "&PrivateIpAddresses.1=10.1.1.9" + v, "UnknownParameter", 400},
		{"bad list index", "Action=DescribeVpcs&VpcId.x=vpc-1" + v, "UnknownParameter", 400},
		{"zero list index", "Action=DescribeVpcs&VpcId.0=vpc-1" + v, "UnknownParameter", 400},
		{"filter without name", "Action=DescribeSubnets&Filter.1.Value.1=x" + v, "MissingParameter", 400},
		{"filter without value", "Action=DescribeSubnets&Filter.1.Name=vpc-id" + v, "MissingParameter", 400},
		{"unknown filter", "Action=DescribeNetworkInterfaces&Filter.1.Name=colour&Filter.1.Value.1=blue" + v, "InvalidParameterValue", 400},
		{"address outside subnet", "Action=CreateNetworkInterface&SubnetId=" + subnet + "&PrivateIpAddress=192.168.0.9" + v, "InvalidParameterValue", 400},
		{"not an address", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + id + "&PrivateIpAddress.1=10.1.1" + v, "InvalidParameterValue", 400},
		{"IPv6 address", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + id + "&PrivateIpAddress.1=fd00::1" + v, "InvalidParameterValue", 400},
		{"bad prefix", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + id + "&Ipv4Prefix.1=10.1.1.0/24" + v, "InvalidParameterValue", 400},
		{"bad max results", "Action=DescribeNetworkInterfaces&MaxResults=abc" + v, "InvalidParameterValue", 400},
		{"bad token", "Action=DescribeInstances&MaxResults=5&NextToken=%00%01" + v, "InvalidPaginationToken", 400},
		{"malformed ENI ID", "Action=DeleteNetworkInterface&NetworkInterfaceId=eni-ZZZ" + v, "InvalidNetworkInterfaceID.Malformed", 400},
		{"IPv6 count", "Action=CreateNetworkInterface&SubnetId=" + subnet + "&Ipv6AddressCount=1" + v, "InvalidParameterValue", 400},
		{"dry run", "Action=DescribeVpcs&DryRun=true" + v, "DryRunOperation", 412},
		{"bad escape", "Action=DescribeVpcs&x=%zz" + v, "MalformedQueryString", 400},
		{"tag without key", "Action=CreateTags&ResourceId.1=" + id + "&Tag.1.Value=v" + v, "MissingParameter", 400},
	}
	for _, c := range cases {
		status, got := e.post(c.form)
		if status != c.status || got.Code != c.code {
			t.Errorf("%s: %d %s (%s), want %d %s", c.name, status, got.Code, got.Message, c.status, c.code)
		}
	}
	// A request over 1 MiB.
	status, got := e.post("Action=DescribeVpcs&Filter.1.Name=vpc-id&Filter.1.Value.1=" + strings.Repeat("a", 1<<20))
	if status != http.StatusRequestEntityTooLarge || got.Code != "RequestEntityTooLarge" {
		t.Errorf("oversized: %d %s", status, got.Code)
	}
	// GET with a query string works like POST, as on EC2.
	req, err := http.NewRequest(http.MethodGet, e.url+"/?"+url.Values{"Action": {"DescribeVpcs"}, "Version": {"2016-11-15"}}.Encode(), nil)
	noErr(t, err)
	signRequest(t, req, nil, e.region, time.Now())
	resp, err := http.DefaultClient.Do(req)
	noErr(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	c := e.counters()
	for action, codes := range c.Errors {
		if codes["InternalError"] != 0 {
			t.Errorf("%s answered InternalError", action)
		}
	}
}
