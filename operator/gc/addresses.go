package gc

import (
	"context"
	"errors"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
)

// collectAddresses releases the Elastic IPs enipam allocated for
// StaticIPClaims (tagged with the cluster, managed-by and the claim) that
// no claim records: the claim is gone (or is another claim of the same
// name, by UID), or records another allocation. A claim that records an
// intent to allocate (status.publicIP without an allocation ID) keeps
// every address tagged for it: it adopts one of them. The claim
// controller records an intent before AllocateAddress, so such leaks come
// only from a claim deleted without its finalizer, or from an allocation
// EC2's describe did not show yet when the intent was looked up; the
// creation tag's MinAge (or a second sighting) covers the cache's lag
// behind a record just written. An associated leak is disassociated
// first.
func (c *Collector) collectAddresses(ctx context.Context, budget int) (int, error) {
	if c.claims == nil {
		return 0, nil
	}
	book := c.inv.Addresses()
	if _, err := book.List(ctx); err != nil {
		return 0, err
	}
	next := map[string]bool{}
	released, leaked := 0, 0
	var errs []error
	for _, a := range book.Tagged(map[string]string{cloud.TagCluster: c.opts.Cluster, cloud.TagManagedBy: cloud.ManagedBy}) {
		owner := a.Tags[cloud.TagClaim]
		if owner == "" {
			continue
		}
		keep, err := c.recorded(ctx, owner, a)
		if err != nil {
			next[a.AllocationID] = c.seenAddrs[a.AllocationID]
			errs = append(errs, err)
			continue
		}
		if keep {
			continue
		}
		leaked++
		if !(c.seenAddrs[a.AllocationID] || c.oldEnoughTag(a.Tags[cloud.TagCreatedAt])) || released >= budget {
			next[a.AllocationID] = true
			continue
		}
		if a.Associated() {
			if err := c.api.DisassociateAddress(ctx, a.AssociationID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
				next[a.AllocationID] = true
				errs = append(errs, err)
				continue
			}
			book.RecordDisassociated(a.AllocationID)
		}
		switch err := c.api.ReleaseAddress(ctx, a.AllocationID); {
		case err == nil, errors.Is(err, cloud.ErrNotFound):
			book.RecordReleased(a.AllocationID)
			if err == nil {
				released++
				c.addrsCollected.Inc()
				c.log.Info("released leaked Elastic IP", "eip", a.PublicIP, "allocation", a.AllocationID, "claim", owner)
			}
		case errors.Is(err, cloud.ErrInUse):
			// Associated again since the describe: looked at next pass.
			next[a.AllocationID] = true
		default:
			next[a.AllocationID] = true
			errs = append(errs, err)
		}
	}
	c.addrsLeaked.Set(float64(leaked))
	c.seenAddrs = next
	return released, errors.Join(errs...)
}

// recorded reports whether the claim named by owner still accounts for
// the Elastic IP a.
func (c *Collector) recorded(ctx context.Context, owner string, a cloud.Address) (bool, error) {
	ns, name, ok := strings.Cut(owner, "/")
	if !ok {
		return false, nil
	}
	claim := &enipamv1alpha1.StaticIPClaim{}
	switch err := c.claims.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, claim); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if string(claim.UID) != a.Tags[cloud.TagClaimUID] {
		return false, nil
	}
	rec := claim.Status.PublicIP
	return rec != nil && (rec.AllocationID == a.AllocationID || (rec.Allocated && rec.AllocationID == "")), nil
}

// oldEnoughTag reports whether a creation tag is older than MinAge.
func (c *Collector) oldEnoughTag(tag string) bool {
	at, err := time.Parse(time.RFC3339, tag)
	return err == nil && c.opts.MinAge > 0 && c.now().Sub(at) > c.opts.MinAge
}
