package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/routing"
)

// writtenReport is a status the agent wrote, over which version of the
// object.
type writtenReport struct {
	status      enipamv1alpha1.NodeRoutingStatus
	overVersion string
}

// report writes the NodeRouting's status after a converge: the ENIs and
// addresses the converge put in place, and the Ready condition. It writes
// only when that differs from what the object holds, so a node in shape
// costs no write. When the converge could not even read the kernel, the
// ENIs reported before are kept: nothing was changed.
func (a *Agent) report(ctx context.Context, nr *enipamv1alpha1.NodeRouting, res routing.Result, convergeErr error) error {
	nr, status := a.lastReport(ctx, nr)
	status.ObservedGeneration = nr.Generation
	if res.Read { // else nothing was changed: the previous report stands
		var n routedCounts
		status.ENIs, n = routedENIs(res.Routed)
		status.RoutedENIs, status.RoutedIPs, status.RoutedIPv6, status.RoutedIPv6Prefixes = n.enis, n.ips, n.ipv6, n.ipv6Prefixes
	}
	cond := metav1.Condition{Type: enipamv1alpha1.ConditionReady, ObservedGeneration: nr.Generation}
	switch {
	case convergeErr != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, enipamv1alpha1.ReasonRouteFailed
		cond.Message = truncate(convergeErr.Error(), 1024)
	case len(res.Missing) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, enipamv1alpha1.ReasonLinkNotFound
		cond.Message = missingMessage(res.Missing)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, enipamv1alpha1.ReasonRouted
		cond.Message = fmt.Sprintf("%d ENIs and %d addresses routed", status.RoutedENIs, status.RoutedIPs)
		if status.RoutedIPv6 > 0 || status.RoutedIPv6Prefixes > 0 {
			cond.Message += fmt.Sprintf(", and %d IPv6 addresses and %d IPv6 prefixes", status.RoutedIPv6, status.RoutedIPv6Prefixes)
		}
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	status.Endpoints = a.observeEndpoints(nr)
	status.Remaps = a.observeRemaps(ctx, nr)
	return a.writeStatus(ctx, nr, status)
}

// observeEndpoints answers the spec's endpointQueries from the kernel,
// read now, after nr (routing.ObserveEndpoints says what an answer
// proves). Nil when nothing is asked, or when the kernel cannot be read:
// then no answer stands for this generation. While an asked address may
// still be held, any link's change wakes the loop (endpoints come and go
// with their links), so the answer follows the pod's CNI DEL at once.
func (a *Agent) observeEndpoints(nr *enipamv1alpha1.NodeRouting) *enipamv1alpha1.EndpointReport {
	var ips []netip.Addr
	for _, s := range nr.Spec.EndpointQueries {
		if ip, err := netip.ParseAddr(s); err == nil {
			ips = append(ips, ip)
		}
	}
	if len(ips) == 0 {
		a.setWatchEndpoints(false)
		return nil
	}
	routes, err := a.host.Routes()
	if err != nil {
		a.log.Warn("reading routes for the endpoint queries", "err", err)
		a.setWatchEndpoints(true)
		return nil
	}
	links, err := a.host.Links()
	if err != nil {
		a.log.Warn("reading links for the endpoint queries", "err", err)
		a.setWatchEndpoints(true)
		return nil
	}
	seen := routing.ObserveEndpoints(ips, routes, links)
	a.setWatchEndpoints(len(seen.Absent) < len(ips))
	r := &enipamv1alpha1.EndpointReport{ObservedGeneration: nr.Generation, EndpointRoutes: seen.Routes}
	for _, ip := range seen.Present {
		r.Present = append(r.Present, ip.String())
	}
	for _, ip := range seen.Absent {
		r.Absent = append(r.Absent, ip.String())
	}
	return r
}

// observeRemaps answers the spec's remapQueries from the instance
// metadata, read now, after nr: an address the metadata lists on the
// queried MAC's local-ipv4s has landed there (AWS documents this as the
// confirmation that a remap is complete). Nil when nothing is asked or
// the metadata cannot be read: then no answer stands for this
// generation. While one is missing, the loop looks again after
// RemapPoll.
func (a *Agent) observeRemaps(ctx context.Context, nr *enipamv1alpha1.NodeRouting) *enipamv1alpha1.RemapReport {
	if len(nr.Spec.RemapQueries) == 0 || a.cfg.Metadata == nil {
		a.setRemapsPending(false)
		return nil
	}
	r := &enipamv1alpha1.RemapReport{ObservedGeneration: nr.Generation}
	listed := map[string][]string{}
	for _, q := range nr.Spec.RemapQueries {
		ips, ok := listed[q.MAC]
		if !ok {
			var err error
			if ips, err = a.cfg.Metadata.LocalIPv4s(ctx, q.MAC); err != nil {
				a.log.Warn("reading the instance metadata for the remap queries", "mac", q.MAC, "err", err)
				a.setRemapsPending(true)
				return nil
			}
			listed[q.MAC] = ips
		}
		if slices.Contains(ips, q.Address) {
			r.Landed = append(r.Landed, q.Address)
		} else {
			r.Missing = append(r.Missing, q.Address)
		}
	}
	slices.Sort(r.Landed)
	slices.Sort(r.Missing)
	a.setRemapsPending(len(r.Missing) > 0)
	return r
}

// reportRemaps answers the remap queries alone, between converges, over
// the last report (the agent's own write, when the watch has not
// delivered it yet).
func (a *Agent) reportRemaps(ctx context.Context) {
	nr, ok := a.nrWatch.Current()
	if !ok {
		return
	}
	nr, status := a.lastReport(ctx, nr)
	status.Remaps = a.observeRemaps(ctx, nr)
	if err := a.writeStatus(ctx, nr, status); err != nil {
		a.log.Warn("writing the answer to the remap queries", "err", err)
	}
}

// lastReport returns the NodeRouting to write over and a copy of the
// status the agent last reported on it: its own last write when that was
// over nr's version (the watch has not delivered it yet), else nr's
// status. A write over the watch's older copy would take back what the
// agent reported since, the routed ENIs among it, as the apply sets the
// whole status. After a write whose outcome is unknown (it may have
// landed, the answer lost), neither copy can be trusted: the object is
// read afresh, and nr is kept only if that read fails.
func (a *Agent) lastReport(ctx context.Context, nr *enipamv1alpha1.NodeRouting) (*enipamv1alpha1.NodeRouting, enipamv1alpha1.NodeRoutingStatus) {
	a.mu.Lock()
	lost := a.lostWrite
	a.mu.Unlock()
	if lost {
		if fresh, ok, err := a.nrWatch.Read(ctx); err != nil {
			a.log.Warn("reading the NodeRouting after a status write with no answer", "err", err)
		} else if ok {
			nr = fresh
		}
	}
	base := &nr.Status
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.written; w != nil && w.overVersion == nr.ResourceVersion {
		base = &w.status
	}
	return nr, *base.DeepCopy()
}

func (a *Agent) remapsArePending() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.remapsPending
}

func (a *Agent) setRemapsPending(on bool) {
	a.mu.Lock()
	a.remapsPending = on
	a.mu.Unlock()
}

func (a *Agent) setWatchEndpoints(on bool) {
	a.mu.Lock()
	a.watchEndpoints = on
	a.mu.Unlock()
}

// reportStopped marks the NodeRouting not ready as the agent stops; the
// routing stays in the kernel, and so do the ENIs in the report. After a
// cleanup the CleanedUp condition is left as it is.
func (a *Agent) reportStopped() {
	nr, ok := a.nrWatch.Current()
	if !ok || a.Status().CleanedUp {
		return // nothing to report on, or CleanedUp stays the truth
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nr, status := a.lastReport(ctx, nr)
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: enipamv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: nr.Generation,
		Reason: enipamv1alpha1.ReasonAgentStopped, Message: "enipam-agent stopped; the node's routing is left in place",
	})
	if err := a.writeStatus(ctx, nr, status); err != nil {
		a.log.Warn("marking the NodeRouting as stopped", "err", err)
	}
}

// writeStatus applies status onto nr unless nr already holds it, or holds
// the version this agent last wrote over and that write was this status
// (the watch has not delivered the write yet).
// Every status says the agent routes spec.enis (RoutesSpecENIs), unless
// the stored CRD has no such field (withoutRoutesField).
func (a *Agent) writeStatus(ctx context.Context, nr *enipamv1alpha1.NodeRouting, status enipamv1alpha1.NodeRoutingStatus) error {
	status.RoutesSpecENIs = !a.withoutRoutesField()
	if equality.Semantic.DeepEqual(nr.Status, status) {
		return nil
	}
	a.mu.Lock()
	w := a.written
	a.mu.Unlock()
	if w != nil && w.overVersion == nr.ResourceVersion && equality.Semantic.DeepEqual(w.status, status) {
		return nil
	}
	obj := nr.DeepCopy()
	err := a.applyStatus(ctx, obj, status)
	if status.RoutesSpecENIs && refusedForSchema(err, routesFieldPath) {
		// The NodeRouting CRD is an earlier one (its chart upgraded
		// without the CRDs, which Helm never upgrades): the report goes
		// without the field, as an earlier agent's, and the operator
		// keeps status.eni.enis current for it, which this agent routes
		// too.
		a.refusedRoutesField(err)
		status.RoutesSpecENIs = false
		if equality.Semantic.DeepEqual(nr.Status, status) {
			return nil
		}
		obj = nr.DeepCopy()
		err = a.applyStatus(ctx, obj, status)
	}
	a.metrics.statusWrites.WithLabelValues(resultLabel(err)).Inc()
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile; the watch tells the loop
		}
		if mayHaveLanded(err) {
			a.mu.Lock()
			a.lostWrite = true
			a.mu.Unlock()
		}
		return fmt.Errorf("patching the status of NodeRouting %s, %w", nr.Name, err)
	}
	a.mu.Lock()
	a.lostWrite = false
	a.written = &writtenReport{status: status, overVersion: nr.ResourceVersion}
	a.status.StatusWrites++
	a.mu.Unlock()
	return nil
}

// routesFieldPath is the path of status.routesSpecENIs as the apiserver
// names a field its stored schema does not declare.
const routesFieldPath = ".status.routesSpecENIs"

// schemaRetry is how long the agent reports without
// status.routesSpecENIs after the apiserver refused it, before it tries
// the field again (the CRDs may have been upgraded meanwhile).
const schemaRetry = 10 * time.Minute

// refusedForSchema tells whether err is the apiserver's refusal of an
// apply naming the field at path as not declared in the stored schema.
func refusedForSchema(err error, path string) bool {
	return err != nil && strings.Contains(err.Error(), path+": field not declared in schema")
}

// withoutRoutesField tells whether the report goes without
// status.routesSpecENIs: the apiserver refused it less than schemaRetry
// ago.
func (a *Agent) withoutRoutesField() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.noRoutesField.IsZero() && a.now().Sub(a.noRoutesField) < schemaRetry
}

// refusedRoutesField notes the apiserver's refusal of
// status.routesSpecENIs, logged the first time.
func (a *Agent) refusedRoutesField(err error) {
	a.mu.Lock()
	a.noRoutesField = a.now()
	logged := a.schemaLogged
	a.schemaLogged = true
	a.mu.Unlock()
	if !logged {
		a.log.Warn("the NodeRouting CRD has no status.routesSpecENIs (its chart was upgraded without the CRDs); "+
			"reporting without it, as an earlier agent, until the CRDs are upgraded", "error", err.Error(), "retry", schemaRetry)
	}
}

// mayHaveLanded tells whether a write that failed with err may still
// have been applied: no answer came (a cut connection, a cancelled
// request), or the apiserver answered that it timed out or failed inside.
func mayHaveLanded(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}

// routedENIs turns the converge's routed ENIs into the report, sorted by
// device number, each family's addresses and prefixes apart and sorted.
// The counts are of ENIs, of IPv4 addresses (a prefix counting every
// address it stands for), of IPv6 addresses and of IPv6 prefixes.
func routedENIs(routed []routing.RoutedENI) ([]enipamv1alpha1.RoutedENI, routedCounts) {
	routed = slices.Clone(routed)
	slices.SortFunc(routed, func(a, b routing.RoutedENI) int {
		return cmp.Or(cmp.Compare(a.Number, b.Number), strings.Compare(a.ID, b.ID))
	})
	var out []enipamv1alpha1.RoutedENI
	var n routedCounts
	for _, r := range routed {
		e := enipamv1alpha1.RoutedENI{ID: r.ID, MAC: r.MAC.String(), Number: int32(r.Number), Table: int32(r.Table)}
		addrs := slices.Clone(r.IPs)
		slices.SortFunc(addrs, netip.Addr.Compare)
		for _, ip := range addrs {
			if ip.Is4() {
				e.IPs = append(e.IPs, ip.String())
				n.ips++
			} else {
				e.IPv6 = append(e.IPv6, ip.String())
				n.ipv6++
			}
		}
		prefixes := slices.Clone(r.Prefixes)
		slices.SortFunc(prefixes, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		for _, p := range prefixes {
			if p.Addr().Is4() {
				e.Prefixes = append(e.Prefixes, p.String())
				n.ips += int32(1) << (32 - p.Bits())
			} else {
				e.IPv6Prefixes = append(e.IPv6Prefixes, p.String())
				n.ipv6Prefixes++
			}
		}
		out = append(out, e)
	}
	n.enis = int32(len(out))
	return out, n
}

// routedCounts are the report's counts.
type routedCounts struct {
	enis, ips, ipv6, ipv6Prefixes int32
}

func missingMessage(missing []routing.ENI) string {
	parts := make([]string, len(missing))
	for i, e := range missing {
		parts[i] = fmt.Sprintf("no link with MAC %s for ENI %s (device %d)", e.MAC, e.ID, e.Number)
	}
	return truncate(strings.Join(parts, "; "), 1024)
}

func resultLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// statusApply is the agent's applied configuration of its NodeRouting:
// the whole status, every field of which is the agent's alone.
type statusApply struct {
	APIVersion string                           `json:"apiVersion"`
	Kind       string                           `json:"kind"`
	Metadata   statusApplyMeta                  `json:"metadata"`
	Status     enipamv1alpha1.NodeRoutingStatus `json:"status"`
}

type statusApplyMeta struct {
	Name string `json:"name"`
}

// applyStatus writes status as the whole of obj's status by server-side
// apply through the status subresource, under FieldManagerAgent: a field
// the agent no longer reports is removed, and the managedFields name the
// agent as the status's one writer. The status subresource never creates
// the object: a NodeRouting deleted meanwhile answers NotFound. obj is
// updated from the answer.
func (a *Agent) applyStatus(ctx context.Context, obj *enipamv1alpha1.NodeRouting, status enipamv1alpha1.NodeRoutingStatus) error {
	data, err := json.Marshal(statusApply{APIVersion: enipamv1alpha1.GroupVersion.String(), Kind: "NodeRouting",
		Metadata: statusApplyMeta{Name: obj.Name}, Status: status})
	if err != nil {
		return err
	}
	if err := a.client.Status().Patch(ctx, obj, client.RawPatch(types.ApplyPatchType, data),
		client.FieldOwner(enipamv1alpha1.FieldManagerAgent), client.ForceOwnership); err != nil {
		return err
	}
	return a.repairLegacyStatus(ctx, obj, status)
}

// repairLegacyStatus makes obj's status status when the apply left
// fields an earlier writer also owns (an agent that wrote by merge
// patch, before the operator handed its fields to FieldManagerAgent; see
// the operator's adoptLegacyWrites): one merge patch from the answer,
// which removes them whoever owns them. obj is the apply's answer.
func (a *Agent) repairLegacyStatus(ctx context.Context, obj *enipamv1alpha1.NodeRouting, status enipamv1alpha1.NodeRoutingStatus) error {
	have, err := json.Marshal(obj.Status)
	if err != nil {
		return err
	}
	want, err := json.Marshal(status) // as stored: times to the second
	if err != nil || bytes.Equal(have, want) {
		return err
	}
	answer := obj.DeepCopy()
	obj.Status = status
	if err := a.client.Status().Patch(ctx, obj, client.MergeFrom(answer), client.FieldOwner(enipamv1alpha1.FieldManagerAgent)); err != nil {
		return fmt.Errorf("removing an earlier writer's fields from the status of NodeRouting %s, %w", obj.Name, err)
	}
	a.log.Info("status fields of an earlier writer removed", "noderouting", obj.Name)
	return nil
}
