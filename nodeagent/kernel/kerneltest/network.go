package kerneltest

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Wire connects two namespaces with a veth pair: aName (carrying aMAC,
// left down at MTU 1500, as the kernel shows a freshly attached ENI) in a,
// bName (up) in b. It returns the index of aName and the MAC of bName.
func Wire(tb testing.TB, a *Namespace, aName, aMAC string, b *Namespace, bName string) (int, net.HardwareAddr) {
	tb.Helper()
	hw, err := net.ParseMAC(aMAC)
	if err != nil {
		tb.Fatal(err)
	}
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName, HardwareAddr: hw, MTU: 1500}, PeerName: bName, PeerNamespace: netlink.NsFd(b.NS)}
	if err := a.Handle.LinkAdd(v); err != nil {
		tb.Fatalf("adding veth %s (%s) - %s (%s): %v", aName, a.Name, bName, b.Name, err)
	}
	peer := b.LinkUp(tb, bName)
	l, err := a.Handle.LinkByName(aName)
	if err != nil {
		tb.Fatal(err)
	}
	return l.Attrs().Index, peer.Attrs().HardwareAddr
}

// LinkUp brings the named link up and returns it.
func (n *Namespace) LinkUp(tb testing.TB, name string) netlink.Link {
	tb.Helper()
	l, err := n.Handle.LinkByName(name)
	if err != nil {
		tb.Fatalf("link %s in %s: %v", name, n.Name, err)
	}
	if err := n.Handle.LinkSetUp(l); err != nil {
		tb.Fatalf("bringing %s up in %s: %v", name, n.Name, err)
	}
	return l
}

// AddAddr puts an address (CIDR notation) on the named link. An IPv6
// address skips duplicate address detection, so it is usable at once.
func (n *Namespace) AddAddr(tb testing.TB, name, cidr string) {
	tb.Helper()
	l, err := n.Handle.LinkByName(name)
	if err != nil {
		tb.Fatalf("link %s in %s: %v", name, n.Name, err)
	}
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		tb.Fatal(err)
	}
	if addr.IP.To4() == nil {
		addr.Flags |= unix.IFA_F_NODAD
	}
	if err := n.Handle.AddrAdd(l, addr); err != nil {
		tb.Fatalf("adding %s to %s in %s: %v", cidr, name, n.Name, err)
	}
}

// AddRoute adds a route to dst (CIDR, IPv4 or IPv6) through the named
// link, via gw when it is not empty, in the main table.
func (n *Namespace) AddRoute(tb testing.TB, dst, gw, dev string) {
	tb.Helper()
	l, err := n.Handle.LinkByName(dev)
	if err != nil {
		tb.Fatalf("link %s in %s: %v", dev, n.Name, err)
	}
	_, ipnet, err := net.ParseCIDR(dst)
	if err != nil {
		tb.Fatal(err)
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipnet, Scope: netlink.SCOPE_LINK}
	if gw != "" {
		r.Gw, r.Scope = net.ParseIP(gw), netlink.SCOPE_UNIVERSE
	}
	if err := n.Handle.RouteAdd(r); err != nil {
		tb.Fatalf("adding route %s via %q dev %s in %s: %v", dst, gw, dev, n.Name, err)
	}
}

// AddNeighbor adds a permanent neighbor entry: ip is at mac behind dev.
// Tests use it where a VPC's fabric, not ARP, would know the answer.
func (n *Namespace) AddNeighbor(tb testing.TB, dev, ip string, mac net.HardwareAddr) {
	tb.Helper()
	l, err := n.Handle.LinkByName(dev)
	if err != nil {
		tb.Fatalf("link %s in %s: %v", dev, n.Name, err)
	}
	family := netlink.FAMILY_V4
	if net.ParseIP(ip).To4() == nil {
		family = netlink.FAMILY_V6
	}
	err = n.Handle.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: family, State: netlink.NUD_PERMANENT, IP: net.ParseIP(ip), HardwareAddr: mac})
	if err != nil {
		tb.Fatalf("adding neighbor %s at %s on %s in %s: %v", ip, mac, dev, n.Name, err)
	}
}

// MAC returns the MAC of the named link.
func (n *Namespace) MAC(tb testing.TB, name string) net.HardwareAddr {
	tb.Helper()
	l, err := n.Handle.LinkByName(name)
	if err != nil {
		tb.Fatalf("link %s in %s: %v", name, n.Name, err)
	}
	return l.Attrs().HardwareAddr
}

// ConnectPod wires pod to node the way Cilium's legacy host routing does:
// a veth hostDev in node (up, a /32 route to the pod's address through it
// in main) and eth0 in pod carrying ip/32, whose default route goes via
// 169.254.1.1, which answers with hostDev's MAC. Both sides know each
// other's MAC statically.
func ConnectPod(tb testing.TB, node *Namespace, hostDev string, pod *Namespace, ip string) {
	tb.Helper()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostDev}, PeerName: "eth0", PeerNamespace: netlink.NsFd(pod.NS)}
	if err := node.Handle.LinkAdd(v); err != nil {
		tb.Fatalf("adding veth %s to pod %s: %v", hostDev, pod.Name, err)
	}
	host := node.LinkUp(tb, hostDev)
	pod.LinkUp(tb, "lo")
	podDev := pod.LinkUp(tb, "eth0")
	pod.AddAddr(tb, "eth0", ip+"/32")
	pod.AddRoute(tb, "169.254.1.1/32", "", "eth0")
	pod.AddRoute(tb, "0.0.0.0/0", "169.254.1.1", "eth0")
	pod.AddNeighbor(tb, "eth0", "169.254.1.1", host.Attrs().HardwareAddr)
	node.AddRoute(tb, ip+"/32", "", hostDev)
	node.AddNeighbor(tb, hostDev, ip, podDev.Attrs().HardwareAddr)
}

// ConnectPod6 gives a pod wired by ConnectPod an IPv6 address as well, the
// way Cilium's legacy host routing does: ip/128 on the pod's eth0, its
// default route via fe80::1 (answering with hostDev's MAC), and a /128
// route to ip through hostDev in the node's main table.
func ConnectPod6(tb testing.TB, node *Namespace, hostDev string, pod *Namespace, ip string) {
	tb.Helper()
	host, podDev := node.LinkUp(tb, hostDev), pod.LinkUp(tb, "eth0")
	pod.AddAddr(tb, "eth0", ip+"/128")
	pod.AddRoute(tb, "::/0", "fe80::1", "eth0")
	pod.AddNeighbor(tb, "eth0", "fe80::1", host.Attrs().HardwareAddr)
	node.AddRoute(tb, ip+"/128", "", hostDev)
	node.AddNeighbor(tb, hostDev, ip, podDev.Attrs().HardwareAddr)
}

// DropFrom makes the namespace drop every IPv6 packet from inside src
// (CIDR) that arrives on the named link: EC2's source/destination check
// for IPv6, where no rp_filter sysctl exists (a blackhole policy rule
// matching the incoming link and the source).
func (n *Namespace) DropFrom(tb testing.TB, iif, src string) {
	tb.Helper()
	_, ipnet, err := net.ParseCIDR(src)
	if err != nil {
		tb.Fatal(err)
	}
	r := netlink.NewRule()
	r.Family = netlink.FAMILY_V6
	r.Priority = 10
	r.IifName = iif
	r.Src = ipnet
	r.Type = unix.FR_ACT_BLACKHOLE
	if err := n.Handle.RuleAdd(r); err != nil {
		tb.Fatalf("dropping packets from %s on %s in %s: %v", src, iif, n.Name, err)
	}
}

// Capture records the IPv4 and IPv6 packets arriving on one link.
type Capture struct {
	fd   int
	seen chan [2]netip.Addr
	done chan struct{}
	log  map[[2]netip.Addr]int
}

// Capture starts recording the IPv4 and IPv6 packets received on the
// named link until the test ends.
func (n *Namespace) Capture(tb testing.TB, name string) *Capture {
	tb.Helper()
	l, err := n.Handle.LinkByName(name)
	if err != nil {
		tb.Fatalf("link %s in %s: %v", name, n.Name, err)
	}
	proto := htons(unix.ETH_P_ALL)
	var fd int
	err = n.Do(func() error {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: l.Attrs().Index})
	})
	if err != nil {
		tb.Fatalf("capturing on %s in %s: %v", name, n.Name, err)
	}
	tv := unix.NsecToTimeval(int64(50e6))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		tb.Fatal(err)
	}
	c := &Capture{fd: fd, seen: make(chan [2]netip.Addr, 1024), done: make(chan struct{}), log: map[[2]netip.Addr]int{}}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 2048)
		for {
			select {
			case <-c.done:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil || n < 20 {
				continue
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				// A socket of every protocol also sees what the link sends.
				continue
			}
			var src, dst netip.Addr
			switch buf[0] >> 4 {
			case 4:
				src, _ = netip.AddrFromSlice(buf[12:16])
				dst, _ = netip.AddrFromSlice(buf[16:20])
			case 6:
				if n < 40 {
					continue
				}
				src, _ = netip.AddrFromSlice(buf[8:24])
				dst, _ = netip.AddrFromSlice(buf[24:40])
			default:
				continue // ARP and the like
			}
			select {
			case c.seen <- [2]netip.Addr{src, dst}:
			default:
			}
		}
	}()
	tb.Cleanup(func() {
		close(c.done)
		<-stopped
		unix.Close(fd)
	})
	return c
}

// Saw reports whether a packet from src to dst has arrived so far.
func (c *Capture) Saw(src, dst string) bool {
	for {
		select {
		case p := <-c.seen:
			c.log[p]++
		default:
			return c.log[[2]netip.Addr{netip.MustParseAddr(src), netip.MustParseAddr(dst)}] > 0
		}
	}
}

// htons is v in network byte order, as AF_PACKET wants its protocol.
func htons(v uint16) uint16 { return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v)) }

// Serve accepts TCP connections on addr inside the namespace until the
// test ends, answering each with banner.
func (n *Namespace) Serve(tb testing.TB, addr, banner string) {
	tb.Helper()
	var ln net.Listener
	err := n.Do(func() (err error) {
		ln, err = net.Listen(network("tcp", addr), addr)
		return err
	})
	if err != nil {
		tb.Fatalf("listening on %s in %s: %v", addr, n.Name, err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(banner))
			c.Close()
		}
	}()
}

// Fetch connects from inside the namespace to dst (host:port), from the
// address src when it is not empty, and returns what the server sent.
func (n *Namespace) Fetch(src, dst string, timeout time.Duration) (string, error) {
	var out []byte
	err := n.Do(func() error {
		d := net.Dialer{Timeout: timeout}
		if src != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
		}
		c, err := d.Dial(network("tcp", dst), dst)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		out, err = io.ReadAll(c)
		return err
	})
	return string(out), err
}

// SendUDP sends one datagram from inside the namespace to dst (host:port),
// from the address src when it is not empty. Nothing need answer.
func (n *Namespace) SendUDP(tb testing.TB, src, dst string) {
	tb.Helper()
	err := n.Do(func() error {
		var laddr *net.UDPAddr
		if src != "" {
			laddr = &net.UDPAddr{IP: net.ParseIP(src)}
		}
		raddr, err := net.ResolveUDPAddr(network("udp", dst), dst)
		if err != nil {
			return err
		}
		c, err := net.DialUDP(network("udp", dst), laddr, raddr)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("enipam"))
		return err
	})
	if err != nil {
		tb.Fatalf("sending UDP to %s from %q in %s: %v", dst, src, n.Name, err)
	}
}

// network is proto restricted to the family of addr (host:port): "tcp6"
// for "[2001:db8::1]:80", "tcp4" otherwise, so an IPv4 test never gets a
// dual-stack socket.
func network(proto, addr string) string {
	if strings.HasPrefix(addr, "[") {
		return proto + "6"
	}
	return proto + "4"
}
