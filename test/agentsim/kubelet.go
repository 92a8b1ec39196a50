package agentsim

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeletOptions tune the simulated kubelets.
type KubeletOptions struct {
	// CNIDelay is how long after a kubelet sees a pod bound to its node
	// the pod's CNI ADD reaches the node's agent: the sandbox's creation.
	// Zero: at once.
	CNIDelay time.Duration
}

// Kubelet plays the kubelets of the Sim's nodes for real Pod objects, so
// the real kube-scheduler, kube-controller-manager and enipam-operator see
// pods live as they do in a cluster:
//
//   - a pod bound to a node that has an agent, not host-network, gets its
//     CNI ADD (Agent.AllocateAsync with owner "namespace/name", the owner
//     Cilium's CNI plugin passes) CNIDelay after the kubelet saw it bound,
//     then status.podIP, phase Running and Ready once the agent grants an
//     address;
//   - a pod being deleted gets its CNI DEL (Agent.Release) and is then
//     removed with grace 0, as a kubelet confirms a deletion once its
//     containers stopped; a pod removed outright gets its CNI DEL too.
//
// A host-network pod gets the node's address at once, as a kubelet gives
// it without CNI.
type Kubelet struct {
	sim  *Sim
	opts KubeletOptions
	log  *slog.Logger

	mu    sync.Mutex
	pods  map[types.UID]*kubeletPod
	ipFor []time.Duration // bound (seen) → address granted, per started pod
}

// kubeletPod is what a kubelet tracks of one pod.
type kubeletPod struct {
	namespace, name, node string
	seen                  time.Time
	timer                 *time.Timer
	asked, started        bool
	removed               bool
}

func (p *kubeletPod) owner() string { return p.namespace + "/" + p.name }

// NewKubelet returns kubelets for s's nodes; they act once Start runs.
func NewKubelet(s *Sim, opts KubeletOptions) *Kubelet {
	return &Kubelet{sim: s, opts: opts, log: s.log.With("sim", "kubelet"), pods: map[types.UID]*kubeletPod{}}
}

// Start watches bound pods until ctx ends; it returns once the informer
// synced.
func (k *Kubelet) Start(ctx context.Context) error {
	c := k.sim.client
	selector := fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			list := &corev1.PodList{}
			err := c.List(ctx, list, &client.ListOptions{Raw: &opts, Limit: opts.Limit, Continue: opts.Continue})
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return c.Watch(ctx, &corev1.PodList{}, &client.ListOptions{Raw: &opts})
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.observe(ctx, obj) },
		UpdateFunc: func(_, obj any) { k.observe(ctx, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				k.removed(pod.UID)
			}
		},
	}); err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("pod informer never synced: %w", ctx.Err())
	}
	return nil
}

// BindToIP returns, for every pod that got an address, how long after its
// kubelet saw it bound (CNIDelay included), sorted.
func (k *Kubelet) BindToIP() []time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := slices.Clone(k.ipFor)
	slices.Sort(out)
	return out
}

func (k *Kubelet) observe(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	a := k.sim.Agent(pod.Spec.NodeName)
	if a == nil {
		return
	}
	k.mu.Lock()
	p := k.pods[pod.UID]
	if p == nil {
		if pod.Status.PodIP != "" {
			k.mu.Unlock() // started before this kubelet: not its business
			return
		}
		p = &kubeletPod{namespace: pod.Namespace, name: pod.Name, node: pod.Spec.NodeName, seen: time.Now()}
		k.pods[pod.UID] = p
		if pod.DeletionTimestamp == nil {
			uid := pod.UID
			hostNetwork := pod.Spec.HostNetwork
			p.timer = time.AfterFunc(k.opts.CNIDelay, func() { k.add(ctx, uid, hostNetwork) })
		}
	}
	deleting := pod.DeletionTimestamp != nil && !p.removed
	if deleting {
		p.removed = true
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	k.mu.Unlock()
	if deleting {
		if p.asked {
			a.Release(p.owner())
		}
		k.confirmDeletion(ctx, pod)
	}
}

// add is the CNI ADD of a pod CNIDelay after it was seen bound.
func (k *Kubelet) add(ctx context.Context, uid types.UID, hostNetwork bool) {
	k.mu.Lock()
	p := k.pods[uid]
	if p == nil || p.removed {
		k.mu.Unlock()
		return
	}
	p.asked = !hostNetwork
	k.mu.Unlock()
	if hostNetwork {
		k.started(ctx, uid, "")
		return
	}
	a := k.sim.Agent(p.node)
	if a == nil {
		return
	}
	a.AllocateAsync(p.owner(), func(r Result) {
		k.mu.Lock()
		gone := p.removed
		k.mu.Unlock()
		if gone && r.Err == nil {
			a.Release(p.owner()) // deleted while its ADD was on the way
			return
		}
		if r.Err != nil {
			k.log.Debug("CNI ADD failed", "pod", p.owner(), "node", p.node, "error", r.Err)
			return
		}
		k.started(ctx, uid, r.IP.String())
	})
}

// started writes the pod's status as a kubelet does once its sandbox runs.
func (k *Kubelet) started(ctx context.Context, uid types.UID, ip string) {
	k.mu.Lock()
	p := k.pods[uid]
	if p == nil || p.removed {
		k.mu.Unlock()
		return
	}
	p.started = true
	k.ipFor = append(k.ipFor, time.Since(p.seen))
	k.mu.Unlock()
	go func() {
		pod := &corev1.Pod{}
		if err := k.sim.client.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: p.name}, pod); err != nil || pod.UID != uid {
			return
		}
		now := metav1.Now()
		if ip == "" {
			ip = k.hostIP(ctx, p.node)
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = ip
		pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		pod.Status.StartTime = &now
		pod.Status.Conditions = setPodCondition(pod.Status.Conditions, corev1.PodReady, now)
		pod.Status.Conditions = setPodCondition(pod.Status.Conditions, corev1.ContainersReady, now)
		pod.Status.Conditions = setPodCondition(pod.Status.Conditions, corev1.PodInitialized, now)
		if err := k.sim.client.Status().Update(ctx, pod); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			k.log.Info("writing pod status failed", "pod", p.owner(), "error", err)
		}
	}()
}

// hostIP is the node's InternalIP, if its Node has one.
func (k *Kubelet) hostIP(ctx context.Context, node string) string {
	n := &corev1.Node{}
	if err := k.sim.client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return ""
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// confirmDeletion removes a pod being deleted, as its kubelet does once
// the containers stopped.
func (k *Kubelet) confirmDeletion(ctx context.Context, pod *corev1.Pod) {
	uid := pod.UID
	go func() {
		err := k.sim.client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}},
			client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			k.log.Info("confirming a pod's deletion failed", "pod", pod.Namespace+"/"+pod.Name, "error", err)
		}
	}()
}

// removed is the end of a pod: its CNI DEL if it never got one.
func (k *Kubelet) removed(uid types.UID) {
	k.mu.Lock()
	p := k.pods[uid]
	delete(k.pods, uid)
	if p == nil {
		k.mu.Unlock()
		return
	}
	already := p.removed
	p.removed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	k.mu.Unlock()
	if !already && p.asked {
		if a := k.sim.Agent(p.node); a != nil {
			a.Release(p.owner())
		}
	}
}

func setPodCondition(conds []corev1.PodCondition, t corev1.PodConditionType, now metav1.Time) []corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			if conds[i].Status != corev1.ConditionTrue {
				conds[i].Status, conds[i].LastTransitionTime = corev1.ConditionTrue, now
			}
			return conds
		}
	}
	return append(conds, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
}

// Register makes a simulated node schedulable as its kubelet does once it
// runs: the not-ready taint the apiserver puts on a new Node lifted (no
// node lifecycle controller runs in tests), capacity and allocatable for
// 110 pods, and the Ready condition.
func (k *Kubelet) Register(ctx context.Context, node string) error {
	n := &corev1.Node{}
	if err := k.sim.client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return fmt.Errorf("reading node %s, %w", node, err)
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if err := k.sim.client.Update(ctx, n); err != nil {
		return fmt.Errorf("lifting the not-ready taint of %s, %w", node, err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	n.Status.Capacity, n.Status.Allocatable = room, room
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if err := k.sim.client.Status().Update(ctx, n); err != nil {
		return fmt.Errorf("writing the status of node %s, %w", node, err)
	}
	return nil
}
