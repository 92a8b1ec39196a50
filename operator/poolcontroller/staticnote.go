package poolcontroller

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
)

// The pool controller meets the claim controller through each claim's
// status.placement, the one field of a claim it writes: its word on the
// placement under way (reason and message), keyed to the claim as this
// pass read it (the address it records, its generation) and to the
// operator's term. The claim controller reads the note from its cache and
// acts only on a note keyed to the claim as it is then
// (claims.CurrentNote): one written about an earlier state of the claim,
// or by an earlier term, which nothing has rewritten yet, is ignored.

// placementFor is the note this node's pass leaves on claim c.
func (s *deciding) placementFor(c *claims.Claim, n placementNote) *enipamv1alpha1.PlacementNote {
	out := &enipamv1alpha1.PlacementNote{Node: s.cn.Name, ObservedGeneration: c.Generation, Term: s.r.opts.Term,
		Reason: n.Reason, Message: n.Message}
	if c.Addr.IsValid() {
		out.Address = c.Addr.String()
	}
	return out
}

// claimNote is a claim's note to write (writeNote), queued by the
// decision (noteLater).
type claimNote struct {
	claim *claims.Claim
	want  *enipamv1alpha1.PlacementNote
}

// noteLater queues the note want on claim c, written after the
// CiliumNode's write (writeNotes), unless the claim as read holds it
// already.
func (s *deciding) noteLater(c *claims.Claim, want *enipamv1alpha1.PlacementNote) {
	if reflect.DeepEqual(c.Placement, want) {
		return
	}
	s.acts.notes = append(s.acts.notes, claimNote{claim: c, want: want})
}

// writeNotes writes the claims' notes the decision queued, after the
// CiliumNode's write; none when that write failed (dropActions): the
// next reconcile decides them again. No note needs to precede the
// write: a note is the pool controller's word on the claim as this pass
// read it, and its readers judge it against the node's pool (the claim
// controller reads the stamps from the CiliumNodes, claims.CurrentNote
// keys the note to the claim), so a reader that sees a note sees the
// pool the pass decided with it already written, never a note about a
// pool not yet written.
func (s *nodeSync) writeNotes(ctx context.Context) {
	for _, n := range s.acts.notes {
		s.writeNote(ctx, n.claim, n.want)
	}
	s.acts.notes = nil
}

// writeNote sets claim c's status.placement to want (nil: removes it)
// by a merge patch of that field alone, unless the claim as read holds
// it already. A claim gone is left alone; a write that fails is logged
// and the node looked at again soon.
func (s *nodeSync) writeNote(ctx context.Context, c *claims.Claim, want *enipamv1alpha1.PlacementNote) {
	if reflect.DeepEqual(c.Placement, want) {
		return
	}
	ns, name, ok := strings.Cut(c.Owner, "/")
	if !ok {
		return
	}
	patch, err := notePatch(want)
	if err == nil {
		obj := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		err = s.r.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	}
	switch {
	case err == nil, apierrors.IsNotFound(err):
		c.Placement = want
	default:
		s.r.log.Info("writing a static IP claim's placement note failed; retrying", "node", s.cn.Name, "claim", c.Owner, "error", err)
		s.requeueWithin(staticRecheck)
	}
}

// notePatch is the merge patch that makes status.placement n: every field
// of n is spelled out, zero values too, since a merge patch keeps the
// stored fields it omits (nil: null, which removes the note).
func notePatch(n *enipamv1alpha1.PlacementNote) ([]byte, error) {
	var note map[string]any
	if n != nil {
		note = map[string]any{}
		v, t := reflect.ValueOf(*n), reflect.TypeFor[enipamv1alpha1.PlacementNote]()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			note[name] = v.Field(i).Interface()
		}
	}
	return json.Marshal(map[string]any{"status": map[string]any{"placement": note}})
}
