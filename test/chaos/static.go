package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/schedtest"
	"github.com/enipam/enipam/test/stack"
)

// staticNamespace holds the run's static-IP StatefulSets.
const staticNamespace = "static"

// staticSet is one of the run's static-IP StatefulSets.
type staticSet struct {
	name string
	// zone keeps its pods on one side of the run's nodes: us-east-1a
	// (pod IPs on the primary ENI) or us-east-1b (the secondary policy).
	zone   string
	policy enipamv1alpha1.ReclaimPolicy
	// public asks for an allocated Elastic IP per pod.
	public bool
	// replicas is its size now; busy while a move or its scale-down is
	// under way.
	replicas int
	busy     bool
}

// statics are the run's static-IP StatefulSets (Options.StaticReplicas):
// web (Retain, an Elastic IP per pod, on the us-east-1a nodes) and db
// (WithStatefulSet, no public IP, on the us-east-1b nodes under the
// secondary policy), run by the real kube-controller-manager, scheduled
// by the real kube-scheduler with enipam's extender as the chart
// configures them, their pods started by simulated kubelets through the
// simulated cilium-agents. At each kill a pod of each set is moved (its
// node cordoned, the pod deleted, the StatefulSet controller recreating
// it elsewhere) so that kills land mid-move; as the shrink begins each
// set loses its last ordinal (db's claim released by its policy, web's
// claim deleted as a user would). While the run goes on, a sampler holds
// the claims, the pools, the pods and EC2 to the claims' invariants
// (agentsim.CheckClaims, agentsim.CheckPublicIPs), and again at rest.
type statics struct {
	w       *world
	kubelet *agentsim.Kubelet
	sched   *schedtest.Scheduler
	kcm     *stack.Process
	extLog  *os.File

	mu     sync.Mutex
	rng    *rand.Rand
	sets   []*staticSet
	placed bool
	// moves counts the completed moves, killMoves those begun at a kill,
	// deleted the claims deleted; stalls name the steps that never
	// completed.
	moves, killMoves, deleted int
	stalls                    []string
	wg                        sync.WaitGroup

	// The sampler's sums, and the most owner stamps seen per node.
	looks        int
	held         map[types.UID]string
	claims       agentsim.ClaimFindings
	public       agentsim.PublicIPFindings
	stamps       map[string]int
	stopSampling context.CancelFunc
	sampled      chan struct{}
	// timeline records, with the time seen, every change of a claim or a
	// static pod the sampler saw (static-timeline.log in the run's logs).
	timeline *os.File
	last     map[string]string
}

// startStatics starts kube-controller-manager, kube-scheduler with the
// extender and the kubelets; ctx ends the kubelets (with the agents).
func startStatics(ctx, kctx context.Context, w *world) (_ *statics, err error) {
	s := &statics{w: w, rng: rand.New(rand.NewPCG(w.opts.Seed, 0x737461746963)), held: map[types.UID]string{}, stamps: map[string]int{}}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	s.kubelet = agentsim.NewKubelet(w.agents, agentsim.KubeletOptions{CNIDelay: 50 * time.Millisecond})
	if err := s.kubelet.Start(kctx); err != nil {
		return nil, err
	}
	c := w.cluster.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: staticNamespace}}); err != nil {
		return nil, err
	}
	kc, err := w.cluster.KubeConfig()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(w.dir, "kubeconfig-admin")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	if s.kcm, err = stack.StartControllerManager(ctx, w.cluster.BinDir, w.dir, kubeconfig); err != nil {
		return nil, err
	}
	parts, err := schedtest.Render(ctx, "default")
	if err != nil {
		return nil, err
	}
	if s.extLog, err = os.Create(filepath.Join(w.dir, "enipam-scheduler-extender.log")); err != nil {
		return nil, err
	}
	if s.timeline, err = os.Create(filepath.Join(w.dir, "static-timeline.log")); err != nil {
		return nil, err
	}
	s.last = map[string]string{}
	if s.sched, err = schedtest.Start(ctx, parts, schedtest.Options{Kubeconfig: kc, BinDir: w.cluster.BinDir, Dir: w.dir, Log: s.extLog}); err != nil {
		return nil, fmt.Errorf("starting kube-scheduler and the extender, %w", err)
	}
	n := w.opts.StaticReplicas
	s.sets = []*staticSet{
		{name: "web", zone: "us-east-1a", policy: enipamv1alpha1.ReclaimRetain, public: true, replicas: n},
		{name: "db", zone: "us-east-1b", policy: enipamv1alpha1.ReclaimWithStatefulSet, replicas: n},
	}
	return s, nil
}

// stop ends the scheduler and kube-controller-manager.
func (s *statics) stop() {
	if s == nil {
		return
	}
	if s.stopSampling != nil {
		s.stopSampling()
		<-s.sampled
	}
	if s.sched != nil {
		_ = s.sched.Stop()
	}
	if s.kcm != nil {
		_ = s.kcm.Stop(10 * time.Second)
	}
	for _, f := range []*os.File{s.extLog, s.timeline} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// register makes joined nodes schedulable, as their kubelets do.
func (s *statics) register(ctx context.Context, nodes []string) error {
	if s == nil {
		return nil
	}
	for _, n := range nodes {
		if err := s.kubelet.Register(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// begin creates the StatefulSets, starts the sampler, and waits in the
// background until every pod runs with its claim's address.
func (s *statics) begin(ctx context.Context) error {
	if s == nil {
		return nil
	}
	for _, set := range s.sets {
		annotations := map[string]string{enipamv1alpha1.StaticIPAnnotation: string(set.policy)}
		if set.public {
			annotations[enipamv1alpha1.PublicIPAnnotation] = "allocate"
		}
		labels := map[string]string{"app": set.name}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: staticNamespace, Name: set.name},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(set.replicas)), ServiceName: set.name, PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
					Spec: corev1.PodSpec{
						SchedulerName: "enipam-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](0),
						NodeSelector: map[string]string{corev1.LabelTopologyZone: set.zone},
						Containers:   []corev1.Container{{Name: set.name, Image: "registry.k8s.io/pause:3.10"}},
					},
				},
			},
		}
		if err := s.w.cluster.Client.Create(ctx, sts); err != nil {
			return fmt.Errorf("creating StatefulSet %s, %w", set.name, err)
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	s.stopSampling, s.sampled = cancel, make(chan struct{})
	go s.sample(sctx)
	s.wg.Go(func() {
		for _, set := range s.sets {
			for i := range set.replicas {
				if _, _, err := s.running(ctx, fmt.Sprintf("%s-%d", set.name, i), "", "", s.timeout()); err != nil {
					s.stall("placing %s-%d: %v", set.name, i, err)
				}
			}
		}
		s.mu.Lock()
		s.placed = true
		s.mu.Unlock()
		s.w.say("static: %d StatefulSets of %d pods placed", len(s.sets), s.w.opts.StaticReplicas)
	})
	return nil
}

// timeout bounds one static step: a move, a placement, a claim's
// deletion.
func (s *statics) timeout() time.Duration {
	return 3*time.Minute + time.Duration(s.w.opts.Nodes)*time.Second
}

func (s *statics) stall(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls = append(s.stalls, fmt.Sprintf(format, args...))
}

// claim returns a static pod's claim, nil when it has none.
func (s *statics) claim(ctx context.Context, name string) *enipamv1alpha1.StaticIPClaim {
	c := &enipamv1alpha1.StaticIPClaim{}
	if s.w.cluster.Client.Get(ctx, client.ObjectKey{Namespace: staticNamespace, Name: name}, c) != nil {
		return nil
	}
	return c
}

// running waits until a pod of name other than notUID runs, on a node
// other than notOn, with the address of its Bound claim, and returns
// its node and address.
func (s *statics) running(ctx context.Context, name, notOn string, notUID types.UID, timeout time.Duration) (node, ip string, err error) {
	deadline := time.Now().Add(timeout)
	for {
		p := &corev1.Pod{}
		err := s.w.cluster.Client.Get(ctx, client.ObjectKey{Namespace: staticNamespace, Name: name}, p)
		if c := s.claim(ctx, name); err == nil && c != nil && p.UID != notUID && p.DeletionTimestamp == nil && p.Status.PodIP != "" &&
			p.Spec.NodeName != notOn && c.Status.Phase == enipamv1alpha1.ClaimBound && c.Status.Address == p.Status.PodIP && c.Status.NodeName == p.Spec.NodeName {
			return p.Spec.NodeName, p.Status.PodIP, nil
		}
		if time.Now().After(deadline) {
			return "", "", fmt.Errorf("%s never ran with its claim's address within %s", name, timeout)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return "", "", err
		}
	}
}

// take marks a set busy for a step; false when it is already.
func (s *statics) take(set *staticSet) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set.busy || !s.placed {
		return false
	}
	set.busy = true
	return true
}

func (s *statics) free(set *staticSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set.busy = false
}

// moveAtKill starts a move in every set that is free, as a kill is about
// to land.
func (s *statics) moveAtKill(ctx context.Context) {
	if s == nil {
		return
	}
	for _, set := range s.sets {
		if s.take(set) {
			s.mu.Lock()
			s.killMoves++
			s.mu.Unlock()
			s.wg.Go(func() {
				defer s.free(set)
				s.move(ctx, set)
			})
		}
	}
}

// move moves one pod of set: its node cordoned, the pod deleted; the
// StatefulSet controller recreates it and it must run on another node
// with its claim's address, the same as before.
func (s *statics) move(ctx context.Context, set *staticSet) {
	s.mu.Lock()
	name := fmt.Sprintf("%s-%d", set.name, s.rng.IntN(set.replicas))
	s.mu.Unlock()
	old, ip, err := s.running(ctx, name, "", "", s.timeout())
	if err != nil {
		s.stall("before moving %s: %v", name, err)
		return
	}
	p := &corev1.Pod{}
	if err := s.w.cluster.Client.Get(ctx, client.ObjectKey{Namespace: staticNamespace, Name: name}, p); err != nil {
		s.stall("moving %s: %v", name, err)
		return
	}
	if err := s.cordon(ctx, old, true); err != nil {
		s.stall("cordoning %s: %v", old, err)
		return
	}
	defer func() {
		if err := s.cordon(context.WithoutCancel(ctx), old, false); err != nil {
			s.stall("uncordoning %s: %v", old, err)
		}
	}()
	if err := s.w.cluster.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil {
		s.stall("deleting %s: %v", name, err)
		return
	}
	node, got, err := s.running(ctx, name, old, p.UID, s.timeout())
	switch {
	case err != nil:
		s.stall("moving %s off %s: %v", name, old, err)
	case got != ip:
		s.stall("%s moved from %s to %s with %s, not its %s", name, old, node, got, ip)
	default:
		s.mu.Lock()
		s.moves++
		s.mu.Unlock()
		s.w.say("static: %s moved from %s to %s with %s", name, old, node, ip)
	}
}

// cordon marks a node unschedulable, or schedulable again.
func (s *statics) cordon(ctx context.Context, node string, on bool) error {
	n := &corev1.Node{}
	if err := s.w.cluster.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return err
	}
	orig := n.DeepCopy()
	n.Spec.Unschedulable = on
	return s.w.cluster.Client.Patch(ctx, n, client.MergeFrom(orig))
}

// shrink takes every set's last ordinal away, in the background: the
// StatefulSet scaled down by one; db's claim goes by its policy, web's
// is deleted once its pod is gone, and both must be gone in the end.
func (s *statics) shrink(ctx context.Context) {
	if s == nil {
		return
	}
	for _, set := range s.sets {
		s.wg.Go(func() {
			for !s.take(set) {
				if sleep(ctx, 200*time.Millisecond) != nil {
					return
				}
			}
			defer s.free(set)
			s.scaleDown(ctx, set)
		})
	}
}

func (s *statics) scaleDown(ctx context.Context, set *staticSet) {
	c := s.w.cluster.Client
	s.mu.Lock()
	set.replicas--
	n := set.replicas
	s.mu.Unlock()
	name := fmt.Sprintf("%s-%d", set.name, n)
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: staticNamespace, Name: set.name}, sts); err != nil {
		s.stall("scaling %s down: %v", set.name, err)
		return
	}
	orig := sts.DeepCopy()
	sts.Spec.Replicas = ptr.To(int32(n))
	if err := c.Patch(ctx, sts, client.MergeFrom(orig)); err != nil {
		s.stall("scaling %s down: %v", set.name, err)
		return
	}
	deadline := time.Now().Add(s.timeout())
	gone := func(obj client.Object) bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: staticNamespace, Name: name}, obj))
	}
	for !gone(&corev1.Pod{}) {
		if time.Now().After(deadline) || sleep(ctx, 200*time.Millisecond) != nil {
			s.stall("%s never went after the scale-down", name)
			return
		}
	}
	if set.policy == enipamv1alpha1.ReclaimRetain {
		if cl := s.claim(ctx, name); cl != nil {
			if err := c.Delete(ctx, cl); client.IgnoreNotFound(err) != nil {
				s.stall("deleting claim %s: %v", name, err)
				return
			}
		}
	}
	for !gone(&enipamv1alpha1.StaticIPClaim{}) {
		if time.Now().After(deadline) || sleep(ctx, 200*time.Millisecond) != nil {
			s.stall("claim %s (%s) never went", name, set.policy)
			return
		}
	}
	s.mu.Lock()
	s.deleted++
	s.mu.Unlock()
	s.w.say("static: %s scaled to %d, claim %s gone (%s)", set.name, n, name, set.policy)
}

// finish waits for the steps under way, then moves pods, the sets in
// parallel, until Options.StaticMoves moves are done.
func (s *statics) finish(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.wg.Wait()
	s.mu.Lock()
	left := s.w.opts.StaticMoves - s.moves
	s.mu.Unlock()
	for i, set := range s.sets {
		k := left / len(s.sets)
		if i < left%len(s.sets) {
			k++
		}
		s.wg.Go(func() {
			for range k {
				if !s.take(set) {
					return
				}
				s.move(ctx, set)
				s.free(set)
			}
		})
	}
	s.wg.Wait()
	return ctx.Err()
}

// look reads the claims, EC2, the CiliumNodes, the static pods, and the
// claims again: the claims seen both times, unchanged, are checked
// against the rest.
func (s *statics) look(ctx context.Context) ([]enipamv1alpha1.StaticIPClaim, []ciliumv2.CiliumNode, []corev1.Pod, ec2sim.Dump, error) {
	c := s.w.cluster.Client
	var before, after enipamv1alpha1.StaticIPClaimList
	var nodes ciliumv2.CiliumNodeList
	var pods corev1.PodList
	if err := c.List(ctx, &before, client.InNamespace(staticNamespace)); err != nil {
		return nil, nil, nil, ec2sim.Dump{}, err
	}
	dump, err := s.w.sim.Admin.Dump(ctx)
	if err != nil {
		return nil, nil, nil, ec2sim.Dump{}, err
	}
	if err := c.List(ctx, &nodes); err != nil {
		return nil, nil, nil, ec2sim.Dump{}, err
	}
	if err := c.List(ctx, &pods, client.InNamespace(staticNamespace)); err != nil {
		return nil, nil, nil, ec2sim.Dump{}, err
	}
	if err := c.List(ctx, &after, client.InNamespace(staticNamespace)); err != nil {
		return nil, nil, nil, ec2sim.Dump{}, err
	}
	return agentsim.StableClaims(before.Items, after.Items), nodes.Items, pods.Items, dump, nil
}

// sample looks every half second (every two beyond 100 nodes) until ctx
// ends.
func (s *statics) sample(ctx context.Context) {
	defer close(s.sampled)
	every := 500 * time.Millisecond
	if s.w.opts.Nodes > 100 {
		every = 2 * time.Second
	}
	for ctx.Err() == nil {
		claims, nodes, pods, dump, err := s.look(ctx)
		if err == nil {
			cf := agentsim.CheckClaims(claims, nodes, pods, dump, s.held, false)
			pf := agentsim.CheckPublicIPs(claims, nodes, dump, clusterName, false)
			s.mu.Lock()
			s.looks++
			s.claims.Add(cf)
			s.public.OnOrdinaryAddress += pf.OnOrdinaryAddress
			s.public.OnOtherPod += pf.OnOtherPod
			s.public.TwicePerClaim += pf.TwicePerClaim
			s.public.Details = append(s.public.Details, pf.Details...)
			s.countStamps(nodes)
			s.mu.Unlock()
			s.record(claims, nodes, pods)
		}
		_ = sleep(ctx, every)
	}
}

// record writes to the timeline what changed since the last look: each
// claim's phase, address, node and reason, each static pod's node and
// address, and each claimed address's pool entries and holders.
func (s *statics) record(claims []enipamv1alpha1.StaticIPClaim, nodes []ciliumv2.CiliumNode, pods []corev1.Pod) {
	now := map[string]string{}
	for _, c := range claims {
		reason := ""
		if r := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady); r != nil {
			reason = r.Reason + ": " + r.Message
		}
		now["claim "+c.Name] = fmt.Sprintf("%s %s on %q asked %q (%s)", c.Status.Phase, c.Status.Address, c.Status.NodeName, c.Spec.NodeName, reason)
		if c.Status.Address == "" {
			continue
		}
		var where []string
		for _, cn := range nodes {
			if e, ok := cn.Spec.IPAM.Pool[c.Status.Address]; ok {
				where = append(where, fmt.Sprintf("pool of %s stamped %q release %q used by %q",
					cn.Name, e.Owner, cn.Status.IPAM.ReleaseIPs[c.Status.Address], cn.Status.IPAM.Used[c.Status.Address].Owner))
			}
		}
		now["address "+c.Status.Address] = strings.Join(where, "; ")
	}
	for _, p := range pods {
		now["pod "+p.Name] = fmt.Sprintf("%s on %q with %q deleting %v", p.UID, p.Spec.NodeName, p.Status.PodIP, p.DeletionTimestamp != nil)
	}
	at := time.Now().UTC().Format("15:04:05.000")
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if s.last[k] != now[k] {
			fmt.Fprintf(s.timeline, "%s %s: %s\n", at, k, now[k])
		}
	}
	s.last = now
}

// countStamps records the most owner-stamped pool entries seen per node
// (s.mu held).
func (s *statics) countStamps(nodes []ciliumv2.CiliumNode) {
	for _, cn := range nodes {
		n := 0
		for _, e := range cn.Spec.IPAM.Pool {
			if e.Owner != "" {
				n++
			}
		}
		s.stamps[cn.Name] = max(s.stamps[cn.Name], n)
	}
}

// extra is how many pool addresses a node's static pods may have added
// to its peak: two per owner stamp seen there (its pod counted as bound
// and waiting, and its address held out of the free ones).
func (s *statics) extra(node string) int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return 2 * s.stamps[node]
}

// atRest stops the sampler and adds its sums and a last look, at rest,
// to f.
func (s *statics) atRest(ctx context.Context, f *Findings) error {
	if s == nil {
		return nil
	}
	s.stopSampling()
	<-s.sampled
	s.stopSampling = nil
	claims, nodes, pods, dump, err := s.look(ctx)
	if err != nil {
		return err
	}
	cf := agentsim.CheckClaims(claims, nodes, pods, dump, s.held, true)
	pf := agentsim.CheckPublicIPs(claims, nodes, dump, clusterName, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims.Add(cf)
	f.Claims = s.claims
	f.Claims.Claims, f.Claims.Bound = cf.Claims, cf.Bound
	f.PublicIPs = pf
	f.PublicIPs.OnOrdinaryAddress += s.public.OnOrdinaryAddress
	f.PublicIPs.OnOtherPod += s.public.OnOtherPod
	f.PublicIPs.TwicePerClaim += s.public.TwicePerClaim
	f.StaticStalls = len(s.stalls)
	want := 0
	for _, set := range s.sets {
		want += set.replicas
	}
	if cf.Claims != want {
		f.StaticStalls++
		f.detail("static: %d claims at rest, %d pods asked for", cf.Claims, want)
	}
	for _, d := range append(append(append([]string{}, s.stalls...), s.claims.Details...), append(s.public.Details, pf.Details...)...) {
		f.detail("static: %s", d)
	}
	return nil
}

// figures adds the static workload's figures to the report.
func (s *statics) figures(rep *Report) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := rep.Findings
	rep.add("static-IP StatefulSets; pods at the peak; moves (begun at a kill); claims deleted", "%d; %d; %d (%d); %d",
		len(s.sets), len(s.sets)*s.w.opts.StaticReplicas, s.moves, s.killMoves, s.deleted)
	rep.add("static invariants: looks during the run; claims Bound at rest; Elastic IPs where they belong", "%d; %d of %d; %d",
		s.looks, f.Claims.Bound, f.Claims.Claims, f.PublicIPs.Associated)
}
