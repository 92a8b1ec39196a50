package tracker

import (
	"slices"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/client-go/tools/cache"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/room"
)

// The informers' handlers: each updates the tracker under its lock and
// wakes View's waiters.

// podSeen files a pod without an address under the node it is bound to
// or nominated for; once placed it needs no hold.
func (t *Tracker) podSeen(obj any) {
	p, ok := obj.(*waiting.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	if s, ok := t.sights[p.Owner()]; !ok || s.uid != p.UID {
		t.sights[p.Owner()] = sight{uid: p.UID, seq: t.seq}
	}
	t.pods.Put(p)
	if p.Target() != "" {
		t.dropHold(p.UID)
	}
	t.notify()
}

// podGone handles a pod that left the watch: deleted, finished, or given
// its address. A bound pod that was not being deleted has most likely
// started; it keeps its promise until the node's status.ipam.used lists
// it, or for StartedGrace.
func (t *Tracker) podGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*waiting.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.pods.Remove(p.UID); old != nil {
		p = old
	}
	t.dropHold(p.UID)
	owner := p.Owner()
	started := false
	if p.Node != "" && !p.Deleting() {
		if !t.hasAddress(t.pools[p.Node], owner) {
			t.started.Add(p.Node, owner, t.now())
			started = true
		}
	}
	if s, ok := t.sights[owner]; ok && s.uid == p.UID {
		if started {
			s.left = t.now()
			t.sights[owner] = s
		} else {
			delete(t.sights, owner)
		}
	}
	t.notify()
}

// ciliumNodeSeen digests a node's pool, old being the CiliumNode as seen
// before (nil if none); started pods that the agent now lists as used
// stop being counted apart.
//
// Each owner the agent lists as used is dated (room.Pool.UsedBy): now,
// if one of its addresses was not listed for it before, else as before.
func (t *Tracker) ciliumNodeSeen(old, obj any) {
	cn, ok := obj.(*ciliumv2.CiliumNode)
	if !ok {
		return
	}
	was, _ := old.(*ciliumv2.CiliumNode)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	pool := room.Digest(cn, t.enis[cn.Name])
	prev := t.pools[cn.Name]
	for ip, e := range cn.Status.IPAM.Used {
		if e.Owner == "" {
			continue
		}
		since, listed := uint64(0), false
		if prev != nil && was != nil && was.Status.IPAM.Used[ip].Owner == e.Owner {
			since, listed = prev.UsedBy[e.Owner]
		}
		if !listed || since == 0 {
			since = t.seq
		}
		pool.UsedBy[e.Owner] = max(pool.UsedBy[e.Owner], since)
	}
	t.nodes[cn.Name] = cn
	t.pools[cn.Name] = &pool
	t.started.Forget(cn.Name, func(owner string) bool { return t.hasAddress(&pool, owner) })
	t.notify()
}

func (t *Tracker) ciliumNodeGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cn, ok := obj.(*ciliumv2.CiliumNode)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pools, cn.Name)
	delete(t.nodes, cn.Name)
	t.notify()
}

func (t *Tracker) routingSeen(obj any) {
	nr, ok := obj.(*enipamv1alpha1.NodeRouting)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if nr.Spec.Capacity == nil {
		delete(t.caps, nr.Name)
	} else {
		t.caps[nr.Name] = nr.Spec.Capacity
	}
	t.setENIs(nr.Name, nr.Spec.ENIs)
	t.notify()
}

func (t *Tracker) routingGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	nr, ok := obj.(*enipamv1alpha1.NodeRouting)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.caps, nr.Name)
	t.setENIs(nr.Name, nil)
	t.notify()
}

// setENIs records node's NodeRouting spec.enis and, when they differ from
// those its pool was digested with, digests the pool again: a NodeRouting
// write of the node's ENIs reaches placement (prefixes, settled stamps)
// as a CiliumNode write of its status.eni.enis does. Callers hold t.mu.
func (t *Tracker) setENIs(node string, enis []enipamv1alpha1.NodeENI) {
	if sameENIs(t.enis[node], enis) {
		return
	}
	if len(enis) == 0 {
		delete(t.enis, node)
	} else {
		t.enis[node] = enis
	}
	cn, prev := t.nodes[node], t.pools[node]
	if cn == nil || prev == nil {
		return
	}
	pool := room.Digest(cn, enis)
	// The same status.ipam.used as prev's: its owners keep their dates.
	pool.UsedBy = prev.UsedBy
	t.pools[node] = &pool
}

// sameENIs reports whether a and b say the same of what Digest reads.
func sameENIs(a, b []enipamv1alpha1.NodeENI) bool {
	return slices.EqualFunc(a, b, func(x, y enipamv1alpha1.NodeENI) bool {
		return x.ID == y.ID && slices.Equal(x.Addresses, y.Addresses) && slices.Equal(x.Prefixes, y.Prefixes)
	})
}

// hasAddress reports whether the agent lists owner in the pool's
// status.ipam.used for the pod of that name the tracker follows: an
// address of that owner appeared in the list after the tracker first saw
// the pod. One listed before is an earlier pod's of the same name (its
// sandbox not torn down yet, or torn down since the agent's last write):
// the pod still takes an address. Callers hold t.mu.
func (t *Tracker) hasAddress(pool *room.Pool, owner string) bool {
	if pool == nil {
		return false
	}
	since, ok := pool.UsedBy[owner]
	return ok && since > t.sights[owner].seq
}

func (t *Tracker) claimSeen(obj any) {
	c, ok := obj.(*enipamv1alpha1.StaticIPClaim)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.claims[c.Namespace+"/"+c.Name] = ClaimOf(c)
	t.notify()
}

func (t *Tracker) claimGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	c, ok := obj.(*enipamv1alpha1.StaticIPClaim)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.claims, c.Namespace+"/"+c.Name)
	t.notify()
}
