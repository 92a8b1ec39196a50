package staticsim

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// Config sizes one run.
type Config struct {
	// Steps are the steps with world events; quiescing follows.
	Steps int
	// Replicas of the StatefulSet.
	Replicas int
	// QuiesceRounds bound the rounds (every actor once, three seconds
	// of simulated time) after the events, until every claim rests.
	QuiesceRounds int
	// Trace keeps the trace of a seed that passed too.
	Trace bool
	// Watch, an address, traces every change of its entries in the
	// pools, handshakes and status.ipam.used.
	Watch string
}

// DefaultConfig is what TestSeeds runs.
func DefaultConfig() Config { return Config{Steps: 150, Replicas: 3, QuiesceRounds: 40} }

// Result is one seed's run.
type Result struct {
	Seed  uint64
	Steps int
	// Kinds is the sequence of step kinds, one letter each (see kinds).
	Kinds string
	// Hash identifies the interleaving: the kinds and their targets.
	Hash uint64
	// Violations are the broken invariants (at most a few), Unsettled the
	// claims that did not come to rest.
	Violations []string
	Unsettled  []string
	// Counts of what happened: binds, CNI ADDs, moves (a claim's stamp
	// seen on another node than before), operator restarts (crashes
	// included) and crashes at a write.
	Binds, Starts, Moves, Restarts, Crashes int
	// Landings counts the remaps an enipam-agent reported landed from its
	// instance's metadata.
	Landings int
	// EIPAssociations, EIPDisassociations: the operator's Elastic IP
	// calls that went through; EIPKills: deaths at a node Elastic IP
	// write; Retags: static-ip-tags changed on a node.
	EIPAssociations, EIPDisassociations, EIPKills, Retags int
	// Trace is the run, step by step, for a failing seed.
	Trace []string
	Err   error
}

// Failed reports whether the seed broke anything.
func (r Result) Failed() bool { return r.Err != nil || len(r.Violations) > 0 || len(r.Unsettled) > 0 }

// kind is one kind of step with its weight in the draw.
type kind struct {
	letter byte
	weight int
	run    func(w *world, cfg Config) string
}

// kinds are what a step may do: the control loop's actors (lower case)
// and the world's events (upper case).
var kinds = []kind{
	{'n', 20, func(w *world, _ Config) string { return w.reconcileNode(w.pickNode(false)) }},
	{'c', 10, func(w *world, _ Config) string { return w.reconcileClaim() }},
	{'o', 12, func(w *world, _ Config) string {
		n := w.pickNode(true)
		w.agents[n].observe(w)
		return n
	}},
	{'f', 10, func(w *world, _ Config) string {
		n := w.pickNode(true)
		if w.agents[n].flush(w) {
			w.logf("agent %s: status written", n)
		}
		return n
	}},
	{'r', 8, func(w *world, _ Config) string {
		n := w.pickNode(true)
		w.route(n)
		return n
	}},
	{'k', 12, func(w *world, _ Config) string {
		n := w.pickNode(true)
		w.kubelet(n)
		return n
	}},
	{'s', 8, func(w *world, _ Config) string { w.schedule(); return "" }},
	{'i', 3, func(w *world, _ Config) string { _ = w.op.inv.SyncOnce(context.Background()); return "" }},
	{'S', 5, func(w *world, cfg Config) string { w.ensurePods(cfg.Replicas); return "" }},
	{'D', 2, func(w *world, _ Config) string { return w.deletePod(true) }},
	{'F', 1, func(w *world, _ Config) string { return w.deletePod(false) }},
	{'C', 1, func(w *world, cfg Config) string { return w.createClaim(cfg.Replicas) }},
	{'X', 1, func(w *world, _ Config) string { return w.deleteClaim() }},
	{'O', 1, func(w *world, _ Config) string { return w.cordon() }},
	{'T', 1, func(w *world, _ Config) string { return w.terminate() }},
	{'R', 1, func(w *world, _ Config) string {
		w.logf("operator restarted")
		if err := w.restart(); err != nil {
			w.violate("restart: %v", err)
		}
		return ""
	}},
	{'G', 2, func(w *world, _ Config) string { return w.retag() }},
	{'Q', 1, func(w *world, _ Config) string {
		w.op.eipCrashAt, w.op.landed = 1+w.rng.IntN(3), w.rng.IntN(2) == 0
		w.logf("operator armed to die at its Elastic IP write %d from now (landing: %v)", w.op.eipCrashAt, w.op.landed)
		return ""
	}},
	{'K', 1, func(w *world, _ Config) string {
		w.op.crashAt, w.op.landed = 1+w.rng.IntN(3), w.rng.IntN(2) == 0
		w.logf("operator armed to die at its write %d from now (landing: %v)", w.op.crashAt, w.op.landed)
		return ""
	}},
}

var totalWeight = func() int {
	t := 0
	for _, k := range kinds {
		t += k.weight
	}
	return t
}()

// Run runs one seed: the events, then quiescing, checking after every
// step.
func Run(seed uint64, cfg Config) Result {
	res := Result{Seed: seed}
	w, err := newWorld(seed)
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	h := fnv.New64a()
	w.ensurePods(cfg.Replicas)
	for step := 0; step < cfg.Steps && len(w.violations) == 0; step++ {
		w.clock.Advance(time.Duration(w.rng.IntN(2000)) * time.Millisecond)
		x := w.rng.IntN(totalWeight)
		var k kind
		for _, k = range kinds {
			if x < k.weight {
				break
			}
			x -= k.weight
		}
		target := k.run(w, cfg)
		w.watch(cfg.Watch, fmt.Sprintf("%c %s", k.letter, target))
		w.kinds = append(w.kinds, k.letter)
		fmt.Fprintf(h, "%c%s;", k.letter, target)
		w.afterStep()
		res.Steps++
	}
	for round := 0; round < cfg.QuiesceRounds && len(w.violations) == 0; round++ {
		w.clock.Advance(3 * time.Second)
		w.round(cfg, round)
		w.watch(cfg.Watch, "round")
		res.Steps++
		if round%3 == 2 && len(w.atRest()) == 0 {
			break
		}
	}
	if len(w.violations) == 0 {
		res.Unsettled = w.atRest()
	}
	if len(w.violations) > 0 || len(res.Unsettled) > 0 {
		w.describe()
	}
	res.Kinds, res.Hash = string(w.kinds), h.Sum64()
	res.Binds, res.Starts, res.Moves, res.Restarts, res.Crashes = w.binds, w.starts, w.moves, w.restarts, w.crashes
	res.Landings = w.landings
	res.EIPAssociations, res.EIPDisassociations, res.EIPKills, res.Retags = w.eipAssociations, w.eipDisassociations, w.eipKills, w.retags
	res.Violations = w.violations[:min(len(w.violations), 5)]
	if res.Failed() || cfg.Trace {
		res.Trace = w.trace
	}
	return res
}

// afterStep restarts a process that died in the step, then checks.
func (w *world) afterStep() {
	if w.op.dead {
		w.crashes++
		if w.op.eipKilled {
			w.eipKills++
		}
		w.logf("operator died; a new one starts")
		if err := w.restart(); err != nil {
			w.violate("restart: %v", err)
		}
	}
	w.check()
}

// round runs every actor once, in the seed's order, with no world
// event: the cluster settles.
func (w *world) round(cfg Config, round int) {
	w.ensurePods(cfg.Replicas)
	w.afterStep()
	for _, n := range w.liveNodes() {
		w.agents[n].observe(w)
		w.route(n)
		w.afterStep()
	}
	for _, n := range w.liveNodes() {
		w.reconcileNode(n)
		w.afterStep()
		w.watch(cfg.Watch, "round: reconcile "+n)
	}
	// A terminated node's NodeRouting, held by its static-IP finalizer,
	// is reconciled until it goes (its deletion queues the node).
	for _, n := range w.nodes {
		if n.gone && w.store.get(client.ObjectKey{Name: n.name}, &enipamv1alpha1.NodeRouting{}) {
			w.reconcileNode(n.name)
			w.afterStep()
		}
	}
	var claims enipamv1alpha1.StaticIPClaimList
	w.store.list(&claims)
	for i := range claims.Items {
		w.reconcile(true, client.ObjectKeyFromObject(&claims.Items[i]))
		w.afterStep()
		w.watch(cfg.Watch, "round: claim "+claims.Items[i].Name)
	}
	for _, n := range w.liveNodes() {
		w.agents[n].observe(w)
		w.agents[n].flush(w)
		w.kubelet(n)
		w.afterStep()
		w.watch(cfg.Watch, "round: agent and kubelet "+n)
	}
	w.schedule()
	w.afterStep()
	if round%3 == 2 {
		_ = w.op.inv.SyncOnce(context.Background())
	}
}

func (w *world) liveNodes() []string {
	var out []string
	for _, n := range w.nodes {
		if !n.gone {
			out = append(out, n.name)
		}
	}
	return out
}

// pickNode draws a node; live only, or any (a gone node's CiliumNode is
// reconciled too: the operator releases what it held).
func (w *world) pickNode(live bool) string {
	if live {
		l := w.liveNodes()
		return l[w.rng.IntN(len(l))]
	}
	return w.nodes[w.rng.IntN(len(w.nodes))].name
}

func (w *world) reconcileNode(name string) string {
	w.reconcile(false, client.ObjectKey{Name: name})
	return name
}

// reconcileClaim reconciles a claim drawn by the seed.
func (w *world) reconcileClaim() string {
	var claims enipamv1alpha1.StaticIPClaimList
	w.store.list(&claims)
	if len(claims.Items) == 0 {
		return ""
	}
	c := &claims.Items[w.rng.IntN(len(claims.Items))]
	w.reconcile(true, client.ObjectKeyFromObject(c))
	return c.Name
}

// reconcile calls a controller's Reconcile; one that blocks (it would
// wait on a goroutine the simulation does not run) is a failure of the
// simulation, told as such.
func (w *world) reconcile(claim bool, key client.ObjectKey) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if claim {
		_, err = w.op.claims.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	} else {
		// A node the pool controller asks back at once (its actions
		// changed what EC2 holds for it: act.go's actedRequeue) is
		// reconciled again at once, as the workqueue does within a
		// millisecond, before any other actor moves; the controller
		// bounds such runs in a row itself (maxQuickRuns).
		for range quickRequeues {
			var res ctrl.Result
			res, err = w.op.pools.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			if err != nil || ctx.Err() != nil || w.op.dead || res.RequeueAfter <= 0 || res.RequeueAfter > atOnce {
				break
			}
		}
	}
	if ctx.Err() != nil {
		w.violate("reconcile of %s blocked: %v", key, err)
	}
}

// atOnce is the longest requeue taken for "at once"; quickRequeues
// bounds the reconciles of one node in a row (the controller's own bound
// is lower).
const (
	atOnce        = 10 * time.Millisecond
	quickRequeues = 8
)

// keys lists names sorted, for draws that do not depend on map order.
func keys[V any](m map[string]V) []string { return slices.Sorted(mapsKeys(m)) }

// watch traces the entries of ip after a step, when they changed.
func (w *world) watch(ip, step string) {
	if ip == "" {
		return
	}
	var nodes ciliumv2.CiliumNodeList
	w.store.list(&nodes)
	out := ""
	for _, cn := range nodes.Items {
		e, pooled := cn.Spec.IPAM.Pool[ip]
		rel, hs := cn.Status.IPAM.ReleaseIPs[ip]
		u, used := cn.Status.IPAM.Used[ip]
		if pooled || hs || used {
			out += fmt.Sprintf(" %s[pool %v owner %q, release %q, used %q]", cn.Name, pooled, e.Owner, rel, u.Owner)
		}
	}
	var claims enipamv1alpha1.StaticIPClaimList
	w.store.list(&claims)
	for _, c := range claims.Items {
		if c.Spec.Address == ip || c.Status.Address == ip {
			out += fmt.Sprintf(" claim %s[spec %q→%q, status on %q, %s]", c.Name, c.Spec.Address, c.Spec.NodeName, c.Status.NodeName, c.Status.Phase)
		}
	}
	if out != w.watched {
		w.watched = out
		w.logf("watch %s after %s:%s", ip, step, out)
	}
}
