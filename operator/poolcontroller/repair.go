package poolcontroller

import (
	"context"
	"fmt"
	"time"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// repairStep is the repair of one attached ENI of the cluster that lacks
// delete-on-termination (an earlier reconcile died between Attach and
// Modify): the flag is set, so nothing of enipam survives the instance.
type repairStep struct {
	eniID, attachmentID string
}

// repairs is what decideRepairs decided: the repairs due now, and the
// ENIs whose remembered backoff can be forgotten (they need no repair).
type repairs struct {
	due     []repairStep
	settled []string
}

// decideRepairs picks, from the snapshot alone, the cluster's attached
// secondary ENIs without delete-on-termination whose backoff (backoff,
// the memory of earlier tries) has passed at now. It makes no call.
func decideRepairs(snap *snapshot.Node, cluster string, backoff map[string]repair, now time.Time) repairs {
	var d repairs
	for _, e := range snap.ENIs {
		if e.DeviceIndex == 0 || e.DeleteOnTermination || e.AttachmentID == "" || e.Tags[cloud.TagCluster] != cluster {
			if _, ok := backoff[e.ID]; ok {
				d.settled = append(d.settled, e.ID)
			}
			continue
		}
		if now.Before(backoff[e.ID].next) {
			continue
		}
		d.due = append(d.due, repairStep{eniID: e.ID, attachmentID: e.AttachmentID})
	}
	return d
}

// executeRepairs sets the flag on the ENIs decideRepairs picked. A repair
// that fails (or does not stick) backs off per ENI and is reported, never
// resent on every reconcile; it does not hold up the pool.
func (s *nodeSync) executeRepairs(ctx context.Context, d repairs) {
	for _, id := range d.settled {
		delete(s.mem.repairs, id)
	}
	now := s.r.now()
	if len(d.due) > 0 && s.mem.repairs == nil {
		s.mem.repairs = map[string]repair{}
	}
	for _, step := range d.due {
		err := s.exec().setDeleteOnTermination(ctx, step)
		rep := s.mem.repairs[step.eniID]
		rep.failures++
		rep.next = now.Add(s.r.retryAfter(rep.failures))
		s.mem.repairs[step.eniID] = rep
		if err != nil {
			s.r.warn(s.cn, s.mem, ReasonRepairFailing, fmt.Sprintf("setting delete-on-termination on %s failed %d times (next try in %s): %v",
				step.eniID, rep.failures, rep.next.Sub(now).Round(time.Second), err))
			continue
		}
		// Counted as tried until a describe shows the flag: if EC2 keeps
		// answering yes without keeping it, the tries still back off.
		s.r.inv.RecordDeleteOnTermination(step.eniID)
	}
}
