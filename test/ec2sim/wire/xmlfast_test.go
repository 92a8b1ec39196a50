package wire

import (
	"bytes"
	"encoding/xml"
	"testing"

	"github.com/enipam/enipam/test/ec2sim/state"
)

// TestFastXMLMatchesEncodingXML renders a DescribeNetworkInterfaces answer
// full of awkward values (attachments, Elastic IPs, prefixes, tags needing
// escapes, invalid UTF-8, IPv6 addresses and prefixes) with the
// hand-written writer and with encoding/xml, and requires the same bytes.
func TestFastXMLMatchesEncodingXML(t *testing.T) {
	assoc := &state.Association{AllocationID: "eipalloc-1", AssociationID: "eipassoc-1", IPOwnerID: "1", PublicIP: "198.51.100.4", PublicDNSName: "x"}
	resp := &state.DescribeNetworkInterfacesResponse{
		NetworkInterfaces: []state.NetworkInterface{
			{
				NetworkInterfaceID: "eni-1", Description: `a<b>&"c"'d` + "\t\n\xff é", Status: "in-use", SourceDestCheck: true,
				Groups:             []state.GroupIdentifier{{GroupID: "sg-1", GroupName: "default"}},
				Attachment:         &state.Attachment{AttachmentID: "eni-attach-1", InstanceID: "i-1", DeviceIndex: 2, Status: "attached", DeleteOnTermination: true},
				Association:        assoc,
				Tags:               []state.Tag{{Key: "k<", Value: "v&"}, {Key: "e", Value: ""}},
				PrivateIPAddresses: []state.PrivateIPAddress{{PrivateIPAddress: "10.0.0.4", Primary: true, Association: assoc}, {PrivateIPAddress: "10.0.0.5"}},
				IPv4Prefixes:       []state.IPv4Prefix{{IPv4Prefix: "10.0.0.16/28"}},
				IPv6Address:        "2600:1f18::10",
				IPv6Addresses:      []state.IPv6Address{{IPv6Address: "2600:1f18::10"}, {IPv6Address: "2600:1f18::11", IsPrimaryIPv6: true}},
				IPv6Prefixes:       []state.IPv6Prefix{{IPv6Prefix: "2600:1f18:0:0:1::/80"}},
			},
			{NetworkInterfaceID: "eni-2"},
		},
		NextToken: "abc",
	}
	fast, ok := fastFields(resp)
	if !ok {
		t.Fatal("no fast path for DescribeNetworkInterfacesResponse")
	}
	var want bytes.Buffer
	enc := xml.NewEncoder(&want)
	if err := enc.EncodeElement(resp, xml.StartElement{Name: xml.Name{Local: "x"}}); err != nil {
		t.Fatal(err)
	}
	_ = enc.Close()
	w := want.Bytes()
	w = w[len("<x>") : len(w)-len("</x>")]
	if !bytes.Equal(fast, w) {
		t.Errorf("hand-written XML differs from encoding/xml:\nfast: %s\nxml:  %s", fast, w)
	}
	resp.NextToken = ""
	fast, _ = fastFields(resp)
	if bytes.Contains(fast, []byte("nextToken")) {
		t.Error("empty nextToken written")
	}
}
