package agent_test

import (
	"net/netip"
	"slices"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestAgentReportsIPv6ApartFromIPv4: a dual-stack node under first
// interface index 0: the primary ENI holds the /80 2001:db8:1:0:a::/80,
// eni-a (device 1) the address 2001:db8:2::10 and the /80
// 2001:db8:2:0:b::/80, and the pool has 10.0.2.10 and a window address
// of each prefix. The report lists the IPv6 address and prefixes in
// their own fields (the primary's too: the main table routes it), keeps
// IPv4 in ips, and counts each family apart; the status answers Routes
// for a window address inside a routed /80. After a cleanup no count of
// either family is left.
func TestAgentReportsIPv6ApartFromIPv4(t *testing.T) {
	primary := awsENI("eni-primary", 0, "02:00:00:00:08:00", "10.0.1.0/24")
	primary.IPv6Prefixes = []iputil.Prefix{iputil.PrefixFrom(netip.MustParsePrefix("2001:db8:1:0:a::/80"))}
	eniA := awsENI("eni-a", 1, "02:00:00:00:08:01", "10.0.2.0/24")
	eniA.Addresses = []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("2001:db8:2::10"))}
	eniA.IPv6Prefixes = []iputil.Prefix{iputil.PrefixFrom(netip.MustParsePrefix("2001:db8:2:0:b::/80"))}
	cn := createCiliumNodeOnly(t, []awstypes.ENI{primary, eniA}, map[string]string{
		"10.0.2.10": "eni-a", "2001:db8:2:0:b::1": "eni-a", "2001:db8:1:0:a::1": "eni-primary",
	})
	createNodeRouting(t, cn.Name, 0)
	startAgent(t, testConfig(cn.Name), env.Config, fakeHostWith("02:00:00:00:08:00", "02:00:00:00:08:01"))

	eventually(t, "the IPv6 window addresses reported", func() bool {
		return reported(t, cn.Name, "eni-a", "2001:db8:2:0:b::1") && reported(t, cn.Name, "eni-primary", "2001:db8:1:0:a::1")
	})
	nr := nodeRouting(t, cn.Name)
	if nr.Status.RoutedENIs != 2 || nr.Status.RoutedIPs != 1 || nr.Status.RoutedIPv6 != 1 || nr.Status.RoutedIPv6Prefixes != 2 {
		t.Errorf("counts: %d ENIs, %d IPv4, %d IPv6 addresses, %d IPv6 prefixes; want 2, 1, 1, 2",
			nr.Status.RoutedENIs, nr.Status.RoutedIPs, nr.Status.RoutedIPv6, nr.Status.RoutedIPv6Prefixes)
	}
	p, a := nr.Status.ENIs[0], nr.Status.ENIs[1]
	if p.ID != "eni-primary" || !slices.Equal(p.IPv6Prefixes, []string{"2001:db8:1:0:a::/80"}) || len(p.IPv6) != 0 {
		t.Errorf("primary ENI reported %+v", p)
	}
	if a.ID != "eni-a" || !slices.Equal(a.IPs, []string{"10.0.2.10"}) || !slices.Equal(a.IPv6, []string{"2001:db8:2::10"}) ||
		!slices.Equal(a.IPv6Prefixes, []string{"2001:db8:2:0:b::/80"}) || len(a.Prefixes) != 0 {
		t.Errorf("eni-a reported %+v", a)
	}
	if nr.Status.Routes("eni-a", "2001:db8:3::1") {
		t.Error("an address outside every routed prefix is reported routed")
	}

	// A cleanup reports nothing routed, of either family.
	setCleanup(t, cn.Name, "test uninstall")
	eventually(t, "CleanedUp", func() bool {
		r, _ := readyReason(t, cn.Name)
		return r == enipamv1alpha1.ReasonCleanedUp
	})
	nr = nodeRouting(t, cn.Name)
	if len(nr.Status.ENIs) != 0 || nr.Status.RoutedENIs != 0 || nr.Status.RoutedIPs != 0 || nr.Status.RoutedIPv6 != 0 || nr.Status.RoutedIPv6Prefixes != 0 {
		t.Errorf("after cleanup: %d ENIs listed; counts %d ENIs, %d IPv4, %d IPv6 addresses, %d IPv6 prefixes; want none",
			len(nr.Status.ENIs), nr.Status.RoutedENIs, nr.Status.RoutedIPs, nr.Status.RoutedIPv6, nr.Status.RoutedIPv6Prefixes)
	}
}

// TestAgentReportsPrimaryWindowUnderFirstInterfaceIndex1: the primary ENI
// holds the node's IPv6 window, the /80 2001:db8:1:0:a::/80, and the
// spec starts at device 1; nothing is pooled yet. The agent reports the
// /80 on the primary ENI (the main table routes it), so the operator may
// pool the window's addresses, and installs no rule for it.
func TestAgentReportsPrimaryWindowUnderFirstInterfaceIndex1(t *testing.T) {
	primary := awsENI("eni-primary", 0, "02:00:00:00:09:00", "10.0.1.0/24")
	primary.IPv6Prefixes = []iputil.Prefix{iputil.PrefixFrom(netip.MustParsePrefix("2001:db8:1:0:a::/80"))}
	cn := createCiliumNodeOnly(t, []awstypes.ENI{primary}, nil)
	createNodeRouting(t, cn.Name, 1)
	host := fakeHostWith("02:00:00:00:09:00")
	startAgent(t, testConfig(cn.Name), env.Config, host)

	eventually(t, "the primary ENI's /80 reported", func() bool {
		return reported(t, cn.Name, "eni-primary", "2001:db8:1:0:a::1")
	})
	nr := nodeRouting(t, cn.Name)
	if nr.Status.RoutedIPv6Prefixes != 1 || nr.Status.RoutedIPs != 0 {
		t.Errorf("counts: %d IPv6 prefixes, %d IPv4; want 1, 0", nr.Status.RoutedIPv6Prefixes, nr.Status.RoutedIPs)
	}
	rules, err := host.Rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.IPv6 {
			t.Errorf("IPv6 rule installed for the primary ENI's window: %+v", r)
		}
	}
}
