package routing

import (
	"net/netip"
	"slices"
	"strings"
)

// EndpointLinkPrefix begins the name of the host side of every link
// Cilium's CNI plugin makes for an endpoint ("lxc" and a hash of the
// endpoint's ID, veth or netkit alike, and "lxc_health" for its health
// endpoint).
const EndpointLinkPrefix = "lxc"

// Endpoints is what the kernel shows of the pod endpoints holding some
// addresses (ObserveEndpoints).
type Endpoints struct {
	// Routes: Cilium's endpoint routes are in use and complete on the
	// node: at least one endpoint link, each the device of a host route
	// (/32, or /128 for IPv6) in the main table.
	Routes bool
	// Present are the addresses a host route of the main table leads to
	// through a link; Absent the others, only when Routes.
	Present, Absent []netip.Addr
}

// ObserveEndpoints answers, for each of ips, whether a pod endpoint on the
// node may still hold it, from the routes of the main table and the links,
// read in that order.
//
// With endpoint routes (Cilium's endpointRoutes.enabled; in v1.20
// pkg/datapath/loader's reloadEndpoint upserts the route at every
// regeneration, Unload removes it when the endpoint is deleted, and the
// route reconciler keeps restored endpoints' routes across an agent
// restart), an endpoint's address has a /32 route through its lxc link
// from its first regeneration until its deletion, and the kernel removes
// the route with the link. Without them (the default, or an external
// routing plugin chained in front) no lxc link has a route, and a missing
// route says nothing: then nothing is reported Absent.
//
// An endpoint under construction has its link before its route, and one
// being deleted loses its route before its link: a link without a route
// therefore makes the whole answer unsure (Routes false), so no address
// is reported Absent while any endpoint is half made. Reading routes
// before links keeps that true across the two reads: an endpoint whose
// route came too late for the first read still has its link in the
// second, unless it was torn down meanwhile.
//
// What no route can show: between Cilium's IPAM allocation and the
// creation of the endpoint's link (the CNI plugin allocates first), the
// address is held and nothing on the node says so. The operator asks only
// about an address whose pod it has seen gone from the node, so only a
// sandbox the kubelet was still building for that deleted pod can be in
// that window (see poolcontroller's staticfast.go).
func ObserveEndpoints(ips []netip.Addr, routes []Route, links []Link) Endpoints {
	routed := map[int]bool{}       // links some host route of the main table leads to
	hosts := map[netip.Addr]bool{} // host route destinations through a link
	for _, r := range routes {
		if r.Table != MainTable || r.LinkIndex == 0 || !r.Dst.IsSingleIP() {
			continue // unreachable routes (Cilium's unreachable-routes) have no link
		}
		routed[r.LinkIndex] = true
		hosts[r.Dst.Addr()] = true
	}
	var out Endpoints
	endpoints := 0
	complete := true
	for _, l := range links {
		if !strings.HasPrefix(l.Name, EndpointLinkPrefix) {
			continue
		}
		endpoints++
		if !routed[l.Index] {
			complete = false
		}
	}
	out.Routes = endpoints > 0 && complete
	for _, ip := range ips {
		switch {
		case hosts[ip]:
			out.Present = append(out.Present, ip)
		case out.Routes:
			out.Absent = append(out.Absent, ip)
		}
	}
	slices.SortFunc(out.Present, netip.Addr.Compare)
	slices.SortFunc(out.Absent, netip.Addr.Compare)
	return out
}
