package wire

import (
	"bytes"
	"encoding/xml"
	"strconv"

	"github.com/enipam/enipam/test/ec2sim/state"
)

// DescribeNetworkInterfaces pages of a thousand ENIs are the largest answers
// the emulator writes (megabytes); encoding/xml spends most of a page's time
// in reflection. The writer below emits the same document by hand, element
// for element as the xml tags of NetworkInterface say; a test holds the two
// to the same output.

type xmlWriter struct{ b []byte }

func (w *xmlWriter) open(name string) {
	w.b = append(w.b, '<')
	w.b = append(w.b, name...)
	w.b = append(w.b, '>')
}

func (w *xmlWriter) close(name string) {
	w.b = append(w.b, '<', '/')
	w.b = append(w.b, name...)
	w.b = append(w.b, '>')
}

func (w *xmlWriter) text(name, v string) {
	w.open(name)
	w.escape(v)
	w.close(name)
}

func (w *xmlWriter) boolean(name string, v bool) {
	w.open(name)
	w.b = strconv.AppendBool(w.b, v)
	w.close(name)
}

func (w *xmlWriter) integer(name string, v int) {
	w.open(name)
	w.b = strconv.AppendInt(w.b, int64(v), 10)
	w.close(name)
}

// escape appends s as XML character data, exactly as xml.EscapeText would.
func (w *xmlWriter) escape(s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c == '&' || c == '<' || c == '>' || c == '"' || c == '\'' || c < 0x20 {
			var buf bytes.Buffer
			_ = xml.EscapeText(&buf, []byte(s))
			w.b = append(w.b, buf.Bytes()...)
			return
		}
	}
	w.b = append(w.b, s...)
}

func (w *xmlWriter) tags(tags []state.Tag) {
	w.open("tagSet")
	for _, t := range tags {
		w.open("item")
		w.text("key", t.Key)
		w.text("value", t.Value)
		w.close("item")
	}
	w.close("tagSet")
}

func (w *xmlWriter) association(a *state.Association) {
	if a == nil {
		return
	}
	w.open("association")
	w.text("allocationId", a.AllocationID)
	w.text("associationId", a.AssociationID)
	w.text("ipOwnerId", a.IPOwnerID)
	w.text("publicIp", a.PublicIP)
	w.text("publicDnsName", a.PublicDNSName)
	w.close("association")
}

func (w *xmlWriter) networkInterface(ni *state.NetworkInterface) {
	w.text("networkInterfaceId", ni.NetworkInterfaceID)
	w.text("subnetId", ni.SubnetID)
	w.text("vpcId", ni.VpcID)
	w.text("availabilityZone", ni.AvailabilityZone)
	w.text("availabilityZoneId", ni.AvailabilityZoneID)
	w.text("description", ni.Description)
	w.text("ownerId", ni.OwnerID)
	w.boolean("requesterManaged", ni.RequesterManaged)
	w.text("status", ni.Status)
	w.text("macAddress", ni.MacAddress)
	w.text("privateIpAddress", ni.PrivateIPAddress)
	w.text("privateDnsName", ni.PrivateDNSName)
	w.boolean("sourceDestCheck", ni.SourceDestCheck)
	w.text("interfaceType", ni.InterfaceType)
	w.open("groupSet")
	for _, g := range ni.Groups {
		w.open("item")
		w.text("groupId", g.GroupID)
		w.text("groupName", g.GroupName)
		w.close("item")
	}
	w.close("groupSet")
	if a := ni.Attachment; a != nil {
		w.open("attachment")
		w.text("attachmentId", a.AttachmentID)
		w.text("instanceId", a.InstanceID)
		w.text("instanceOwnerId", a.InstanceOwnerID)
		w.integer("deviceIndex", a.DeviceIndex)
		w.integer("networkCardIndex", a.NetworkCardIndex)
		w.text("status", a.Status)
		w.text("attachTime", a.AttachTime)
		w.boolean("deleteOnTermination", a.DeleteOnTermination)
		w.close("attachment")
	}
	w.association(ni.Association)
	w.tags(ni.Tags)
	w.open("privateIpAddressesSet")
	for i := range ni.PrivateIPAddresses {
		p := &ni.PrivateIPAddresses[i]
		w.open("item")
		w.text("privateIpAddress", p.PrivateIPAddress)
		w.text("privateDnsName", p.PrivateDNSName)
		w.boolean("primary", p.Primary)
		w.association(p.Association)
		w.close("item")
	}
	w.close("privateIpAddressesSet")
	w.open("ipv4PrefixSet")
	for _, p := range ni.IPv4Prefixes {
		w.open("item")
		w.text("ipv4Prefix", p.IPv4Prefix)
		w.close("item")
	}
	w.close("ipv4PrefixSet")
	if ni.IPv6Address != "" {
		w.text("ipv6Address", ni.IPv6Address)
	}
	w.open("ipv6AddressesSet")
	for _, a := range ni.IPv6Addresses {
		w.open("item")
		w.text("ipv6Address", a.IPv6Address)
		w.boolean("isPrimaryIpv6", a.IsPrimaryIPv6)
		w.close("item")
	}
	w.close("ipv6AddressesSet")
	w.open("ipv6PrefixSet")
	for _, p := range ni.IPv6Prefixes {
		w.open("item")
		w.text("ipv6Prefix", p.IPv6Prefix)
		w.close("item")
	}
	w.close("ipv6PrefixSet")
}

// fastFields returns the body fields of answers the hand-written writer
// knows, or false.
func fastFields(body any) ([]byte, bool) {
	r, ok := body.(*state.DescribeNetworkInterfacesResponse)
	if !ok {
		return nil, false
	}
	w := xmlWriter{b: make([]byte, 0, 64+len(r.NetworkInterfaces)*2400)}
	w.open("networkInterfaceSet")
	for i := range r.NetworkInterfaces {
		w.open("item")
		w.networkInterface(&r.NetworkInterfaces[i])
		w.close("item")
	}
	w.close("networkInterfaceSet")
	if r.NextToken != "" {
		w.text("nextToken", r.NextToken)
	}
	return w.b, true
}
