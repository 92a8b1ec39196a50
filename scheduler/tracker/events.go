package tracker

import (
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
	if p.Node != "" && !p.Deleting() {
		owner := p.Owner()
		if pool := t.pools[p.Node]; pool == nil || !inUse(pool, owner) {
			t.started.Add(p.Node, owner, t.now())
		}
	}
	t.notify()
}

// ciliumNodeSeen digests a node's pool; started pods that the agent now
// lists as used stop being counted apart.
func (t *Tracker) ciliumNodeSeen(obj any) {
	cn, ok := obj.(*ciliumv2.CiliumNode)
	if !ok {
		return
	}
	pool := room.Digest(cn)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pools[cn.Name] = &pool
	t.started.Forget(cn.Name, func(owner string) bool { return inUse(&pool, owner) })
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
	t.notify()
}

// inUse reports whether the agent lists owner in status.ipam.used.
func inUse(pool *room.Pool, owner string) bool {
	_, ok := pool.UsedBy[owner]
	return ok
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
