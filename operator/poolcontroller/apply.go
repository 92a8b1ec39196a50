package poolcontroller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// apply executes a plan step by step; the first failure stops it. Each
// success is recorded in the inventory at once, so what was done is never
// asked for again.
func (x *executor) apply(ctx context.Context, p *pool.Plan) error {
	r := x.r
	for _, a := range p.Assign {
		err := x.assign(ctx, a.ENIID, a.IPs, a.Prefixes)
		// EC2 says a subnet has no room for a /28 in two ways (no aligned
		// block, or fewer than 16 free addresses): single addresses may
		// still fit either way, as Cilium's fallback assumes too.
		if a.Prefixes > 0 && a.FallbackIPs > 0 && errors.Is(err, cloud.ErrSubnetFull) {
			x.prefixFallback(err)
			err = x.assign(ctx, a.ENIID, a.FallbackIPs, 0)
		}
		if err != nil {
			return err
		}
	}
	if p.Adopt != nil {
		if err := x.attach(ctx, p.Adopt.ENIID, p.Adopt.DeviceIndex); err != nil {
			return fmt.Errorf("adopting %s, %w", p.Adopt.ENIID, err)
		}
		r.log.Info("adopted unattached ENI", "node", x.node.Name, "instance", x.instanceID, "eni", p.Adopt.ENIID, "device", p.Adopt.DeviceIndex)
	}
	if p.Create != nil {
		if err := x.create(ctx, p.Create); err != nil {
			return err
		}
	}
	// A joining node's further ENIs, in the same pass: its status lists
	// them with the first, and its pool takes them all in one write.
	for i := range p.More {
		if err := x.create(ctx, &p.More[i]); err != nil {
			return err
		}
	}
	return nil
}

// create makes a new ENI with its addresses and attaches it at its device
// index; each step is recorded in the inventory as it succeeds.
func (x *executor) create(ctx context.Context, c *pool.Create) error {
	r := x.r
	req := cloud.CreateENIRequest{
		SubnetID:       c.SubnetID,
		SecurityGroups: c.SecurityGroups,
		Description:    fmt.Sprintf("enipam: pod IPs of node %s (cluster %s)", x.node.Name, r.opts.Cluster),
		Tags:           x.eniTags(),
		SecondaryIPs:   c.IPs,
		Prefixes:       c.Prefixes,
	}
	req.ClientToken = clientToken(x.instanceID, c.DeviceIndex, req)
	eni, err := r.api.CreateENI(ctx, req)
	if c.Prefixes > 0 && c.FallbackIPs > 0 && errors.Is(err, cloud.ErrSubnetFull) {
		x.prefixFallback(err)
		req.Prefixes, req.SecondaryIPs = 0, c.FallbackIPs
		req.ClientToken = clientToken(x.instanceID, c.DeviceIndex, req)
		eni, err = r.api.CreateENI(ctx, req)
	}
	if err != nil {
		if errors.Is(err, cloud.ErrSubnetFull) {
			r.inv.RecordSubnetFull(c.SubnetID)
		}
		return fmt.Errorf("creating ENI in %s, %w", c.SubnetID, err)
	}
	// In flight from now until attached or given up: a failed
	// attach leaves an unattached ENI tagged for this instance,
	// which the next plans adopt and the collector leaves alone.
	r.inv.MarkInFlight(eni.ID)
	r.inv.RecordCreated(eni)
	r.metrics.enisCreated.Inc()
	r.metrics.ipsAssigned.Add(float64(len(eni.IPs) + pool.IPsPerPrefix*len(eni.Prefixes)))
	if err := x.attach(ctx, eni.ID, c.DeviceIndex); err != nil {
		return fmt.Errorf("attaching new ENI %s, %w", eni.ID, err)
	}
	r.log.Info("created ENI", "node", x.node.Name, "instance", x.instanceID, "eni", eni.ID, "subnet", c.SubnetID,
		"device", c.DeviceIndex, "ips", len(eni.IPs), "prefixes", len(eni.Prefixes))
	return nil
}

func (x *executor) assign(ctx context.Context, eniID string, ips, prefixes int) error {
	r := x.r
	var eni *cloud.ENI
	for i := range x.snap.ENIs {
		if x.snap.ENIs[i].ID == eniID {
			eni = &x.snap.ENIs[i]
		}
	}
	if eni == nil {
		return fmt.Errorf("assigning to %s: %w: not an ENI of instance %s", eniID, cloud.ErrNotFound, x.instanceID)
	}
	var err error
	if prefixes > 0 {
		var got []netip.Prefix
		perr := x.whileYoung(ctx, eniID, func() (err error) { got, err = r.api.AssignPrefixes(ctx, eniID, prefixes); return err })
		err = perr
		if perr == nil {
			got = x.newPrefixes(eni, got)
			r.inv.RecordAssigned(eniID, nil, got)
			r.metrics.ipsAssigned.Add(float64(pool.IPsPerPrefix * len(got)))
		}
	} else {
		var got []netip.Addr
		aerr := x.whileYoung(ctx, eniID, func() (err error) { got, err = r.api.AssignIPs(ctx, eniID, ips); return err })
		err = aerr
		if aerr == nil {
			got = x.newIPs(eni, got)
			r.inv.RecordAssigned(eniID, got, nil)
			r.metrics.ipsAssigned.Add(float64(len(got)))
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cloud.ErrSubnetFull) && prefixes > 0:
		// Single addresses may still fit; the fallback finds out.
	case errors.Is(err, cloud.ErrSubnetFull):
		r.inv.RecordSubnetFull(eni.SubnetID)
	case errors.Is(err, cloud.ErrNotFound) && r.inv.Young(eniID):
		// EC2 does not know everywhere yet the ENI it just created.
		return fmt.Errorf("assigning to %s, created moments ago: %w", eniID, errNotYet)
	case errors.Is(err, cloud.ErrNotFound):
		r.inv.RecordGone(eniID)
	}
	return fmt.Errorf("assigning to %s, %w", eniID, err)
}

// prefixFallback records that the node's subnet had no free aligned /28:
// an event says so, and its plans ask for single addresses until the
// resync interval has passed.
func (x *executor) prefixFallback(err error) {
	x.r.events.Eventf(x.node, nil, "Warning", ReasonPrefixFallback, "Allocate",
		"no free /28 prefix in the subnet (%v): single addresses instead", err)
	x.mem.noPrefixesUntil = x.r.now().Add(x.r.opts.BlockedRetry)
	x.r.log.Info("prefix delegation falls back to single addresses", "node", x.node.Name, "error", err)
}

// youngRetries bounds how often a call about an ENI created moments ago is
// repeated in place while EC2 answers NotFound, waiting youngBackoff,
// doubled each time (0.25 + 0.5 + 1 + 2 s: about EC2's usual window).
const (
	youngRetries = 4
	youngBackoff = 250 * time.Millisecond
)

// whileYoung runs call, and runs it again after a short wait while EC2
// answers NotFound about an ENI this operator created within the
// consistency grace: EC2 does not know it everywhere yet. Anything else
// is returned at once.
func (x *executor) whileYoung(ctx context.Context, eniID string, call func() error) error {
	wait := youngBackoff
	for i := 0; ; i++ {
		err := call()
		if err == nil || i == youngRetries || !errors.Is(err, cloud.ErrNotFound) || !x.r.inv.Young(eniID) {
			return err
		}
		x.r.log.Debug("ENI not visible in EC2 yet; retrying", "node", x.node.Name, "eni", eniID, "in", wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// errNotYet: EC2 answered NotFound for an ENI this operator created within
// the consistency grace; the step is retried, the ENI never forgotten.
var errNotYet = &cloud.Error{Action: "consistency", Message: "not visible in EC2 yet", Kind: cloud.ErrUnavailable}

// newIPs keeps of Assign's answer only addresses that are new to the ENI:
// never its primary address, never one it already held (some
// EC2-compatible endpoints answer with every address of the ENI).
func (x *executor) newIPs(eni *cloud.ENI, got []netip.Addr) []netip.Addr {
	kept := slices.DeleteFunc(slices.Clone(got), func(ip netip.Addr) bool {
		return ip == eni.PrimaryIP || eni.HasIP(ip) || !ip.Is4()
	})
	if len(kept) != len(got) {
		x.r.log.Info("EC2's Assign answer named addresses that are not new; ignored", "node", x.node.Name, "eni", eni.ID,
			"answered", len(got), "new", len(kept))
	}
	return kept
}

// newPrefixes is newIPs for delegated prefixes.
func (x *executor) newPrefixes(eni *cloud.ENI, got []netip.Prefix) []netip.Prefix {
	kept := slices.DeleteFunc(slices.Clone(got), func(p netip.Prefix) bool {
		return slices.Contains(eni.Prefixes, p) || p.Bits() != 28 || !p.Addr().Is4()
	})
	if len(kept) != len(got) {
		x.r.log.Info("EC2's Assign answer named prefixes that are not new; ignored", "node", x.node.Name, "eni", eni.ID,
			"answered", len(got), "new", len(kept))
	}
	return kept
}

// attachGiveUp is how many attaches of one ENI EC2 may refuse (not
// counting NotFound while the ENI is young) before the pool controller
// deletes it itself and plans anew: an ENI that cannot be attached must
// not hold its node's growth forever.
const attachGiveUp = 5

// attach attaches an ENI and makes EC2 delete it with the instance. The
// ENI stays in flight (never collected) until it is attached, known gone,
// or given up.
func (x *executor) attach(ctx context.Context, eniID string, index int) error {
	r := x.r
	r.inv.MarkInFlight(eniID)
	var attachment string
	err := x.whileYoung(ctx, eniID, func() (err error) {
		attachment, err = r.api.AttachENI(ctx, eniID, x.instanceID, index)
		return err
	})
	switch {
	case err == nil:
	case errors.Is(err, cloud.ErrNotFound) && r.inv.Young(eniID):
		return fmt.Errorf("attaching %s, created moments ago: %w", eniID, errNotYet)
	case errors.Is(err, cloud.ErrNotFound):
		r.inv.RecordGone(eniID)
		r.inv.ClearInFlight(eniID)
		return err
	case errors.Is(err, cloud.ErrInvalid), errors.Is(err, cloud.ErrInUse), errors.Is(err, cloud.ErrENILimit):
		// Most likely the device index is taken by an ENI the cache does
		// not show yet (attached by an earlier life of this operator just
		// before it died): look the instance up again, so the next plan
		// adopts that ENI instead of colliding with it.
		if rerr := r.inv.RefreshInstance(ctx, x.instanceID); rerr != nil {
			r.log.Info("looking the instance up after a refused attach failed", "node", x.node.Name, "instance", x.instanceID, "error", rerr)
		}
		return x.attachFailed(ctx, eniID, err)
	default:
		return x.attachFailed(ctx, eniID, err)
	}
	r.inv.RecordAttached(eniID, x.instanceID, index, attachment)
	r.inv.ClearInFlight(eniID)
	if err := x.whileYoung(ctx, eniID, func() error { return r.api.SetDeleteOnTermination(ctx, eniID, attachment) }); err != nil {
		// The ENI works; the flag is repaired on a later reconcile.
		return fmt.Errorf("setting delete-on-termination on %s, %w", eniID, err)
	}
	r.inv.RecordDeleteOnTermination(eniID)
	return nil
}

// attachFailed counts a refused attach of an in-flight ENI; at
// attachGiveUp refusals the ENI is given up: deleted by the pool
// controller itself, and only then no longer in flight. A delete that
// fails keeps the mark; the next refused attach tries again.
func (x *executor) attachFailed(ctx context.Context, eniID string, err error) error {
	r := x.r
	failures := r.inv.AttachFailed(eniID)
	if failures < attachGiveUp {
		return err
	}
	switch derr := r.api.DeleteENI(ctx, eniID); {
	case derr == nil, errors.Is(derr, cloud.ErrNotFound) && !r.inv.Young(eniID):
		r.inv.RecordDeleted(eniID)
		r.inv.ClearInFlight(eniID)
		r.log.Info("gave up attaching an ENI; deleted it", "node", x.node.Name, "instance", x.instanceID, "eni", eniID,
			"failures", failures, "error", err)
		return fmt.Errorf("gave up attaching %s after %d failures (deleted; a new ENI is planned), %w", eniID, failures, err)
	default:
		r.log.Info("gave up attaching an ENI; deleting it failed", "node", x.node.Name, "instance", x.instanceID, "eni", eniID,
			"failures", failures, "error", derr)
		return err
	}
}

// eniTags are the tags of a new ENI: the policy's, then enipam's own
// (which win).
func (x *executor) eniTags() map[string]string {
	tags := maps.Clone(x.tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[cloud.TagCluster] = x.r.opts.Cluster
	tags[cloud.TagInstance] = x.instanceID
	tags[cloud.TagManagedBy] = cloud.ManagedBy
	tags[TagNode] = x.node.Name
	tags[cloud.TagCreatedAt] = x.r.now().UTC().Format(createdAtLayout)
	return tags
}

// createdAtLayout is RFC 3339 to the millisecond: the creation tag is a
// parameter of the create, and so of its client token, and two creates
// for one node (a replacement right after an ENI was given up) are never
// the same millisecond.
const createdAtLayout = "2006-01-02T15:04:05.000Z07:00"

// TagNode holds the name of the node an ENI was created for, for humans.
const TagNode = "enipam.io/node"

// clientToken is the idempotency token of a create of the ENI a node gets
// at a device index, derived from the instance, the index and every
// parameter of the request (its creation tag, to the millisecond,
// included). EC2 answers a token it has seen with the same parameters by
// the ENI it created then, and with other parameters by
// IdempotentParameterMismatch: derived so, a request sent again unchanged
// (a retry after a lost answer) gets the first ENI, and any other create,
// such as the replacement of an ENI given up or collected, gets a token
// of its own.
func clientToken(instanceID string, deviceIndex int, req cloud.CreateENIRequest) string {
	h := sha256.New()
	field := func(v string) { fmt.Fprintf(h, "%d:%s;", len(v), v) }
	field(instanceID)
	field(strconv.Itoa(deviceIndex))
	field(req.SubnetID)
	field(strconv.Itoa(len(req.SecurityGroups)))
	for _, g := range req.SecurityGroups {
		field(g)
	}
	field(req.Description)
	field(strconv.Itoa(len(req.Tags)))
	for _, k := range slices.Sorted(maps.Keys(req.Tags)) {
		field(k)
		field(req.Tags[k])
	}
	field(strconv.Itoa(req.SecondaryIPs))
	field(strconv.Itoa(req.Prefixes))
	return hex.EncodeToString(h.Sum(nil)[:16])
}
