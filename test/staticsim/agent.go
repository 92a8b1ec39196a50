package staticsim

import (
	"context"
	"slices"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// updateRate is Cilium's ipam.ciliumNodeUpdateRate: the agent's
// CiliumNode writes go through a trigger of this minimum interval.
const updateRate = 15 * time.Second

// agent is Cilium's agent of one node in ipam: crd mode, as
// pkg/ipam/crd.go of v1.20.2 behaves: ownNode is its last view of its
// CiliumNode (the watch delivers it late: observe runs when the step
// scheduler says so); allocated is its crdAllocator's map; its handshake
// answers change ownNode's status and are written, with status.ipam.used
// from allocated, by an UpdateStatus of the whole ownNode, through a
// trigger no more often than updateRate, retried on conflict.
type agent struct {
	node      string
	own       *ciliumv2.CiliumNode
	allocated map[string]held
	dirty     bool
	lastWrite time.Time
}

// held is one allocation: the owner Cilium records, and the pod (by UID)
// the simulation knows holds it.
type held struct {
	owner string
	uid   string
}

func newAgent(name string) *agent {
	return &agent{node: name, allocated: map[string]held{}}
}

// observe is the informer delivering the current CiliumNode:
// updateLocalNodeResource.
func (a *agent) observe(w *world) {
	cn := &ciliumv2.CiliumNode{}
	if !w.store.get(client.ObjectKey{Name: a.node}, cn) {
		return
	}
	a.own = cn
	if cn.Spec.IPAM.Pool == nil {
		return
	}
	for _, ip := range slices.Sorted(mapsKeys(cn.Status.IPAM.ReleaseIPs)) {
		status := cn.Status.IPAM.ReleaseIPs[ip]
		if status == ipamoption.IPAMReadyForRelease || status == ipamoption.IPAMDoNotRelease {
			continue
		}
		if _, ok := cn.Spec.IPAM.Pool[ip]; !ok {
			if status == ipamoption.IPAMReleased {
				delete(cn.Status.IPAM.ReleaseIPs, ip)
				a.dirty = true
			} else if status == ipamoption.IPAMMarkForRelease {
				cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMDoNotRelease
				a.dirty = true
			}
			continue
		}
		if status != ipamoption.IPAMMarkForRelease {
			continue
		}
		if _, ok := a.allocated[ip]; ok {
			cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMDoNotRelease
		} else {
			cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMReadyForRelease
		}
		w.logf("agent %s: %s %s (stamp %q)", a.node, cn.Status.IPAM.ReleaseIPs[ip], ip, cn.Spec.IPAM.Pool[ip].Owner)
		a.dirty = true
	}
}

// flush is the trigger firing: refreshNode, at most once per updateRate.
// A conflict (ownNode stale) leaves the agent dirty: Cilium retries.
func (a *agent) flush(w *world) bool {
	if !a.dirty || a.own == nil || w.clock.Now().Before(a.lastWrite.Add(updateRate)) {
		return false
	}
	cn := a.own.DeepCopy()
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	for ip, h := range a.allocated {
		cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: h.owner, Resource: a.resource(ip)}
	}
	a.lastWrite = w.clock.Now()
	if err := w.c.Status().Update(context.Background(), cn); err != nil {
		return false
	}
	a.own = cn
	a.dirty = false
	return true
}

func (a *agent) resource(ip string) string {
	if a.own != nil {
		return a.own.Spec.IPAM.Pool[ip].Resource
	}
	return ""
}

// allocateNext is nodeStore.allocateNext and markAllocated: the entry
// stamped with owner, whatever its state (in the handshake, or held by
// another pod, which then shares it); else a free entry (not allocated,
// not in the handshake, no owner), picked by the seed among them as
// Cilium's map order would. It returns "" when there is none.
func (a *agent) allocateNext(w *world, owner, uid string) string {
	if a.own == nil {
		return ""
	}
	pool := a.own.Spec.IPAM.Pool
	ips := slices.Sorted(mapsKeys(pool))
	pick := ""
	for _, ip := range ips {
		if pool[ip].Owner == owner {
			pick = ip
			break
		}
	}
	if pick == "" {
		var free []string
		for _, ip := range ips {
			if _, taken := a.allocated[ip]; taken || a.inHandshake(ip) || pool[ip].Owner != "" {
				continue
			}
			free = append(free, ip)
		}
		if len(free) == 0 {
			return ""
		}
		pick = free[w.rng.IntN(len(free))]
	}
	if h, ok := a.allocated[pick]; ok && h.uid != uid {
		w.violate("%s on %s handed to %s while pod %s holds it", pick, a.node, owner, h.owner)
	}
	a.allocated[pick] = held{owner: owner, uid: uid}
	a.dirty = true
	return pick
}

func (a *agent) inHandshake(ip string) bool {
	switch a.own.Status.IPAM.ReleaseIPs[ip] {
	case ipamoption.IPAMMarkForRelease, ipamoption.IPAMReadyForRelease, ipamoption.IPAMReleased:
		return true
	}
	return false
}

// release is a CNI DEL.
func (a *agent) release(uid string) {
	for ip, h := range a.allocated {
		if h.uid == uid {
			delete(a.allocated, ip)
			a.dirty = true
		}
	}
}

// route plays the node's enipam-agent: it reports routed what the real
// agent would route (agentsim.Routed), on ENIs EC2 shows attached.
func (w *world) route(name string) {
	ctx := context.Background()
	nr := &enipamv1alpha1.NodeRouting{}
	if !w.store.get(client.ObjectKey{Name: name}, nr) {
		return
	}
	cn := &ciliumv2.CiliumNode{}
	if !w.store.get(client.ObjectKey{Name: name}, cn) {
		return
	}
	attached := map[string]bool{}
	for _, e := range w.dump().NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.Status == "attached" {
			attached[e.NetworkInterfaceID] = true
		}
	}
	enis := agentsim.Routed(cn, &nr.Spec, func(id string) bool { return attached[id] })
	remaps := w.remaps(nr)
	if sameRouted(nr.Status.ENIs, enis) && equality.Semantic.DeepEqual(nr.Status.Remaps, remaps) && nr.Status.RoutesSpecENIs &&
		nr.Status.ObservedGeneration == nr.Generation {
		return
	}
	if remaps != nil {
		for _, ip := range remaps.Landed {
			if nr.Status.Remaps == nil || !slices.Contains(nr.Status.Remaps.Landed, ip) {
				w.landings++
				w.logf("agent %s: remap of %s landed (instance metadata)", name, ip)
			}
		}
	}
	nr.Status.ENIs = enis
	// It routes spec.enis, and reports over the spec's generation it
	// read, as enipam-agent does (the operator reads a report over an
	// earlier generation against the newer spec.enis).
	nr.Status.RoutesSpecENIs = true
	nr.Status.ObservedGeneration = nr.Generation
	nr.Status.RoutedENIs = int32(len(enis))
	nr.Status.Remaps = remaps
	_ = w.c.Status().Update(ctx, nr)
}

// remaps answers the NodeRouting's remap queries as enipam-agent does,
// from its instance's metadata: EC2's state now (the metadata lists an
// address on an ENI once its remap landed; describes may lag it), for
// the spec's generation it read.
func (w *world) remaps(nr *enipamv1alpha1.NodeRouting) *enipamv1alpha1.RemapReport {
	return agentsim.RemapsFromState(nr, w.dump().NetworkInterfaces)
}

func sameRouted(a, b []enipamv1alpha1.RoutedENI) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || !slices.Equal(a[i].IPs, b[i].IPs) || !slices.Equal(a[i].Prefixes, b[i].Prefixes) {
			return false
		}
	}
	return true
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
