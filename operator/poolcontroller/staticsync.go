package poolcontroller

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
)

// staticRecheck is how soon a node whose static addresses are under way
// (a move waiting for the other node, an assignment waiting to be routed)
// is looked at again without any event.
const staticRecheck = time.Second

// staticOldPodRecheck is how soon a node is looked at again while the
// pods of addresses moving away are still bound to it (one pod read
// each).
const staticOldPodRecheck = 5 * time.Second

// gatherStatic reads from the cache the claims that concern the node:
// asked onto it or recorded on it, stamped in its pool, or naming an
// address its ENIs hold outside the pool. False when they cannot be read
// (readFailed says why): without them, a claimed address could be pooled
// as an ordinary one.
func (s *nodeSync) gatherStatic(ctx context.Context) bool {
	in := &staticInputs{node: s.cn.Name, claims: map[string]*claims.Claim{}, listed: map[string]bool{}, firstMarks: maps.Clone(s.mem.firstMarks)}
	for key := range s.cn.Spec.IPAM.Pool {
		in.listed[key] = true
	}
	objs := map[string]*enipamv1alpha1.StaticIPClaim{}
	add := func(c *enipamv1alpha1.StaticIPClaim) {
		in.claims[c.Owner()] = claims.FromObject(c)
		objs[c.Owner()] = c
	}
	var list enipamv1alpha1.StaticIPClaimList
	if err := s.r.client.List(ctx, &list, client.MatchingFields{claims.IndexClaimNode: s.cn.Name}); err != nil {
		s.readFailed(fmt.Errorf("listing the node's static IP claims, %w", err), ReasonClaimsUnreadable)
		return false
	}
	for i := range list.Items {
		add(&list.Items[i])
	}
	for _, e := range s.cn.Spec.IPAM.Pool {
		if e.Owner == "" || in.claims[e.Owner] != nil {
			continue
		}
		ns, name, ok := strings.Cut(e.Owner, "/")
		if !ok {
			continue
		}
		c := &enipamv1alpha1.StaticIPClaim{}
		key := types.NamespacedName{Namespace: ns, Name: name}
		err := s.r.client.Get(ctx, key, c)
		if apierrors.IsNotFound(err) {
			// The cache may lag a claim just made: the apiserver decides
			// whether the stamp lost its claim (deleted without its
			// finalizer).
			if err = s.r.pods().Get(ctx, key, c); apierrors.IsNotFound(err) {
				if in.gone == nil {
					in.gone = map[string]bool{}
				}
				in.gone[e.Owner] = true
				continue
			}
		}
		if err != nil {
			s.readFailed(fmt.Errorf("reading static IP claim %s, %w", e.Owner, err), ReasonClaimsUnreadable)
			return false
		}
		add(c)
	}
	byAddr := func(ip string) bool {
		var list enipamv1alpha1.StaticIPClaimList
		if err := s.r.client.List(ctx, &list, client.MatchingFields{claims.IndexClaimAddress: ip}); err != nil {
			s.readFailed(fmt.Errorf("listing static IP claims of %s, %w", ip, err), ReasonClaimsUnreadable)
			return false
		}
		for j := range list.Items {
			add(&list.Items[j])
		}
		return true
	}
	for i := range s.snap.ENIs {
		e := &s.snap.ENIs[i]
		for _, ip := range e.IPs {
			if _, pooled := s.cn.Spec.IPAM.Pool[ip.String()]; pooled {
				continue
			}
			if !byAddr(ip.String()) {
				return false
			}
		}
	}
	// Ordinary entries in the handshake: a claimed one is never
	// unassigned (decideRelease), whichever node its claim names.
	for ip := range s.cn.Status.IPAM.ReleaseIPs {
		if e, pooled := s.cn.Spec.IPAM.Pool[ip]; pooled && e.Owner == "" && !byAddr(ip) {
			return false
		}
	}
	// Of claims recording one address, only the first (claims.Precedes)
	// moves it; the others lose it, whichever this node sees.
	for owner, c := range in.claims {
		if !c.Addr.IsValid() || c.Release {
			continue
		}
		var rivals enipamv1alpha1.StaticIPClaimList
		if err := s.r.client.List(ctx, &rivals, client.MatchingFields{claims.IndexClaimAddress: c.Addr.String()}); err != nil {
			s.readFailed(fmt.Errorf("listing static IP claims of %s, %w", c.Addr, err), ReasonClaimsUnreadable)
			return false
		}
		for i := range rivals.Items {
			o := &rivals.Items[i]
			if o.Owner() != owner && claims.Records(o, c.Addr.String()) && claims.Precedes(o, objs[owner], c.Addr.String()) {
				c.Lost, c.Ready = true, false
			}
		}
	}
	if !s.readFirstAway(ctx, in) {
		return false
	}
	s.readStaticFacts(ctx, in)
	s.static = in
	return true
}

// readFirstAway reads, from the cache, the claims of the owners of this
// process's first marks on the node that no longer concern it, and sets
// in.firstAway to those waiting for their first placement on another
// node (waitsFirstElsewhere).
func (s *nodeSync) readFirstAway(ctx context.Context, in *staticInputs) bool {
	for _, owner := range in.firstMarks {
		c := in.claims[owner]
		if c == nil {
			ns, name, ok := strings.Cut(owner, "/")
			if !ok {
				continue
			}
			obj := &enipamv1alpha1.StaticIPClaim{}
			if err := s.r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				s.readFailed(fmt.Errorf("reading static IP claim %s, %w", owner, err), ReasonClaimsUnreadable)
				return false
			}
			c = claims.FromObject(obj)
		}
		if waitsFirstElsewhere(c, s.cn.Name) {
			in.markAway(owner)
		}
	}
	return true
}

// waitsFirstElsewhere reports whether claim c waits for its first
// placement on another node than node: no address recorded, not being
// deleted, asked onto another node (kube-scheduler's bind retries move
// a pending pod's claim between nodes).
func waitsFirstElsewhere(c *claims.Claim, node string) bool {
	return !c.Deleting && !c.Addr.IsValid() && c.Target != "" && c.Target != node
}

// runStatic takes into the decision what the static addresses' pass
// decided (out, from decidePool): the placements of the claimed
// addresses that must come onto the node's ENIs (actions), the queries
// to the node's agent about endpoints and remaps (the desired
// NodeRouting), and where each claim stands (the notes, written after
// the CiliumNode's write, writeNotes).
func (s *deciding) runStatic(out staticOutcome) {
	if s.static == nil {
		return
	}
	s.staticDemand = out.demand
	s.mem.firstMarks = out.firstMarks
	s.askEndpoints(out.queries)
	s.r.metrics.staticFastMoves.Add(float64(out.fast))
	// The placements' calls are the executor's, after the CiliumNode's
	// write (act): nothing this pass decided depends on their answer.
	// The next reconcile, at once, reads what they produced and pools
	// a placed address once the node's agent routes it.
	s.acts.static = staticCalls{place: out.place, create: out.create, secondary: out.secondary}
	s.askRemaps(out.verify)
	s.countPool()
	busy := out.handshakes > 0 || out.waiting || len(out.place) > 0 || out.create != nil || out.secondary != ""
	// Waiting only for old pods to go asks the apiserver about each of
	// them on every look: slowly.
	slow := !busy && len(out.oldPods) > 0
	stamped := map[string]bool{}
	for _, e := range s.cn.Spec.IPAM.Pool {
		if e.Owner != "" {
			stamped[e.Owner] = true
		}
	}
	for owner, c := range s.static.claims {
		if c.Release || !c.Ready {
			continue
		}
		note, noted := out.notes[owner]
		switch {
		case noted && note.Reason == "":
			// Another node's word stands.
		case noted:
			s.noteLater(c, s.placementFor(c, note))
			busy = busy || (note.Reason != enipamv1alpha1.ReasonAddressTaken && !out.oldPods[owner])
		case stamped[owner] || s.static.target(c) == s.cn.Name:
			s.noteLater(c, nil)
		}
	}
	switch {
	case busy:
		s.requeueWithin(staticRecheck)
	case slow:
		s.requeueWithin(staticOldPodRecheck)
	}
}

// placeStatic has the executor assign claimed addresses onto the node's
// ENIs, or create the ENI one needs (act, after the CiliumNode's write).
// A new remap onto an ENI makes what the agent answered about an
// earlier one onto it (the address since moved away and back) no word
// about this one: the next reconcile's askRemaps asks anew.
func (s *nodeSync) placeStatic(ctx context.Context, out *staticCalls) error {
	out.place = s.stillTargeted(ctx, out.place)
	moved, err := s.exec().placeStatic(ctx, out)
	for _, ip := range moved {
		delete(s.mem.remapsAsked, ip.String())
	}
	return err
}

// stillTargeted keeps of the placements those that take no address off
// another ENI, and the reassignments whose claim still asks for this
// node, read again from the apiserver right before the call: the
// decision read it before the reconcile's writes (readStaticFacts), and
// kube-scheduler's bind retries can ask the claim onto another node at
// any moment, whose reconcile may be placing it then. A reassignment
// dropped is decided again by the next reconcile.
func (s *nodeSync) stillTargeted(ctx context.Context, place []placement) []placement {
	var keep []placement
	for _, p := range place {
		if p.reassign {
			// No target: the address stays where the claim is (target).
			if t, ok := s.liveTarget(ctx, p.owner); !ok || (t != "" && t != s.cn.Name) {
				s.r.log.Info("a static address's claim asks for another node now; not moved", "node", s.cn.Name, "ip", p.ip, "claim", p.owner, "target", t)
				continue
			}
		}
		keep = append(keep, p)
	}
	return keep
}

// pods is where single pods are read: uncached (Options.Pods).
func (r *Reconciler) pods() client.Reader {
	if r.opts.Pods != nil {
		return r.opts.Pods
	}
	return r.client
}
