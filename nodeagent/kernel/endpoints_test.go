package kernel_test

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

// observe reads the namespace's routes, then its links, as the agent
// does, and answers for ips.
func observe(t *testing.T, ns *kerneltest.Namespace, ips ...string) routing.Endpoints {
	t.Helper()
	k := ns.Kernel()
	routes, err := k.Routes()
	if err != nil {
		t.Fatal(err)
	}
	links, err := k.Links()
	if err != nil {
		t.Fatal(err)
	}
	return routing.ObserveEndpoints(addrs(ips...), routes, links)
}

func strs(ips []netip.Addr) []string {
	out := []string{}
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

func wantEndpoints(t *testing.T, got routing.Endpoints, routes bool, present, absent []string) {
	t.Helper()
	if got.Routes != routes || !slices.Equal(strs(got.Present), present) || !slices.Equal(strs(got.Absent), absent) {
		t.Fatalf("endpoints = routes %v, present %v, absent %v; want routes %v, present %v, absent %v",
			got.Routes, strs(got.Present), strs(got.Absent), routes, present, absent)
	}
}

// TestObserveEndpointsFollowsCiliumEndpointRoutes: a node as Cilium with
// endpointRoutes wires it (each pod a veth lxc… with a /32 route to the
// pod's address through it in main). An address is present while its
// pod's endpoint is there, absent once the pod's veth is deleted (CNI
// DEL: the kernel drops the route with the link), and nothing is absent
// while any endpoint is half made (a link without its route yet), nor
// on a node without endpoint routes. Cilium's unreachable route for a
// released address counts as no endpoint.
func TestObserveEndpointsFollowsCiliumEndpointRoutes(t *testing.T) {
	node := kerneltest.New(t)
	podA, podB := kerneltest.New(t), kerneltest.New(t)
	kerneltest.ConnectPod(t, node, "lxc0a1b2c3d", podA, "10.0.2.10")
	kerneltest.ConnectPod(t, node, "lxc1f2e3d4c", podB, "10.0.2.11")

	wantEndpoints(t, observe(t, node, "10.0.2.10", "10.0.2.11", "10.0.2.12"),
		true, []string{"10.0.2.10", "10.0.2.11"}, []string{"10.0.2.12"})

	// Pod B's CNI DEL: its veth goes, and its route with it.
	node.DelLink(t, "lxc1f2e3d4c")
	wantEndpoints(t, observe(t, node, "10.0.2.10", "10.0.2.11", "10.0.2.12"),
		true, []string{"10.0.2.10"}, []string{"10.0.2.11", "10.0.2.12"})

	// Cilium's unreachable-routes: the released address gets a route
	// with no link; still no endpoint.
	_, dst, _ := net.ParseCIDR("10.0.2.11/32")
	if err := node.Handle.RouteAdd(&netlink.Route{Dst: dst, Type: unix.RTN_UNREACHABLE, Table: unix.RT_TABLE_MAIN}); err != nil {
		t.Fatal(err)
	}
	wantEndpoints(t, observe(t, node, "10.0.2.11"), true, nil, []string{"10.0.2.11"})

	// A pod's endpoint half made: its veth is there, its route not yet
	// (the route comes with the endpoint's first regeneration). Nothing
	// is absent until it has its route.
	podC := kerneltest.New(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lxc9a8b7c6d"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(podC.NS)}
	if err := node.Handle.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	node.LinkUp(t, "lxc9a8b7c6d")
	wantEndpoints(t, observe(t, node, "10.0.2.10", "10.0.2.11", "10.0.2.12"), false, []string{"10.0.2.10"}, nil)
	node.AddRoute(t, "10.0.2.12/32", "", "lxc9a8b7c6d")
	wantEndpoints(t, observe(t, node, "10.0.2.10", "10.0.2.11", "10.0.2.12"),
		true, []string{"10.0.2.10", "10.0.2.12"}, []string{"10.0.2.11"})
}

// TestObserveEndpointsTrustsNoAbsenceWithoutEndpointRoutes: Cilium
// without endpointRoutes routes pods through cilium_host, so no lxc link
// has a route of its own: a missing /32 says nothing, and no address is
// reported absent. Nor on a node with no endpoint at all.
func TestObserveEndpointsTrustsNoAbsenceWithoutEndpointRoutes(t *testing.T) {
	node := kerneltest.New(t)
	wantEndpoints(t, observe(t, node, "10.0.2.10"), false, nil, nil)

	pod := kerneltest.New(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lxc0a1b2c3d"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(pod.NS)}
	if err := node.Handle.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	node.LinkUp(t, "lxc0a1b2c3d")
	node.AddENILink(t, "cilium_host", "02:00:00:00:00:99")
	node.LinkUp(t, "cilium_host")
	node.AddRoute(t, "10.0.2.0/24", "", "cilium_host")
	wantEndpoints(t, observe(t, node, "10.0.2.10", "10.0.2.11"), false, nil, nil)
}
