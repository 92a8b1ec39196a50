// Package kerneltest gives tests a network namespace of their own, with
// links that stand in for ENIs, so the real kernel can be exercised without
// touching the host's network.
package kerneltest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/nodeagent/kernel"
)

// Namespace is a named network namespace that exists for one test.
type Namespace struct {
	// Name is its name under /run/netns (`ip netns exec <Name> ...`).
	Name string
	// NS is an open handle on it.
	NS netns.NsHandle
	// Handle speaks netlink inside it.
	Handle *netlink.Handle
}

var seq atomic.Int64

// RequireRoot skips the test unless it runs as root, which creating
// network namespaces needs. CI runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces; run the tests as root, as CI does")
	}
}

// New creates a fresh network namespace for tb and removes it when tb
// ends. The calling thread never leaves the host's namespace: the
// namespace is created on a throwaway locked thread.
func New(tb testing.TB) *Namespace {
	tb.Helper()
	RequireRoot(tb)
	name := fmt.Sprintf("enipam-test-%d-%d", os.Getpid(), seq.Add(1))
	errc := make(chan error, 1)
	go func() {
		// Locked and never unlocked: the runtime discards this thread,
		// which NewNamed moved into the new namespace.
		runtime.LockOSThread()
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		tb.Fatalf("creating network namespace %s: %v", name, err)
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		_ = netns.DeleteNamed(name)
		tb.Fatalf("opening network namespace %s: %v", name, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		_ = netns.DeleteNamed(name)
		tb.Fatalf("netlink handle in %s: %v", name, err)
	}
	n := &Namespace{Name: name, NS: ns, Handle: h}
	tb.Cleanup(func() {
		h.Close()
		ns.Close()
		if err := netns.DeleteNamed(name); err != nil {
			tb.Errorf("removing network namespace %s: %v", name, err)
		}
	})
	return n
}

// Kernel returns a routing.Host acting on the namespace.
func (n *Namespace) Kernel() *kernel.Kernel { return kernel.New(n.Handle, n.NS) }

// AddENILink creates a link named name carrying mac, as the kernel would
// show a freshly attached ENI: down, MTU 1500. It is one end of a veth
// pair (available everywhere, unlike dummy) whose peer, name+"p", stays in
// the namespace and is up. It returns the link's index.
func (n *Namespace) AddENILink(tb testing.TB, name, mac string) int {
	tb.Helper()
	hw, err := net.ParseMAC(mac)
	if err != nil {
		tb.Fatal(err)
	}
	peer := name + "p"
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: hw, MTU: 1500}, PeerName: peer}
	if err := n.Handle.LinkAdd(v); err != nil {
		tb.Fatalf("adding veth %s in %s: %v", name, n.Name, err)
	}
	p, err := n.Handle.LinkByName(peer)
	if err != nil {
		tb.Fatal(err)
	}
	if err := n.Handle.LinkSetUp(p); err != nil {
		tb.Fatal(err)
	}
	l, err := n.Handle.LinkByName(name)
	if err != nil {
		tb.Fatal(err)
	}
	return l.Attrs().Index
}

// DelLink removes a link, as a detached ENI disappears.
func (n *Namespace) DelLink(tb testing.TB, name string) {
	tb.Helper()
	l, err := n.Handle.LinkByName(name)
	if err != nil {
		tb.Fatal(err)
	}
	if err := n.Handle.LinkDel(l); err != nil {
		tb.Fatal(err)
	}
}

// Sysctl reads a sysctl (as "net/ipv4/conf/eth1/rp_filter") inside the
// namespace.
func (n *Namespace) Sysctl(tb testing.TB, key string) string {
	tb.Helper()
	var out string
	err := n.Do(func() error {
		data, err := os.ReadFile(filepath.Join("/proc/sys", key))
		out = strings.TrimSpace(string(data))
		return err
	})
	if err != nil {
		tb.Fatalf("reading %s in %s: %v", key, n.Name, err)
	}
	return out
}

// SetSysctl writes a sysctl inside the namespace.
func (n *Namespace) SetSysctl(tb testing.TB, key, value string) {
	tb.Helper()
	err := n.Do(func() error {
		return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644)
	})
	if err != nil {
		tb.Fatalf("writing %s in %s: %v", key, n.Name, err)
	}
}

// Do runs fn on a throwaway OS thread inside the namespace.
func (n *Namespace) Do(fn func() error) error { return kernel.InNamespace(n.NS, fn) }

// IPDump returns what iproute2's own `ip -4 rule show` and
// `ip -4 route show table all` print for the namespace, lines sorted: the
// node's routing as an administrator sees it, to compare before and after.
// IPv4 only: the IPv6 link-local routes a link gets when it comes up
// belong to the link; tests of enipam's IPv6 state read it themselves. Without an `ip` binary
// (a minimal CI image) the same dumps are read through netlink instead,
// each rule and route with the fields that tell them apart.
func (n *Namespace) IPDump(tb testing.TB) (rules, routes []string) {
	tb.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		return n.netlinkDump(tb)
	}
	ip := func(args ...string) []string {
		out, err := exec.Command("ip", append([]string{"-n", n.Name, "-4"}, args...)...).CombinedOutput()
		if err != nil {
			tb.Fatalf("ip %v in %s: %v\n%s", args, n.Name, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		slices.Sort(lines)
		return lines
	}
	return ip("rule", "show"), ip("route", "show", "table", "all")
}

// netlinkDump is IPDump through netlink: every IPv4 rule and every IPv4
// route of every table.
func (n *Namespace) netlinkDump(tb testing.TB) (rules, routes []string) {
	tb.Helper()
	rs, err := n.Handle.RuleList(netlink.FAMILY_V4)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range rs {
		mask := uint32(0)
		if r.Mask != nil {
			mask = *r.Mask
		}
		rules = append(rules, fmt.Sprintf("%s proto %d fwmark %#x/%#x", r, r.Protocol, r.Mark, mask))
	}
	rts, err := n.Handle.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range rts {
		routes = append(routes, fmt.Sprintf("%s proto %d scope %d type %d metric %d", r, r.Protocol, r.Scope, r.Type, r.Priority))
	}
	slices.Sort(rules)
	slices.Sort(routes)
	return rules, routes
}
