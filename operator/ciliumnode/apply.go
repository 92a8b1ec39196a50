package ciliumnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// apply executes a plan step by step; the first failure stops it. Each
// success is recorded in the inventory at once, so what was done is never
// asked for again.
func (s *nodeSync) apply(ctx context.Context, p *pool.Plan) error {
	r := s.r
	for _, a := range p.Assign {
		if err := s.assign(ctx, a.ENIID, a.IPs, a.Prefixes); err != nil {
			return err
		}
	}
	if p.Adopt != nil {
		if err := s.attach(ctx, p.Adopt.ENIID, p.Adopt.DeviceIndex); err != nil {
			return fmt.Errorf("adopting %s, %w", p.Adopt.ENIID, err)
		}
		r.log.Info("adopted unattached ENI", "node", s.cn.Name, "instance", s.instanceID, "eni", p.Adopt.ENIID, "device", p.Adopt.DeviceIndex)
	}
	if c := p.Create; c != nil {
		eni, err := r.api.CreateENI(ctx, cloud.CreateENIRequest{
			SubnetID:       c.SubnetID,
			SecurityGroups: c.SecurityGroups,
			Description:    fmt.Sprintf("enipam: pod IPs of node %s (cluster %s)", s.cn.Name, r.opts.Cluster),
			Tags:           s.eniTags(),
			SecondaryIPs:   c.IPs,
			Prefixes:       c.Prefixes,
			ClientToken:    clientToken(),
		})
		if err != nil {
			if errors.Is(err, cloud.ErrSubnetFull) {
				r.inv.RecordSubnetFull(c.SubnetID)
			}
			return fmt.Errorf("creating ENI in %s, %w", c.SubnetID, err)
		}
		r.inv.MarkInFlight(eni.ID)
		r.inv.RecordCreated(eni)
		r.metrics.enisCreated.Inc()
		r.metrics.ipsAssigned.Add(float64(len(eni.IPs) + pool.IPsPerPrefix*len(eni.Prefixes)))
		// A failure from here on leaves an unattached ENI tagged for this
		// instance: the next reconcile adopts it, or the collector
		// deletes it.
		err = s.attach(ctx, eni.ID, c.DeviceIndex)
		r.inv.ClearInFlight(eni.ID)
		if err != nil {
			return fmt.Errorf("attaching new ENI %s, %w", eni.ID, err)
		}
		r.log.Info("created ENI", "node", s.cn.Name, "instance", s.instanceID, "eni", eni.ID, "subnet", c.SubnetID,
			"device", c.DeviceIndex, "ips", len(eni.IPs), "prefixes", len(eni.Prefixes))
	}
	return nil
}

func (s *nodeSync) assign(ctx context.Context, eniID string, ips, prefixes int) error {
	r := s.r
	var subnet string
	for _, e := range s.snap.ENIs {
		if e.ID == eniID {
			subnet = e.SubnetID
		}
	}
	var err error
	if prefixes > 0 {
		got, perr := r.api.AssignPrefixes(ctx, eniID, prefixes)
		err = perr
		if perr == nil {
			r.inv.RecordAssigned(eniID, nil, got)
			r.metrics.ipsAssigned.Add(float64(pool.IPsPerPrefix * len(got)))
		}
	} else {
		got, aerr := r.api.AssignIPs(ctx, eniID, ips)
		err = aerr
		if aerr == nil {
			r.inv.RecordAssigned(eniID, got, nil)
			r.metrics.ipsAssigned.Add(float64(len(got)))
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cloud.ErrSubnetFull):
		r.inv.RecordSubnetFull(subnet)
	case errors.Is(err, cloud.ErrNotFound):
		r.inv.RecordGone(eniID)
	}
	return fmt.Errorf("assigning to %s, %w", eniID, err)
}

// attach attaches an ENI and makes EC2 delete it with the instance.
func (s *nodeSync) attach(ctx context.Context, eniID string, index int) error {
	r := s.r
	r.inv.MarkInFlight(eniID)
	defer r.inv.ClearInFlight(eniID)
	attachment, err := r.api.AttachENI(ctx, eniID, s.instanceID, index)
	if err != nil {
		if errors.Is(err, cloud.ErrNotFound) {
			r.inv.RecordGone(eniID)
		}
		return err
	}
	r.inv.RecordAttached(eniID, s.instanceID, index, attachment)
	if err := r.api.SetDeleteOnTermination(ctx, eniID, attachment); err != nil {
		// The ENI works; the flag is repaired on a later reconcile.
		return fmt.Errorf("setting delete-on-termination on %s, %w", eniID, err)
	}
	r.inv.RecordDeleteOnTermination(eniID)
	return nil
}

// repairDeleteOnTermination sets the flag on this cluster's attached ENIs
// that lack it (an earlier reconcile died between Attach and Modify), so
// nothing of enipam survives the instance.
func (s *nodeSync) repairDeleteOnTermination(ctx context.Context) error {
	for _, e := range s.snap.ENIs {
		if e.DeviceIndex == 0 || e.DeleteOnTermination || e.AttachmentID == "" || e.Tags[cloud.TagCluster] != s.r.opts.Cluster {
			continue
		}
		if err := s.r.api.SetDeleteOnTermination(ctx, e.ID, e.AttachmentID); err != nil {
			return fmt.Errorf("setting delete-on-termination on %s, %w", e.ID, err)
		}
		s.r.inv.RecordDeleteOnTermination(e.ID)
	}
	return nil
}

// eniTags are the tags of a new ENI: the policy's, then enipam's own
// (which win).
func (s *nodeSync) eniTags() map[string]string {
	tags := maps.Clone(s.cfg.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[cloud.TagCluster] = s.r.opts.Cluster
	tags[cloud.TagInstance] = s.instanceID
	tags[cloud.TagManagedBy] = cloud.ManagedBy
	tags[TagNode] = s.cn.Name
	return tags
}

// TagNode holds the name of the node an ENI was created for, for humans.
const TagNode = "enipam.io/node"

// clientToken returns a fresh idempotency token; the adapter's retries of
// one Create reuse it.
func clientToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
