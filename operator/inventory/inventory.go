// Package inventory is the operator's VPC-wide cache of EC2: instances,
// ENIs, subnets, security groups and instance types. It is filled by
// filtered, paginated describes of whole VPCs at start and on a slow
// interval — never a describe per node per pass — plus batched lookups of
// instances it has not seen yet, and it is updated locally after each of
// the operator's own changes so planning never waits for a resync.
//
// Every method is safe for concurrent use; no lock is held across a call
// to the cloud.
package inventory

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// Options tune the inventory.
type Options struct {
	// VPCIDs are synced from the start; VPCs of instances met later are
	// added as they appear.
	VPCIDs []string
	// ResyncInterval is how often every known VPC is described again.
	ResyncInterval time.Duration
	// ConsistencyGrace is how long a local change outweighs what a
	// describe says, covering EC2's eventual consistency and describes
	// that started before the change.
	ConsistencyGrace time.Duration
	// NotFoundRetry is how long an instance EC2 did not know is answered
	// from memory before it is looked up again.
	NotFoundRetry time.Duration
	// OnSynced, if set, runs once the first sync succeeded, before
	// Synced is closed (before any allocation).
	OnSynced func(*Inventory)
	// Now is the inventory's clock; nil is time.Now. A simulation that
	// drives the inventory with SyncOnce instead of Start drives its own.
	Now func() time.Time
}

// Inventory is the cache. Create it with New and run Start.
type Inventory struct {
	api  cloud.API
	opts Options
	log  *slog.Logger
	now  func() time.Time

	mu        sync.RWMutex
	vpcs      map[string]*vpcData
	instances map[string]*cloud.Instance
	enis      map[string]*cloud.ENI
	// byInstance: instance ID → attached ENI IDs, a list (a set of
	// its own per instance cost a map each, ~190 bytes for two ENIs).
	byInstance map[string][]string
	unattached map[string]struct{}  // IDs of ENIs with status available
	inFlight   map[string]inFlight  // ENI ID → its attach by the pool controller
	attaching  map[string]struct{}  // IDs of ENIs whose attachment EC2 last showed attaching
	touched    map[string]time.Time // instance or ENI ID → last local change
	deleted    map[string]time.Time // ENI ID → deleted locally
	detached   map[string]struct{}  // IDs of ENIs detached locally, not deleted yet
	created    map[string]time.Time // ENI ID → created by this operator
	notFound   map[string]time.Time // instance ID → EC2 did not know it
	// describedAt is when the describe that last installed each ENI
	// started; trustFrom is Start plus the grace. A describe that started
	// before trustFrom may still show what an earlier operator process
	// changed (an address it unassigned just before it died), so an
	// address it shows is vouched for only by a later describe, or by this
	// process's own Assign (assignedHere).
	describedAt  map[string]time.Time
	trustFrom    time.Time
	assignedHere map[netip.Addr]struct{}
	// confirmed are the addresses a describe by ID started after
	// trustFrom showed on an ENI whose cached view it could not replace
	// (local changes were newer).
	confirmed map[string]map[netip.Addr]struct{}
	// assignedHere6 and confirmed6 are the same for IPv6 /80 prefixes,
	// kept whole: a prefix holds 2^48 addresses.
	assignedHere6 map[netip.Prefix]struct{}
	confirmed6    map[string][]netip.Prefix
	// moving are the addresses this process reassigned onto another ENI
	// (RecordMoved) that no describe has shown there yet: EC2 remaps an
	// address asynchronously, so until then it is not on the new ENI.
	moving map[netip.Addr]move
	// landedOn are the addresses the node's agent saw in the instance
	// metadata on the ENI they were reassigned onto (RecordLanded), until
	// a describe shows them there: trusted there whatever describes that
	// lag the remap say meanwhile.
	landedOn map[netip.Addr]string
	types    map[string]cloud.InstanceType
	// onAttached is called with each ENI whose attachment the attachment
	// poll saw complete.
	onAttached func(cloud.ENI)
	// subnetChanges are the operator's own changes of subnets' free
	// counts, re-applied over a describe that started before them.
	subnetChanges []subnetChange
	synced        chan struct{}
	syncedOnce    sync.Once

	lookups   *lookups
	addresses *Addresses
	vpcSync   sync.Map // vpc ID → *flight
	typeGet   sync.Map // type name → *flight
}

type subnetChange struct {
	at     time.Time
	subnet string
	delta  int
}

type vpcData struct {
	vpc            cloud.VPC
	subnets        map[string]*cloud.Subnet
	securityGroups map[string]*cloud.SecurityGroup
	syncedAt       time.Time
}

// New returns an inventory that reads from api; it does nothing until
// Start.
func New(api cloud.API, opts Options, log *slog.Logger) *Inventory {
	inv := &Inventory{
		api:           api,
		opts:          opts,
		log:           log,
		now:           time.Now,
		vpcs:          map[string]*vpcData{},
		instances:     map[string]*cloud.Instance{},
		enis:          map[string]*cloud.ENI{},
		byInstance:    map[string][]string{},
		unattached:    map[string]struct{}{},
		inFlight:      map[string]inFlight{},
		attaching:     map[string]struct{}{},
		touched:       map[string]time.Time{},
		deleted:       map[string]time.Time{},
		created:       map[string]time.Time{},
		notFound:      map[string]time.Time{},
		describedAt:   map[string]time.Time{},
		assignedHere:  map[netip.Addr]struct{}{},
		assignedHere6: map[netip.Prefix]struct{}{},
		confirmed6:    map[string][]netip.Prefix{},
		confirmed:     map[string]map[netip.Addr]struct{}{},
		moving:        map[netip.Addr]move{},
		landedOn:      map[netip.Addr]string{},
		types:         map[string]cloud.InstanceType{},
		synced:        make(chan struct{}),
	}
	if opts.Now != nil {
		inv.now = opts.Now
	}
	inv.lookups = newLookups(inv)
	inv.addresses = newAddresses(api, opts.ResyncInterval, opts.ConsistencyGrace, func() time.Time { return inv.now() }, func() time.Time {
		inv.mu.Lock()
		defer inv.mu.Unlock()
		return inv.trustFrom
	})
	return inv
}

// Start syncs the configured VPCs (retrying until it succeeds), marks the
// inventory synced, then resyncs every known VPC on the interval until ctx
// ends.
func (inv *Inventory) Start(ctx context.Context) error {
	inv.mu.Lock()
	inv.trustFrom = inv.now().Add(inv.opts.ConsistencyGrace)
	inv.mu.Unlock()
	go inv.lookups.run(ctx)
	go inv.watchAttachments(ctx)
	backoff := time.Second
	for {
		err := inv.resyncAll(ctx, inv.opts.VPCIDs)
		if err == nil {
			break
		}
		inv.log.Error("initial EC2 sync failed; no allocation until it succeeds", "error", err, "retryIn", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
	inv.syncedOnce.Do(func() {
		if inv.opts.OnSynced != nil {
			inv.opts.OnSynced(inv)
		}
		close(inv.synced)
	})
	ticker := time.NewTicker(inv.opts.ResyncInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if err := inv.resyncAll(ctx, inv.knownVPCs()); err != nil {
				inv.log.Error("EC2 resync failed; keeping the previous view", "error", err)
			}
		}
	}
}

// SyncOnce is Start's work done once, in the caller, with no goroutine
// and no timer, for a driver that steps the inventory by hand (a
// simulation on its own clock): it describes every configured and known
// VPC, then the ENIs EC2 last showed attaching (telling OnAttached of
// those now attached). The first call that succeeds sets the trust
// horizon, runs OnSynced and closes Synced, as Start's first sync does.
// Instances it has not seen are not looked up in the background: they
// must be in a synced VPC. Never call it beside Start.
func (inv *Inventory) SyncOnce(ctx context.Context) error {
	first := false
	select {
	case <-inv.synced:
	default:
		first = true
		inv.mu.Lock()
		if inv.trustFrom.IsZero() {
			inv.trustFrom = inv.now().Add(inv.opts.ConsistencyGrace)
		}
		inv.mu.Unlock()
	}
	vpcs := inv.opts.VPCIDs
	if !first {
		vpcs = inv.knownVPCs()
	}
	if err := inv.resyncAll(ctx, vpcs); err != nil {
		return err
	}
	if first {
		inv.syncedOnce.Do(func() {
			if inv.opts.OnSynced != nil {
				inv.opts.OnSynced(inv)
			}
			close(inv.synced)
		})
	}
	inv.pollAttachments(ctx)
	return nil
}

// Synced is closed once the first sync succeeded.
func (inv *Inventory) Synced() <-chan struct{} { return inv.synced }

func (inv *Inventory) knownVPCs() []string {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return slices.Sorted(maps.Keys(inv.vpcs))
}

func (inv *Inventory) resyncAll(ctx context.Context, vpcIDs []string) error {
	for _, id := range vpcIDs {
		if err := inv.syncVPC(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// ensureVPC syncs a VPC met for the first time; concurrent callers share
// one sync.
func (inv *Inventory) ensureVPC(ctx context.Context, vpcID string) error {
	inv.mu.RLock()
	_, ok := inv.vpcs[vpcID]
	inv.mu.RUnlock()
	if ok {
		return nil
	}
	return shared(&inv.vpcSync, vpcID, ctx, func(ctx context.Context) error { return inv.syncVPC(ctx, vpcID) })
}

// syncVPC describes a whole VPC and installs the result.
func (inv *Inventory) syncVPC(ctx context.Context, vpcID string) error {
	start := inv.now()
	vpc, err := inv.api.DescribeVPC(ctx, vpcID)
	if err != nil {
		return fmt.Errorf("describing VPC %s, %w", vpcID, err)
	}
	subnets, err := inv.api.ListSubnets(ctx, vpcID)
	if err != nil {
		return fmt.Errorf("listing subnets of %s, %w", vpcID, err)
	}
	groups, err := inv.api.ListSecurityGroups(ctx, vpcID)
	if err != nil {
		return fmt.Errorf("listing security groups of %s, %w", vpcID, err)
	}
	instances, err := inv.api.ListInstances(ctx, vpcID, inv.knownInstance)
	if err != nil {
		return fmt.Errorf("listing instances of %s, %w", vpcID, err)
	}
	enis, err := inv.api.ListENIs(ctx, vpcID, inv.known)
	if err != nil {
		return fmt.Errorf("listing ENIs of %s, %w", vpcID, err)
	}
	inv.install(start, vpc, subnets, groups, instances, enis)
	inv.log.Debug("synced VPC", "vpc", vpcID, "instances", len(instances), "enis", len(enis), "subnets", len(subnets))
	return nil
}

// known is the inventory's view of an ENI, for ListENIs to return in
// place of an Equal one it describes. Entries are never changed in place
// (see update), so the view may share their lists and map.
func (inv *Inventory) known(eniID string) (cloud.ENI, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	if e, ok := inv.enis[eniID]; ok {
		return *e, true
	}
	return cloud.ENI{}, false
}

// knownInstance is the inventory's view of an instance, for
// ListInstances to return in place of an Equal one it describes. Entries
// are never changed in place, so the view may share their tags.
func (inv *Inventory) knownInstance(id string) (cloud.Instance, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	if in, ok := inv.instances[id]; ok {
		return *in, true
	}
	return cloud.Instance{}, false
}

// install replaces what the inventory knows of a VPC with a describe
// that started at start, keeping local changes younger than the grace.
func (inv *Inventory) install(start time.Time, vpc cloud.VPC, subnets []cloud.Subnet, groups []cloud.SecurityGroup, instances []cloud.Instance, enis []cloud.ENI) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	fresh := func(id string) bool {
		t, ok := inv.touched[id]
		return ok && t.After(start.Add(-inv.opts.ConsistencyGrace))
	}

	d := &vpcData{vpc: vpc, subnets: map[string]*cloud.Subnet{}, securityGroups: map[string]*cloud.SecurityGroup{}, syncedAt: start}
	for i := range subnets {
		d.subnets[subnets[i].ID] = &subnets[i]
	}
	kept := inv.subnetChanges[:0]
	for _, c := range inv.subnetChanges {
		if !c.at.After(start) {
			continue // the describe saw it
		}
		kept = append(kept, c)
		if sn, ok := d.subnets[c.subnet]; ok {
			sn.Available = max(0, sn.Available+c.delta)
		}
	}
	inv.subnetChanges = kept
	for i := range groups {
		d.securityGroups[groups[i].ID] = &groups[i]
	}
	inv.vpcs[vpc.ID] = d

	// What is kept is copied out of the describe's slices: a pointer into
	// one would keep the whole slice (thousands of entries and its
	// append slack) alive for as long as any entry stays, and two
	// resyncs' slices at once when one entry outlives a resync.
	// An instance EC2 shows unchanged keeps its entry, as an ENI does: a
	// new copy of every instance each resync would be thousands of
	// long-lived objects a minute allocated among the describes' garbage,
	// each pinning a span the garbage leaves mostly free.
	seen := make(map[string]bool, len(instances))
	for i := range instances {
		in := instances[i].Untagged()
		seen[in.ID] = true
		delete(inv.notFound, in.ID)
		if old, ok := inv.instances[in.ID]; fresh(in.ID) || ok && old.Equal(&in) {
			continue
		}
		inv.instances[in.ID] = &in
	}
	for id, in := range inv.instances {
		if in.VPCID == vpc.ID && !seen[id] && !fresh(id) {
			delete(inv.instances, id)
		}
	}

	described := make(map[string]bool, len(enis))
	for i := range enis {
		e := &enis[i]
		described[e.ID] = true
		if _, gone := inv.deleted[e.ID]; gone && fresh(e.ID) {
			continue
		}
		if fresh(e.ID) || (e.InstanceID != "" && fresh(e.InstanceID)) {
			if _, ok := inv.enis[e.ID]; ok {
				inv.confirm(e, start)
				continue // the local view is newer
			}
		}
		kept := e
		if old, ok := inv.enis[e.ID]; ok && old.Equal(e) {
			kept = old // unchanged: no new copy to keep for a minute
		} else {
			c := *e
			kept = &c
		}
		inv.putENI(kept)
		inv.described(kept, start)
	}
	for id, e := range inv.enis {
		if e.VPCID == vpc.ID && !described[id] && !fresh(id) && !(e.InstanceID != "" && fresh(e.InstanceID)) {
			inv.dropENI(id)
		}
	}
	for id, t := range inv.touched {
		if t.Before(start.Add(-inv.opts.ConsistencyGrace)) {
			delete(inv.touched, id)
			delete(inv.deleted, id)
			delete(inv.created, id)
		}
	}
}

// putENI stores e and indexes it; the caller holds mu.
func (inv *Inventory) putENI(e *cloud.ENI) {
	if old, ok := inv.enis[e.ID]; ok && old.InstanceID != "" && old.InstanceID != e.InstanceID {
		inv.unindex(old.InstanceID, e.ID)
	}
	e = inv.overrideLanded(e)
	inv.enis[e.ID] = e
	if e.AttachmentStatus == cloud.AttachmentAttaching {
		inv.attaching[e.ID] = struct{}{}
	} else {
		delete(inv.attaching, e.ID)
	}
	if e.Status == cloud.ENIAvailable {
		inv.unattached[e.ID] = struct{}{}
	} else {
		delete(inv.unattached, e.ID)
	}
	if ids := inv.byInstance[e.InstanceID]; e.InstanceID != "" && !slices.Contains(ids, e.ID) {
		inv.byInstance[e.InstanceID] = append(ids, e.ID)
	}
}

// unindex takes id out of instance's ENIs, and the instance out of
// byInstance once it has none; the caller holds mu.
func (inv *Inventory) unindex(instance, id string) {
	ids := slices.DeleteFunc(inv.byInstance[instance], func(x string) bool { return x == id })
	if len(ids) == 0 {
		delete(inv.byInstance, instance)
		return
	}
	inv.byInstance[instance] = ids
}

// dropENI forgets an ENI; the caller holds mu.
func (inv *Inventory) dropENI(id string) {
	if e, ok := inv.enis[id]; ok && e.InstanceID != "" {
		inv.unindex(e.InstanceID, id)
	}
	delete(inv.enis, id)
	delete(inv.detached, id)
	delete(inv.describedAt, id)
	delete(inv.confirmed, id)
	delete(inv.confirmed6, id)
	for ip, on := range inv.landedOn {
		if on == id {
			delete(inv.landedOn, ip)
		}
	}
	// A remap onto a deleted ENI never lands: the address stays where it
	// was, and is trusted there again (Trusted).
	for ip, m := range inv.moving {
		if m.eni == id {
			delete(inv.moving, ip)
		}
	}
	delete(inv.unattached, id)
	delete(inv.attaching, id)
}

// Snapshot returns what planning needs of one instance: the instance, its
// type's limits, its attached ENIs, the unattached ENIs tagged for it by
// this cluster, and its VPC's subnets and security groups (all copies).
// An instance not seen yet is looked up first (batched with other
// lookups); it returns an error wrapping cloud.ErrNotFound if EC2 does not
// know it or it is no longer live.
func (inv *Inventory) Snapshot(ctx context.Context, instanceID, cluster string) (snapshot.Node, error) {
	inst, err := inv.instance(ctx, instanceID)
	if err != nil {
		return snapshot.Node{}, err
	}
	if err := inv.ensureVPC(ctx, inst.VPCID); err != nil {
		return snapshot.Node{}, err
	}
	typ, err := inv.InstanceType(ctx, inst.Type)
	if err != nil {
		return snapshot.Node{}, err
	}

	inv.mu.RLock()
	defer inv.mu.RUnlock()
	n := snapshot.Node{Instance: inst, Type: typ}
	for _, id := range inv.byInstance[instanceID] {
		n.ENIs = append(n.ENIs, inv.enis[id].Clone())
	}
	slices.SortFunc(n.ENIs, func(a, b cloud.ENI) int { return a.DeviceIndex - b.DeviceIndex })
	for id := range inv.unattached {
		if _, leaving := inv.detached[id]; leaving {
			continue // consolidated: deleted, never adopted again
		}
		if e := inv.enis[id]; e.Tags[cloud.TagInstance] == instanceID && e.Tags[cloud.TagCluster] == cluster {
			n.Orphans = append(n.Orphans, e.Clone())
		}
	}
	slices.SortFunc(n.Orphans, func(a, b cloud.ENI) int { return strings.Compare(a.ID, b.ID) })
	if d := inv.vpcs[inst.VPCID]; d != nil {
		for _, s := range d.subnets {
			c := *s
			n.Subnets = append(n.Subnets, c)
		}
		for _, g := range d.securityGroups {
			n.SecurityGroups = append(n.SecurityGroups, *g)
		}
		slices.SortFunc(n.Subnets, func(a, b cloud.Subnet) int { return strings.Compare(a.ID, b.ID) })
	}
	return n, nil
}

// Trusted reports whether the cache may be believed when it shows ip on
// the ENI: this process assigned it, or the ENI was last installed from a
// describe that started a grace after Start. Until then an address the
// pool lacks may be one an earlier process unassigned (EC2's describes
// lag its changes), and must not be handed to pods on a stale word.
//
// An address this process reassigned is trusted on no ENI until a
// describe started after the reassignment, or the instance metadata
// (RecordLanded), shows it on the ENI it was reassigned onto: not there,
// as the remap may not have landed, and not on the ENI it leaves, which
// EC2 shows holding it until the remap lands and which loses it then.
func (inv *Inventory) Trusted(eniID string, ip netip.Addr) bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	if _, ok := inv.moving[ip]; ok {
		return false
	}
	if inv.landedOn[ip] == eniID {
		return true
	}
	if t, ok := inv.describedAt[eniID]; !ok || !t.Before(inv.trustFrom) {
		return true // fresh, or known only from this process's own changes
	}
	if ip.Is6() {
		for p := range inv.assignedHere6 {
			if p.Contains(ip) {
				return true
			}
		}
		return slices.ContainsFunc(inv.confirmed6[eniID], func(p netip.Prefix) bool { return p.Contains(ip) })
	}
	if _, mine := inv.assignedHere[ip]; mine {
		return true
	}
	_, ok := inv.confirmed[eniID][ip]
	return ok
}

// described records that the ENI's cached view was installed from a
// describe that started at start; the caller holds mu.
func (inv *Inventory) described(e *cloud.ENI, start time.Time) {
	eniID := e.ID
	inv.landed(e, start)
	inv.describedAt[eniID] = start
	if !start.Before(inv.trustFrom) {
		delete(inv.confirmed, eniID)
		delete(inv.confirmed6, eniID)
		// The view is believed from now on: this process's word for
		// its addresses is no longer needed (staleView).
		forget(inv.assignedHere, e)
	}
}

// forget drops from assigned the addresses e holds, its prefixes'
// addresses included.
func forget(assigned map[netip.Addr]struct{}, e *cloud.ENI) {
	if len(assigned) == 0 {
		return
	}
	for _, ip := range e.IPs {
		delete(assigned, ip)
	}
	for _, p := range e.Prefixes {
		for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
			delete(assigned, ip)
		}
	}
}

// confirm records what a describe started after trustFrom showed of an
// ENI whose cached view it did not replace; the caller holds mu.
func (inv *Inventory) confirm(e *cloud.ENI, start time.Time) {
	inv.landed(e, start)
	if start.Before(inv.trustFrom) {
		return
	}
	set := map[netip.Addr]struct{}{}
	for _, ip := range e.IPs {
		set[ip] = struct{}{}
	}
	for _, p := range e.Prefixes {
		for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
			set[ip] = struct{}{}
		}
	}
	inv.confirmed[e.ID] = set
	inv.confirmed6[e.ID] = slices.Clone(e.IPv6Prefixes)
}

// TrustFrom is when describes start to be believed without a check (see
// Trusted).
func (inv *Inventory) TrustFrom() time.Time {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.trustFrom
}

// VPC returns what the inventory knows of a VPC.
func (inv *Inventory) VPC(vpcID string) (cloud.VPC, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	d, ok := inv.vpcs[vpcID]
	if !ok {
		return cloud.VPC{}, false
	}
	return d.vpc, true
}

// Subnet returns a known subnet.
func (inv *Inventory) Subnet(id string) (cloud.Subnet, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, d := range inv.vpcs {
		if s, ok := d.subnets[id]; ok {
			return *s, true
		}
	}
	return cloud.Subnet{}, false
}

// Subnets returns every known subnet.
func (inv *Inventory) Subnets() []cloud.Subnet {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	var out []cloud.Subnet
	for _, d := range inv.vpcs {
		for _, s := range d.subnets {
			out = append(out, *s)
		}
	}
	return out
}

// UnattachedENIs returns the available ENIs carrying tag key=value.
func (inv *Inventory) UnattachedENIs(key, value string) []cloud.ENI {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	var out []cloud.ENI
	for id := range inv.unattached {
		if e := inv.enis[id]; e.Tags[key] == value {
			out = append(out, e.Clone())
		}
	}
	slices.SortFunc(out, func(a, b cloud.ENI) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// HasTagged reports whether any known ENI carries tag key=value.
func (inv *Inventory) HasTagged(key, value string) bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, e := range inv.enis {
		if e.Tags[key] == value {
			return true
		}
	}
	return false
}

// LastSync returns when the oldest known VPC was last described.
func (inv *Inventory) LastSync() time.Time {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	var oldest time.Time
	for _, d := range inv.vpcs {
		if oldest.IsZero() || d.syncedAt.Before(oldest) {
			oldest = d.syncedAt
		}
	}
	return oldest
}
