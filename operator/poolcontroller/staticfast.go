package poolcontroller

import (
	"slices"
)

// The fast move. A claimed address leaving node A waits, in the slow
// path, for Cilium's agent on A to answer the release handshake, which it
// does at its next CiliumNode write: up to ipam.ciliumNodeUpdateRate
// (15 s by default) after the mark. The operator may instead let the
// address leave A's pool on the word of A's enipam-agent, which sees A's
// kernel at once:
//
//  1. The operator has seen the address's pod (the claim's owner, or the
//     pod Cilium lists holding it) not bound to A, read from the
//     apiserver in the reconcile that asks (2), and again in the one that
//     acts (4).
//  2. Only then does it list the address in A's NodeRouting
//     spec.endpointQueries, with an optimistic lock on the version it
//     read without the address, so its write makes a new generation G,
//     which it remembers (memory.asked) while the address keeps leaving.
//     A pass in which it does not (the claim asks for A again, the only
//     way its pod is bound to A again) forgets it, so a later move asks
//     anew.
//  3. A's agent, having read a spec of generation G or later, reads the
//     main route table and then the links, and reports the address
//     Absent only if no /32 route leads to it through a link, and
//     endpoint routes are in use and complete: at least one lxc link, a
//     route to every one (nodeagent/routing.ObserveEndpoints).
//  4. The operator lets the address leave A's pool (released, as after
//     ready-for-release) only on a report for generation G or later that
//     lists it Absent, while Cilium's agent has not answered
//     do-not-release, and while step 1 still holds.
//
// Why it is safe. With Cilium's endpoint routes, a running endpoint's
// address has a route through its lxc link from its first regeneration
// until the endpoint is deleted (the kernel also drops it with the
// link). A force-deleted pod is gone from the API while it runs on until
// its CNI DEL: its route is still there, so its address is Present and
// the move waits, as it must. The answer was observed after the pod was
// seen gone (2 and 3 order it: query written after the pod read, report
// observed after the query was read), so it is never a report from the
// pod's lifetime; a report for an older generation, one written before
// an agent restart for an older generation, or none, is not used. After
// the observation only the claim's owner could get the entry on A
// (Cilium hands an owner-stamped entry to its owner alone), and the
// owner's pod is bound nowhere but the claim's target (the extender binds
// it only once the address is stamped there) — the same bound the
// handshake gives, whose ready-for-release is also one moment's word.
// An endpoint still being made when the agent looked (its link without
// its route) makes the answer unsure.
//
// What no route shows, and the handshake would: inside one CNI ADD,
// Cilium's plugin allocates the address a few calls before it creates the
// endpoint's link. Only a sandbox the kubelet was still building for the
// deleted pod can be there (no other pod gets a stamped entry, and no
// new one is bound to A), and the kubelet tears it down as soon as that
// ADD returns; an answer made inside that window lets the address go
// while the dying sandbox holds it on A for as long as its ADD and DEL
// take. That is the fast move's one exposure beyond the handshake's.
//
// Where the slow handshake remains: Cilium without endpoint routes (no
// lxc link has a route: nothing is ever Absent), a node without pods (no
// lxc link to prove endpoint routes by), an endpoint half made or half
// torn down at the moment of the look, an agent that does not answer
// (stopped, an older version, NodeRouting unreadable). A move in flight
// when an operator restarts asks again first (step 2), then is fast. The
// handshake is started in every case, alongside: whichever answers first
// lets the address go.

// endpointGone reports whether the node's agent found no endpoint holding
// ip in an observation made after this process asked (steps 3 and 4).
func (s *deciding) endpointGone(ip string) bool {
	g, ok := s.mem.asked[ip]
	if !ok || s.routing == nil || !slices.Contains(s.routing.Spec.EndpointQueries, ip) {
		return false
	}
	return s.routing.Status.Endpoints.EndpointGone(ip, g)
}

// askEndpoints makes the desired NodeRouting's spec.endpointQueries the
// addresses leaving the node whose pod is gone (step 2; writeRouting
// writes it). An address the spec
// already lists that this process did not ask about (an earlier process
// did, or its write was lost) is taken out first and asked again at the
// next look, so that its answer is one observed after this process saw
// the pod gone.
func (s *deciding) askEndpoints(queries []string) {
	// An address that stopped leaving (its pod came back, or its claim
	// asks for this node again) is no longer asked about by this process,
	// whatever becomes of the write below: asked again later, it takes a
	// new generation, and only an answer to that counts.
	for ip := range s.mem.asked {
		if !slices.Contains(queries, ip) {
			delete(s.mem.asked, ip)
		}
	}
	if s.routing == nil {
		return
	}
	have := s.routing.Spec.EndpointQueries
	var want []string
	again := false
	for _, ip := range queries {
		_, mine := s.mem.asked[ip]
		if slices.Contains(have, ip) && !mine {
			again = true
			continue
		}
		want = append(want, ip)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if slices.Equal(want, have) {
		return
	}
	s.routing.Spec.EndpointQueries = want
	if again {
		s.requeueWithin(staticRecheck)
	}
	s.r.log.Debug("endpoint queries", "node", s.cn.Name, "addresses", want)
}

// askedEndpoints remembers, once the NodeRouting's spec listing the
// queries want was written with generation g, the generation each
// address was asked at: the one it was first listed at by this process
// when have listed it already, else g.
func (s *nodeSync) askedEndpoints(have, want []string, g int64) {
	asked := map[string]int64{}
	for _, ip := range want {
		if g0, ok := s.mem.asked[ip]; ok && slices.Contains(have, ip) {
			asked[ip] = g0
		} else {
			asked[ip] = g
		}
	}
	s.mem.asked = asked
}
