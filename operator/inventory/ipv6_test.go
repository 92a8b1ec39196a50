package inventory

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
)

// TestIPv6PrefixesRecordedAndTrustedAsIPv4: i-1's primary ENI shows the
// /80 2001:db8::a:0:0:0/80 in the first describe, which starts within the
// grace after Start: an address of it is not trusted (an earlier process
// may have unassigned it). The /80 this process assigns is on the ENI at
// once and its addresses are trusted, the described one's still not;
// unassigned, it leaves the ENI. The ENI's IPv4 view is untouched.
func TestIPv6PrefixesRecordedAndTrustedAsIPv4(t *testing.T) {
	described := netip.MustParsePrefix("2001:db8:0:0:a::/80")
	mine := netip.MustParsePrefix("2001:db8:0:0:b::/80")
	ip4 := netip.MustParseAddr("10.0.0.10")
	f := &fakeCloud{instances: []cloud.Instance{instance("i-1")}, enis: []cloud.ENI{
		{ID: "eni-1", VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached,
			IPs: []netip.Addr{ip4}, IPv6Prefixes: []netip.Prefix{described}},
	}}
	inv := newInventory(f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()

	in := func(p netip.Prefix) netip.Addr { return p.Addr().Next() }
	if inv.Trusted("eni-1", in(described)) {
		t.Error("an address of a /80 shown by a describe within the grace is trusted")
	}
	inv.RecordAssignedIPv6Prefixes("eni-1", []netip.Prefix{mine})
	e, _ := inv.ENI("eni-1")
	if !slices.Equal(e.IPv6Prefixes, []netip.Prefix{described, mine}) || !slices.Equal(e.IPs, []netip.Addr{ip4}) {
		t.Errorf("after the assign: IPv6 prefixes %v, IPs %v; want both /80s and the IPv4 address unchanged", e.IPv6Prefixes, e.IPs)
	}
	if !inv.Trusted("eni-1", in(mine)) || inv.Trusted("eni-1", in(described)) {
		t.Errorf("trusted: own /80 %v, described /80 %v; want true, false", inv.Trusted("eni-1", in(mine)), inv.Trusted("eni-1", in(described)))
	}
	inv.RecordUnassignedIPv6Prefixes("eni-1", []netip.Prefix{mine})
	if e, _ := inv.ENI("eni-1"); !slices.Equal(e.IPv6Prefixes, []netip.Prefix{described}) {
		t.Errorf("after the unassign: IPv6 prefixes %v, want the described one alone", e.IPv6Prefixes)
	}
	if inv.Trusted("eni-1", in(mine)) {
		t.Error("an address of a /80 unassigned here is still trusted")
	}
}
