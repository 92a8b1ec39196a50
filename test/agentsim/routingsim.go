package agentsim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/ciliumnode"
)

// RoutingOptions tune the simulated enipam-agents.
type RoutingOptions struct {
	// Delay is how long an agent takes from seeing a change of its
	// CiliumNode to reporting it routed (the real agent's converge);
	// default 50 ms.
	Delay time.Duration
	// StatusENIsOnly plays an agent of an earlier version: it routes the
	// ENIs of the CiliumNode's status.eni.enis alone, and its reports do
	// not say routesSpecENIs.
	StatusENIsOnly bool
	// Attached reports whether EC2's attachment of an ENI completed: a
	// link exists only then, so the real agent reports nothing of an ENI
	// before. Nil counts every listed ENI as attached (the operator
	// checks the attachment itself before pooling).
	Attached func(eniID string) bool
	// Workers write reports; default 8. QPS and Burst bound the writes'
	// client; defaults 200 and 400.
	Workers int
	QPS     float32
	Burst   int
	Logger  *slog.Logger
	// Endpoints reports whether a pod's endpoint on node holds ip: with
	// it, the agents answer the NodeRouting's endpoint queries as the real
	// agent does on a node with Cilium's endpoint routes; nil answers as
	// on a node without them (nothing absent).
	Endpoints func(node string, ip netip.Addr) bool
	// Metadata reads the instance metadata's local-ipv4s of the ENI with
	// MAC mac on instance instanceID (network/interfaces/macs/MAC/
	// local-ipv4s): with it, the agents answer the NodeRouting's remap
	// queries as the real agent does; nil answers none.
	Metadata func(ctx context.Context, instanceID, mac string) ([]string, error)
	// RemapPoll is how soon an agent reads the metadata again while a
	// queried address is missing from it; default RemapPollInterval.
	RemapPoll time.Duration
}

// RemapPollInterval is the real agent's default interval between reads of
// the instance metadata while a remap it was asked about has not landed.
const RemapPollInterval = 100 * time.Millisecond

// RoutingSim plays enipam-agent on many nodes at once: for each node's
// NodeRouting it reports, in status, what the real agent would have routed
// (Routed), after Delay, and writes only when that changed. Agents can be
// stopped per node (nothing new is reported, as when the DaemonSet pod is
// down) and started again.
type RoutingSim struct {
	opts   RoutingOptions
	client client.WithWatch
	log    *slog.Logger

	cns, nrs cache.SharedIndexInformer
	queue    workqueue.TypedDelayingInterface[string]

	mu      sync.Mutex
	stopped map[string]bool

	reports atomic.Int64
}

// NewRoutingSim returns a simulator; it does nothing until Start.
func NewRoutingSim(cfg *rest.Config, opts RoutingOptions) (*RoutingSim, error) {
	if opts.Delay <= 0 {
		opts.Delay = 50 * time.Millisecond
	}
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	if opts.RemapPoll <= 0 {
		opts.RemapPoll = RemapPollInterval
	}
	if opts.QPS <= 0 {
		opts.QPS, opts.Burst = 200, 400
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{ciliumv2.AddToScheme, enipamv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building the routing simulator's client, %w", err)
	}
	return &RoutingSim{opts: opts, client: c, log: opts.Logger, stopped: map[string]bool{}}, nil
}

// Start watches CiliumNodes and NodeRoutings and starts the reporters; it
// returns once both informers synced. Everything stops with ctx.
func (r *RoutingSim) Start(ctx context.Context) error {
	r.cns = newCiliumNodeInformer(r.client, r.log)
	r.nrs = newNodeRoutingInformer(r.client, nil)
	r.queue = workqueue.NewTypedDelayingQueue[string]()
	enqueue := func(obj any) {
		if m, ok := obj.(metav1.Object); ok {
			r.queue.AddAfter(m.GetName(), r.opts.Delay)
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }}
	for _, inf := range []cache.SharedIndexInformer{r.cns, r.nrs} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
		go inf.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), r.cns.HasSynced, r.nrs.HasSynced) {
		return fmt.Errorf("routing simulator: informers never synced")
	}
	for range r.opts.Workers {
		go func() {
			for {
				name, shutdown := r.queue.Get()
				if shutdown {
					return
				}
				r.report(ctx, name)
				r.queue.Done(name)
			}
		}()
	}
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	return nil
}

// StopNode stops the agent of a node: it reports nothing new until
// StartNode.
func (r *RoutingSim) StopNode(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped[name] = true
}

// StartNode starts the agent of a node again; it reports at once.
func (r *RoutingSim) StartNode(name string) {
	r.mu.Lock()
	delete(r.stopped, name)
	r.mu.Unlock()
	if r.queue != nil {
		r.queue.Add(name)
	}
}

// Kick makes the agent of a node look again after Delay, as a link's
// change wakes the real agent.
func (r *RoutingSim) Kick(name string) {
	if r.queue != nil {
		r.queue.AddAfter(name, r.opts.Delay)
	}
}

// Reports counts the NodeRouting status writes made.
func (r *RoutingSim) Reports() int64 { return r.reports.Load() }

func (r *RoutingSim) report(ctx context.Context, name string) {
	r.mu.Lock()
	stopped := r.stopped[name]
	r.mu.Unlock()
	if stopped {
		return
	}
	cnObj, ok, _ := r.cns.GetStore().GetByKey(name)
	nrObj, ok2, _ := r.nrs.GetStore().GetByKey(name)
	if !ok || !ok2 {
		return
	}
	cn, nr := cnObj.(*ciliumv2.CiliumNode), nrObj.(*enipamv1alpha1.NodeRouting)
	want := nr.DeepCopy()
	spec := nr.Spec
	if r.opts.StatusENIsOnly {
		spec.ENIs = nil
	}
	want.Status.ENIs = Routed(cn, &spec, r.opts.Attached)
	want.Status.RoutedENIs, want.Status.RoutedIPs = int32(len(want.Status.ENIs)), 0
	want.Status.RoutedIPv6, want.Status.RoutedIPv6Prefixes = 0, 0
	for _, e := range want.Status.ENIs {
		want.Status.RoutedIPs += int32(len(e.IPs) + 16*len(e.Prefixes))
		want.Status.RoutedIPv6 += int32(len(e.IPv6))
		want.Status.RoutedIPv6Prefixes += int32(len(e.IPv6Prefixes))
	}
	want.Status.ObservedGeneration = nr.Generation
	want.Status.RoutesSpecENIs = !r.opts.StatusENIsOnly
	meta.SetStatusCondition(&want.Status.Conditions, metav1.Condition{
		Type: enipamv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: enipamv1alpha1.ReasonRouted,
		Message: "simulated", ObservedGeneration: nr.Generation,
	})
	want.Status.Endpoints = r.endpoints(name, nr)
	want.Status.Remaps = r.remaps(ctx, nr)
	if want.Status.Remaps != nil && len(want.Status.Remaps.Missing) > 0 {
		r.queue.AddAfter(name, r.opts.RemapPoll) // looked at again until they land
	}
	if sameJSON(nr.Status, want.Status) {
		return
	}
	if err := ApplyStatus(ctx, r.client, want); err != nil {
		r.log.Debug("routing report failed; retrying", "node", name, "error", err)
		r.queue.AddAfter(name, r.opts.Delay)
		return
	}
	r.reports.Add(1)
}

// endpoints answers the spec's endpoint queries as enipam-agent does
// (nodeagent/routing.ObserveEndpoints): present while an endpoint holds
// the address, absent otherwise only with endpoint routes.
func (r *RoutingSim) endpoints(node string, nr *enipamv1alpha1.NodeRouting) *enipamv1alpha1.EndpointReport {
	if len(nr.Spec.EndpointQueries) == 0 {
		return nil
	}
	rep := &enipamv1alpha1.EndpointReport{ObservedGeneration: nr.Generation, EndpointRoutes: r.opts.Endpoints != nil}
	for _, s := range nr.Spec.EndpointQueries {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		switch {
		case r.opts.Endpoints != nil && !r.opts.Endpoints(node, ip):
			rep.Absent = append(rep.Absent, s)
		case r.opts.Endpoints != nil:
			rep.Present = append(rep.Present, s)
		}
	}
	return rep
}

// remaps answers the spec's remap queries as enipam-agent does
// (nodeagent/agent): each address landed if the instance metadata lists
// it on the queried MAC, missing otherwise; no answer when the metadata
// cannot be read.
func (r *RoutingSim) remaps(ctx context.Context, nr *enipamv1alpha1.NodeRouting) *enipamv1alpha1.RemapReport {
	if len(nr.Spec.RemapQueries) == 0 || r.opts.Metadata == nil {
		return nil
	}
	rep := &enipamv1alpha1.RemapReport{ObservedGeneration: nr.Generation}
	listed := map[string][]string{}
	for _, q := range nr.Spec.RemapQueries {
		ips, ok := listed[q.MAC]
		if !ok {
			var err error
			if ips, err = r.opts.Metadata(ctx, nr.Spec.InstanceID, q.MAC); err != nil {
				r.log.Debug("reading the instance metadata failed", "node", nr.Name, "mac", q.MAC, "error", err)
				r.queue.AddAfter(nr.Name, r.opts.RemapPoll)
				return nr.Status.Remaps
			}
			listed[q.MAC] = ips
		}
		if slices.Contains(ips, q.Address) {
			rep.Landed = append(rep.Landed, q.Address)
		} else {
			rep.Missing = append(rep.Missing, q.Address)
		}
	}
	return rep
}

// Routed is what enipam-agent routes on a node and reports in its
// NodeRouting status (nodeagent/ciliumnode.ToNode and the agent's report
// follow the same rules), for each ENI the agent is told of that is
// attached (nil attached: every one): those of the NodeRouting's
// spec.enis and those only the CiliumNode's status.eni.enis lists, an
// ENI both list taken from the spec (ciliumnode.ENIs, the agent's own
// union). An ENI at or above
// spec.firstInterfaceIndex and not excluded by spec.excludeInterfaceTags
// lists the addresses listed on it and the held addresses
// naming it, plus its prefixes. An ENI the spec no longer selects lists
// the held addresses naming it alone (a prefix whose every address is
// held stands for them), and is left out when there are none. Held
// addresses are the pool's, then those in status.ipam.used that the pool
// lacks; released ones never are. IPv6 goes apart, as the agent reports
// it: addresses in ipv6, a managed ENI's ipv6-prefixes (/80s) whole in
// ipv6Prefixes, released addresses inside them included (EC2 keeps the
// prefix on the ENI), and an address inside one of them not listed on
// its own. The primary ENI's ipv6-prefixes are listed whether the spec
// selects it or not: they hold the node's IPv6 window, which the main
// table routes.
func Routed(cn *ciliumv2.CiliumNode, spec *enipamv1alpha1.NodeRoutingSpec, attached func(string) bool) []enipamv1alpha1.RoutedENI {
	held := map[string]string{}
	for ip, e := range cn.Spec.IPAM.Pool {
		held[ip] = e.Resource
	}
	for ip, e := range cn.Status.IPAM.Used {
		if _, pooled := held[ip]; !pooled {
			held[ip] = e.Resource
		}
	}
	for ip, state := range cn.Status.IPAM.ReleaseIPs {
		if state == ipamoption.IPAMReleased {
			delete(held, ip)
		}
	}
	var out []enipamv1alpha1.RoutedENI
	enis, _ := ciliumnode.ENIs(cn, spec)
	for id, eni := range enis {
		if attached != nil && !attached(id) {
			continue
		}
		managed := eni.Number >= int(spec.FirstInterfaceIndex) && !excludedBy(eni.Tags, spec.ExcludeInterfaceTags)
		ips := map[string]bool{}
		if managed {
			for _, a := range eni.Addresses {
				ips[a.String()] = true
			}
		}
		for ip, resource := range held {
			if resource == id {
				ips[ip] = true
			}
		}
		// The primary ENI's /80s are the node's IPv6 window, routed by the
		// main table whatever the first interface index.
		primary6 := eni.Number == 0 && len(eni.IPv6Prefixes) > 0
		if !managed && len(ips) == 0 && !primary6 {
			continue
		}
		r := enipamv1alpha1.RoutedENI{ID: id, MAC: eni.MAC, Number: int32(eni.Number), Table: int32(10 + eni.Number)}
		var prefixes6 []netip.Prefix
		if managed || primary6 {
			for _, p := range eni.IPv6Prefixes {
				prefixes6 = append(prefixes6, p.Masked())
				r.IPv6Prefixes = append(r.IPv6Prefixes, p.Masked().String())
			}
		}
		for ip := range ips {
			if cn.Status.IPAM.ReleaseIPs[ip] == ipamoption.IPAMReleased {
				continue
			}
			addr, err := netip.ParseAddr(ip)
			switch {
			case err != nil:
			case addr.Is4():
				r.IPs = append(r.IPs, ip)
			case !slices.ContainsFunc(prefixes6, func(p netip.Prefix) bool { return p.Contains(addr) }):
				r.IPv6 = append(r.IPv6, ip)
			}
		}
		for _, p := range eni.Prefixes {
			if managed || wholeHeld(p.Prefix, id, held) {
				r.Prefixes = append(r.Prefixes, p.String())
			}
		}
		// By address, as the agent sorts them (nodeagent/agent's report).
		byAddr := func(a, b string) int {
			addr := func(s string) netip.Addr {
				if p, err := netip.ParsePrefix(s); err == nil {
					return p.Addr()
				}
				x, _ := netip.ParseAddr(s)
				return x
			}
			return cmp.Or(addr(a).Compare(addr(b)), strings.Compare(a, b))
		}
		slices.SortFunc(r.IPs, byAddr)
		slices.SortFunc(r.Prefixes, byAddr)
		slices.SortFunc(r.IPv6, byAddr)
		slices.SortFunc(r.IPv6Prefixes, byAddr)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b enipamv1alpha1.RoutedENI) int { return int(a.Number - b.Number) })
	return out
}

// wholeHeld reports whether every address of p is held on the ENI id.
func wholeHeld(p netip.Prefix, id string, held map[string]string) bool {
	p = p.Masked()
	for ip := p.Addr(); p.Contains(ip); ip = ip.Next() {
		if held[ip.String()] != id {
			return false
		}
	}
	return p.IsValid()
}

func excludedBy(tags, exclude map[string]string) bool {
	if len(exclude) == 0 {
		return false
	}
	for k, v := range exclude {
		if tags[k] != v {
			return false
		}
	}
	return true
}

func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// newNodeRoutingInformer is an informer of every NodeRouting. With
// listed, it is told the revision of each list the informer makes (its
// first page's), and the informer lists rather than streams its initial
// state (a watch-list), so that every list passes there.
func newNodeRoutingInformer(c client.WithWatch, listed func(rv uint64)) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &enipamv1alpha1.NodeRoutingList{}
			err := c.List(ctx, list, &client.ListOptions{Raw: &opts, Limit: opts.Limit, Continue: opts.Continue})
			if err == nil && listed != nil && opts.Continue == "" {
				listed(parseRV(list.ResourceVersion))
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &enipamv1alpha1.NodeRoutingList{}, &client.ListOptions{Raw: &opts})
		},
	}
	if listed != nil {
		return cache.NewSharedIndexInformer(listsOnly{lw}, &enipamv1alpha1.NodeRouting{}, 0, cache.Indexers{})
	}
	return cache.NewSharedIndexInformer(lw, &enipamv1alpha1.NodeRouting{}, 0, cache.Indexers{})
}

// listsOnly is a ListWatch whose reflector lists: it says it does not
// support the watch-list's semantics.
type listsOnly struct{ *cache.ListWatch }

func (listsOnly) IsWatchListSemanticsUnSupported() bool { return true }

// ApplyStatus writes nr's status as enipam-agent does: the whole status,
// by server-side apply through the status subresource under
// FieldManagerAgent. nr is updated from the answer.
func ApplyStatus(ctx context.Context, c client.Client, nr *enipamv1alpha1.NodeRouting) error {
	data, err := json.Marshal(map[string]any{
		"apiVersion": enipamv1alpha1.GroupVersion.String(), "kind": "NodeRouting",
		"metadata": map[string]any{"name": nr.Name}, "status": nr.Status,
	})
	if err != nil {
		return err
	}
	return c.Status().Patch(ctx, nr, client.RawPatch(types.ApplyPatchType, data),
		client.FieldOwner(enipamv1alpha1.FieldManagerAgent), client.ForceOwnership)
}
