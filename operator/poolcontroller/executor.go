package poolcontroller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// executor carries out the EC2 actions decided for one node: every call
// of the cloud API the pool controller makes, describes included, goes
// through its methods, and each success is recorded in the inventory at
// once, so what was done is never asked for again. It edits no desired
// object: a method returns what its action achieved, and the reconcile
// derives the CiliumNode and the NodeRouting from that and from the
// inventory. The plan's steps (create, attach, assign) are in apply.go.
type executor struct {
	r *Reconciler
	// node is the CiliumNode as read: named in logs and events, never
	// edited.
	node *ciliumv2.CiliumNode
	// instanceID names the node's instance; snap is the reconcile's view
	// of it (the ENIs an assignment targets); tags are the policy's tags
	// for new ENIs.
	instanceID string
	snap       *snapshot.Node
	tags       map[string]string
	// mem is the node's memory: the prefix fallback and the repairs'
	// backoff are recorded there.
	mem *memory
}

// exec is the executor of the node's actions in this reconcile.
func (s *nodeSync) exec() *executor {
	node := s.orig
	if node == nil {
		node = s.cn
	}
	return &executor{r: s.r, node: node, instanceID: s.instanceID, snap: &s.snap, tags: s.cfg.Tags, mem: s.mem}
}

// describeENIs describes the ENIs by ID into the inventory.
func (x *executor) describeENIs(ctx context.Context, ids []string) error {
	return x.r.inv.RefreshENIs(ctx, ids)
}

// release makes the Unassigns of the release steps and records each
// success in the inventory. It returns the addresses whose handshake may
// complete (released): those unassigned, and those EC2 no longer showed
// on their ENI, for which no call is made. A failed Unassign leaves its
// addresses out of the answer, acknowledged, retried with the node.
func (x *executor) release(ctx context.Context, steps []releaseStep) ([]netip.Addr, error) {
	var errs []error
	var done []netip.Addr
	for _, step := range steps {
		if len(step.prefixes) > 0 {
			err := x.r.api.UnassignPrefixes(ctx, step.eniID, step.prefixes)
			if err != nil && !errors.Is(err, cloud.ErrNotFound) {
				errs = append(errs, fmt.Errorf("releasing %d prefixes of %s, %w", len(step.prefixes), step.eniID, err))
			} else {
				x.r.inv.RecordUnassignedPrefixes(step.eniID, step.prefixes)
				x.r.metrics.ipsReleased.Add(float64(pool.IPsPerPrefix * len(step.prefixes)))
				done = append(done, step.members...)
				x.r.log.Info("released prefixes", "node", x.node.Name, "eni", step.eniID, "prefixes", len(step.prefixes))
			}
		}
		if len(step.ips) == 0 {
			continue
		}
		// A stale read may show IPs this operator already unassigned; the
		// inventory knows, and no call is made for them.
		if len(step.held) == 0 {
			done = append(done, step.ips...)
			continue
		}
		if err := x.r.api.UnassignIPs(ctx, step.eniID, step.held); err != nil && !errors.Is(err, cloud.ErrNotFound) {
			errs = append(errs, fmt.Errorf("releasing %d IPs of %s, %w", len(step.ips), step.eniID, err))
			continue
		}
		x.r.inv.RecordUnassigned(step.eniID, step.ips)
		x.r.metrics.ipsReleased.Add(float64(len(step.ips)))
		done = append(done, step.ips...)
	}
	return done, errors.Join(errs...)
}

// setDeleteOnTermination sets the flag on an attached ENI.
func (x *executor) setDeleteOnTermination(ctx context.Context, step repairStep) error {
	return x.r.api.SetDeleteOnTermination(ctx, step.eniID, step.attachmentID)
}

// assignWindowPrefix asks EC2 for one /80 on the ENI and records it. It
// returns the /80s EC2 gave (none when it failed); retry when the
// failure is worth a retry; and, when EC2 refused for good, why the node
// gets no IPv6.
func (x *executor) assignWindowPrefix(ctx context.Context, eniID string) (got []netip.Prefix, retry bool, problem error) {
	got, err := x.r.api.AssignIPv6Prefixes(ctx, eniID, 1)
	if err != nil {
		if errors.Is(err, cloud.ErrInvalid) || errors.Is(err, cloud.ErrIPLimit) {
			return nil, false, fmt.Errorf("%w: %w", errIPv6PrefixLost, err)
		}
		x.r.log.Info("asking for an IPv6 /80 failed; retrying", "node", x.node.Name, "eni", eniID, "error", err)
		return nil, true, nil
	}
	x.r.inv.RecordAssignedIPv6Prefixes(eniID, got)
	x.r.log.Info("assigned an IPv6 /80 for the window", "node", x.node.Name, "eni", eniID, "prefixes", got)
	return got, false, nil
}

// unassignWindowPrefixes gives back the window's idle /80s and records
// it; false when EC2 refused (retried with the node).
func (x *executor) unassignWindowPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) bool {
	if err := x.r.api.UnassignIPv6Prefixes(ctx, eniID, prefixes); err != nil && !errors.Is(err, cloud.ErrNotFound) {
		x.r.log.Info("giving back IPv6 /80s failed; retrying", "node", x.node.Name, "eni", eniID, "error", err)
		return false
	}
	x.r.inv.RecordUnassignedIPv6Prefixes(eniID, prefixes)
	x.r.log.Info("gave back the IPv6 window's /80s", "node", x.node.Name, "eni", eniID, "prefixes", prefixes)
	return true
}

// detach detaches an ENI and records it detaching; an ENI EC2 no longer
// knows counts as detached.
func (x *executor) detach(ctx context.Context, eni *cloud.ENI) error {
	if err := x.r.api.DetachENI(ctx, eni.AttachmentID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
		return err
	}
	x.r.inv.RecordDetaching(eni.ID)
	return nil
}

// deleteDetached deletes a detached ENI and records it deleted; an ENI
// EC2 no longer knows counts as deleted.
func (x *executor) deleteDetached(ctx context.Context, eniID string) error {
	if err := x.r.api.DeleteENI(ctx, eniID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
		return err
	}
	x.r.inv.RecordDeleted(eniID)
	return nil
}

// associateAddress associates an Elastic IP with the primary address of
// primary and records it in the address book; it returns the
// association's ID. An address taken meanwhile (ErrInUse) has the book
// refreshed, so the next pick knows where it went.
func (x *executor) associateAddress(ctx context.Context, pick cloud.Address, primary *cloud.ENI) (string, error) {
	book := x.r.inv.Addresses()
	assoc, err := x.r.api.AssociateAddress(ctx, pick.AllocationID, primary.ID, primary.PrimaryIP, false)
	if err != nil {
		if errors.Is(err, cloud.ErrInUse) {
			_ = book.Refresh(ctx)
		}
		return "", err
	}
	book.RecordAssociated(pick.AllocationID, assoc, primary.ID, x.instanceID, primary.PrimaryIP)
	return assoc, nil
}

// describeAddresses lists the Elastic IPs afresh into the address book.
func (x *executor) describeAddresses(ctx context.Context) error {
	return x.r.inv.Addresses().Refresh(ctx)
}

// disassociateAddress undoes an Elastic IP's association and records
// it; one EC2 no longer knows counts as undone.
func (x *executor) disassociateAddress(ctx context.Context, a cloud.Address) error {
	if err := x.r.api.DisassociateAddress(ctx, a.AssociationID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
		return err
	}
	x.r.inv.Addresses().RecordDisassociated(a.AllocationID)
	return nil
}

// errAssociationUnseen: a release found the recorded address elsewhere
// or free in a describe that may not show an earlier process's
// association yet (inventory's Addresses.Vouched); it is tried again.
var errAssociationUnseen = errors.New("EC2's describe may not show an association made before this process started yet")

// releaseAddress undoes the association rec records, when EC2 still has
// the address on the recorded ENI (anything else was changed by someone
// else, and is left alone). EC2's view is described afresh first: the
// association may be younger than the cache. A describe that shows the
// address elsewhere or free is believed only once it vouches for an
// earlier process's associations: one that died as its AssociateAddress
// landed leaves an association the first describes of the next may not
// show, and the record is all that finds it.
func (x *executor) releaseAddress(ctx context.Context, rec *enipamv1alpha1.NodeStaticIP) error {
	if err := x.describeAddresses(ctx); err != nil {
		return fmt.Errorf("listing Elastic IPs, %w", err)
	}
	addrs, err := x.r.inv.Addresses().List(ctx)
	if err != nil {
		return fmt.Errorf("listing Elastic IPs, %w", err)
	}
	i := slices.IndexFunc(addrs, func(a cloud.Address) bool { return a.AllocationID == rec.AllocationID })
	if i < 0 {
		return nil
	}
	if a := addrs[i]; a.Associated() && a.ENIID == rec.ENIID {
		if err := x.disassociateAddress(ctx, a); err != nil {
			return fmt.Errorf("disassociating Elastic IP %s from %s, %w", a.PublicIP, a.ENIID, err)
		}
		x.r.log.Info("static IP released", "node", x.node.Name, "instance", rec.InstanceID, "eni", rec.ENIID, "eip", rec.PublicIP)
		return nil
	}
	if !x.r.inv.Addresses().Vouched() {
		return fmt.Errorf("releasing Elastic IP %s from %s, %w", rec.PublicIP, rec.ENIID, errAssociationUnseen)
	}
	return nil
}

// placeStatic assigns claimed addresses onto the node's ENIs, or creates
// the ENI one needs; each success is recorded in the inventory at once.
// It returns the addresses reassigned from another ENI.
func (x *executor) placeStatic(ctx context.Context, out *staticCalls) ([]netip.Addr, error) {
	var moved []netip.Addr
	var errs []error
	for _, p := range out.place {
		err := x.whileYoung(ctx, p.eniID, func() error {
			return x.r.api.AssignAddresses(ctx, p.eniID, []netip.Addr{p.ip}, p.reassign)
		})
		switch {
		case err == nil:
			if p.reassign {
				x.r.inv.RecordMoved(p.ip, p.eniID)
				moved = append(moved, p.ip)
			} else {
				x.r.inv.RecordAssigned(p.eniID, []netip.Addr{p.ip}, nil)
			}
			x.r.metrics.staticPlaced.Inc()
			x.r.log.Info("placed static address", "node", x.node.Name, "instance", x.instanceID, "eni", p.eniID, "ip", p.ip, "claim", p.owner, "reassigned", p.reassign)
		case errors.Is(err, cloud.ErrInvalid), errors.Is(err, cloud.ErrInUse):
			// Already there (an answer lost before), or taken meanwhile:
			// the ENI's and the address's true place decide next time.
			if rerr := x.describeENIs(ctx, []string{p.eniID}); rerr != nil {
				errs = append(errs, rerr)
			}
			if loc := x.r.inv.Locate(p.ip); loc.Found && loc.ENI.ID != p.eniID {
				if rerr := x.describeENIs(ctx, []string{loc.ENI.ID}); rerr != nil {
					errs = append(errs, rerr)
				}
			}
			x.r.log.Info("placing a static address was refused; looking again", "node", x.node.Name, "eni", p.eniID, "ip", p.ip, "claim", p.owner, "error", err)
		default:
			errs = append(errs, fmt.Errorf("placing %s on %s, %w", p.ip, p.eniID, err))
		}
	}
	if out.secondary != "" {
		if err := x.assign(ctx, out.secondary, 1, 0); err != nil {
			errs = append(errs, fmt.Errorf("assigning a secondary address for a static claim, %w", err))
		}
	}
	if out.create != nil {
		if err := x.apply(ctx, &pool.Plan{Create: out.create}); err != nil {
			errs = append(errs, fmt.Errorf("creating an ENI for a static address, %w", err))
		}
	}
	return moved, errors.Join(errs...)
}
