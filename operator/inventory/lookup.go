package inventory

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// maxLookupBatch bounds the instance IDs of one lookup (EC2 takes up to
// 200 values per filter).
const maxLookupBatch = 200

// lookupLinger is how long a lookup waits for others to join its batch:
// a wave of joining nodes costs each a tenth of a second and EC2 a handful
// of describes instead of two per node.
const lookupLinger = 100 * time.Millisecond

// instance returns a live instance, looking it up if it is not cached.
func (inv *Inventory) instance(ctx context.Context, id string) (cloud.Instance, error) {
	for attempt := 0; ; attempt++ {
		inv.mu.RLock()
		in, ok := inv.instances[id]
		missAt, missed := inv.notFound[id]
		inv.mu.RUnlock()
		switch {
		case ok && in.Live():
			return *in, nil
		case ok:
			return cloud.Instance{}, fmt.Errorf("instance %s is %s: %w", id, in.State, cloud.ErrNotFound)
		case missed && inv.now().Sub(missAt) < inv.opts.NotFoundRetry:
			return cloud.Instance{}, fmt.Errorf("instance %s: %w in EC2", id, cloud.ErrNotFound)
		case attempt > 0:
			return cloud.Instance{}, fmt.Errorf("instance %s: %w in EC2", id, cloud.ErrNotFound)
		}
		if err := inv.lookups.wait(ctx, id); err != nil {
			return cloud.Instance{}, err
		}
	}
}

// lookups batches the lookups of unknown instances: while one batch is in
// flight, new IDs gather for the next, so a thousand joining nodes cost a
// handful of describes, not a thousand.
type lookups struct {
	inv    *Inventory
	mu     sync.Mutex
	queued map[string]*lookup
	kick   chan struct{}
}

type lookup struct {
	done chan struct{}
	err  error
}

func newLookups(inv *Inventory) *lookups {
	return &lookups{inv: inv, queued: map[string]*lookup{}, kick: make(chan struct{}, 1)}
}

// wait queues id and blocks until its batch was looked up.
func (l *lookups) wait(ctx context.Context, id string) error {
	l.mu.Lock()
	w, ok := l.queued[id]
	if !ok {
		w = &lookup{done: make(chan struct{})}
		l.queued[id] = w
	}
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lookups) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(lookupLinger):
		}
		for {
			batch := l.take()
			if len(batch) == 0 {
				break
			}
			ids := make([]string, 0, len(batch))
			for id := range batch {
				ids = append(ids, id)
			}
			err := l.inv.refresh(ctx, ids)
			for _, w := range batch {
				w.err = err
				close(w.done)
			}
		}
	}
}

func (l *lookups) take() map[string]*lookup {
	l.mu.Lock()
	defer l.mu.Unlock()
	batch := map[string]*lookup{}
	for id, w := range l.queued {
		if len(batch) == maxLookupBatch {
			break
		}
		batch[id] = w
		delete(l.queued, id)
	}
	return batch
}

// refresh describes the named instances and their ENIs and installs them.
func (inv *Inventory) refresh(ctx context.Context, ids []string) error {
	start := inv.now()
	instances, enis, err := inv.api.GetInstances(ctx, ids)
	if err != nil {
		return fmt.Errorf("looking up %d instances, %w", len(ids), err)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	found := map[string]bool{}
	for i := range instances {
		in := instances[i].Untagged()
		found[in.ID] = true
		inv.instances[in.ID] = &in
		delete(inv.notFound, in.ID)
	}
	for _, id := range ids {
		if !found[id] {
			inv.notFound[id] = inv.now()
		}
	}
	for i := range enis {
		e := enis[i]
		if _, ok := inv.enis[e.ID]; ok && inv.touchedRecently(e.ID) {
			inv.confirm(&e, start)
			continue
		}
		inv.putENI(&e)
		inv.described(&e, start)
	}
	return nil
}

// touchedRecently reports a local change within the grace; the caller
// holds mu.
func (inv *Inventory) touchedRecently(id string) bool {
	t, ok := inv.touched[id]
	return ok && inv.now().Sub(t) < inv.opts.ConsistencyGrace
}

// flight lets concurrent callers share one run of a function.
type flight struct {
	done chan struct{}
	err  error
}

// shared runs fn once for key among concurrent callers; later callers
// (after it finished) run it again.
func shared(m *sync.Map, key string, ctx context.Context, fn func(context.Context) error) error {
	f := &flight{done: make(chan struct{})}
	if existing, loaded := m.LoadOrStore(key, f); loaded {
		f = existing.(*flight)
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.err = fn(ctx)
	m.Delete(key)
	close(f.done)
	return f.err
}

// RefreshENIs describes the named ENIs by ID and installs what EC2 shows:
// the way to learn that an attachment completed without waiting for a
// resync. ENIs EC2 does not show (yet) keep their cached state.
func (inv *Inventory) RefreshENIs(ctx context.Context, ids []string) error {
	start := inv.now()
	enis, err := inv.api.GetENIs(ctx, ids)
	if err != nil {
		return fmt.Errorf("describing %d ENIs, %w", len(ids), err)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for i := range enis {
		e := enis[i]
		if _, gone := inv.deleted[e.ID]; gone {
			continue
		}
		if old, ok := inv.enis[e.ID]; ok {
			// A describe that started before a local change of the
			// addresses may miss them, and may show the attachment as it
			// was before this process attached the ENI (describes lag):
			// only an attachment completing is news, and a detach this
			// process made completing (the ENI available), taken whole.
			if inv.touchedRecently(e.ID) && !detachCompleted(old, &e) {
				inv.confirm(&e, start)
				c := old.Clone()
				if attachmentCompleted(old, &e) {
					c.Status, c.AttachmentStatus = e.Status, e.AttachmentStatus
				}
				c.DeleteOnTermination = c.DeleteOnTermination || e.DeleteOnTermination
				e = c
				inv.putENI(&e)
				continue
			}
		}
		inv.putENI(&e)
		inv.described(&e, start)
	}
	return nil
}

// attachmentCompleted reports whether a describe shows the attachment the
// cache holds as attaching (to the same instance) now attached. Anything
// else a describe shows of an ENI this process changed within the
// consistency grace may predate the change: an ENI just attached shows no
// attachment for a while, and taking that word would drop it from the
// attachment poll, leaving its addresses out of the pool until the grace
// ended (minutes-long stalls in a joining wave).
func attachmentCompleted(cached, described *cloud.ENI) bool {
	return cached.AttachmentStatus == cloud.AttachmentAttaching && described.AttachmentStatus == cloud.AttachmentAttached &&
		described.InstanceID == cached.InstanceID
}

// detachCompleted reports whether a describe shows an ENI the cache holds
// as detaching (this process detached it) available: the detach is done,
// and the ENI can be deleted. An ENI is detached only long after it was
// attached, so no lagging describe shows it available.
func detachCompleted(cached, described *cloud.ENI) bool {
	return cached.AttachmentStatus == cloud.AttachmentDetaching && described.Status == cloud.ENIAvailable
}

// RefreshInstance looks an instance and its attached ENIs up again now,
// for when EC2 refused a change that the cache did not foresee (a device
// index already taken).
func (inv *Inventory) RefreshInstance(ctx context.Context, instanceID string) error {
	return inv.refresh(ctx, []string{instanceID})
}

// Holders returns, for each of ips that some cached ENI of the VPCs holds,
// the ID of the instance that ENI is attached to ("" when it is not
// attached). It scans every ENI, so callers ask only about addresses
// missing from where they were expected.
func (inv *Inventory) Holders(ips []netip.Addr) map[netip.Addr]string {
	if len(ips) == 0 {
		return nil
	}
	out := map[netip.Addr]string{}
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, e := range inv.enis {
		for _, ip := range ips {
			if e.HasIP(ip) {
				out[ip] = e.InstanceID
			}
		}
	}
	return out
}

// attachPoll is how often ENIs still attaching are described, all in one
// batched describe: their addresses reach pods only once EC2 says
// attached, and a joining wave must not cost a describe per node.
const attachPoll = time.Second

// watchAttachments describes the ENIs EC2 last showed attaching, in
// batches, every attachPoll until ctx ends.
func (inv *Inventory) watchAttachments(ctx context.Context) {
	ticker := time.NewTicker(attachPoll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		inv.pollAttachments(ctx)
	}
}

// pollAttachments describes the ENIs EC2 last showed attaching, in
// batches, and tells of those now attached.
func (inv *Inventory) pollAttachments(ctx context.Context) {
	inv.mu.RLock()
	ids := make([]string, 0, len(inv.attaching))
	for id := range inv.attaching {
		ids = append(ids, id)
	}
	inv.mu.RUnlock()
	for len(ids) > 0 {
		n := min(len(ids), maxLookupBatch)
		if err := inv.RefreshENIs(ctx, ids[:n]); err != nil {
			inv.log.Info("describing attaching ENIs failed; retrying", "enis", n, "error", err)
			return
		}
		inv.tellAttached(ids[:n])
		ids = ids[n:]
	}
}

// OnAttached registers f, called with every ENI whose attachment the
// attachment poll sees complete (its addresses may enter a pool now). It
// is set once, before Start.
func (inv *Inventory) OnAttached(f func(cloud.ENI)) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.onAttached = f
}

// tellAttached calls the OnAttached function with those of ids that EC2
// now shows attached.
func (inv *Inventory) tellAttached(ids []string) {
	inv.mu.RLock()
	f := inv.onAttached
	var done []cloud.ENI
	for _, id := range ids {
		if e, ok := inv.enis[id]; ok && f != nil && e.AttachmentStatus == cloud.AttachmentAttached {
			done = append(done, *e)
		}
	}
	inv.mu.RUnlock()
	for _, e := range done {
		f(e)
	}
}

// Attaching reports whether EC2 last showed the ENI's attachment
// attaching.
func (inv *Inventory) Attaching(eniID string) bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	_, ok := inv.attaching[eniID]
	return ok
}

// Location is where EC2 has an address, as the cache knows it.
type Location struct {
	// ENI holds the address; its zero value when no cached ENI does.
	ENI cloud.ENI
	// Found: some cached ENI holds the address; Primary: as its primary
	// address; InPrefix: inside one of its delegated prefixes.
	Found, Primary, InPrefix bool
}

// Locate finds the ENI that holds ip. It scans every cached ENI, so
// callers ask only about the few addresses of static claims.
func (inv *Inventory) Locate(ip netip.Addr) Location {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, e := range inv.enis {
		switch {
		case e.PrimaryIP == ip:
			return Location{ENI: e.Clone(), Found: true, Primary: true}
		case slices.Contains(e.IPs, ip):
			return Location{ENI: e.Clone(), Found: true}
		case e.HasIP(ip):
			return Location{ENI: e.Clone(), Found: true, InPrefix: true}
		}
	}
	return Location{}
}

// SubnetOf returns the known subnet whose CIDR contains ip.
func (inv *Inventory) SubnetOf(ip netip.Addr) (cloud.Subnet, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, d := range inv.vpcs {
		for _, s := range d.subnets {
			if s.CIDR.Contains(ip) {
				return *s, true
			}
		}
	}
	return cloud.Subnet{}, false
}

// InstanceOf returns a cached instance.
func (inv *Inventory) InstanceOf(id string) (cloud.Instance, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	in, ok := inv.instances[id]
	if !ok {
		return cloud.Instance{}, false
	}
	return *in, true
}

// AttachedTo returns the instance the cached ENI eniID is attached to, and
// whether the cache knows the ENI at all ("" for an ENI attached nowhere).
func (inv *Inventory) AttachedTo(eniID string) (instanceID string, known bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	e, ok := inv.enis[eniID]
	if !ok {
		return "", false
	}
	return e.InstanceID, true
}
