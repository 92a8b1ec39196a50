package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/schedtest"
	"github.com/enipam/enipam/test/stack"
)

// staticZone is where the demo's StatefulSet runs: the zone with two
// nodes, so its pod can move.
const staticZone = "us-east-1a"

// startScheduling starts what makes a StatefulSet run: kubelets for the
// nodes (simulated, starting the pods bound to them), the real
// kube-scheduler with the chart's configuration and enipam's extender,
// and the real kube-controller-manager.
func (d *world) startScheduling(procCtx context.Context) error {
	k := agentsim.NewKubelet(d.agents, agentsim.KubeletOptions{CNIDelay: 20 * time.Millisecond})
	// Its watch ends before kube-apiserver stops, which waits for open
	// watches otherwise.
	kctx, cancel := context.WithCancel(procCtx)
	d.stopKubelets = cancel
	if err := k.Start(kctx); err != nil {
		return err
	}
	for _, n := range d.nodes {
		if err := k.Register(procCtx, n.name); err != nil {
			return err
		}
	}
	parts, err := schedtest.Render(procCtx, "default")
	if err != nil {
		return err
	}
	kc, err := os.ReadFile(d.kubeconfig)
	if err != nil {
		return err
	}
	dir := filepath.Join(d.logDir, "kube-scheduler")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logs, err := os.Create(filepath.Join(d.logDir, "enipam-scheduler.log"))
	if err != nil {
		return err
	}
	d.schedLog = logs
	if d.sched, err = schedtest.Start(procCtx, parts, schedtest.Options{Kubeconfig: kc, BinDir: d.cluster.BinDir, Dir: dir, Log: logs}); err != nil {
		return err
	}
	d.kcm, err = stack.StartControllerManager(procCtx, d.cluster.BinDir, d.logDir, d.kubeconfig)
	return err
}

// reschedule runs a StatefulSet of one static-IP pod with a public IP in
// staticZone, prints where it runs and with which addresses, cordons its
// node, deletes the pod, and prints where the StatefulSet's new pod runs:
// elsewhere, with the same addresses, on that node's ENI.
func (d *world) reschedule(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.Wait)
	defer cancel()
	c := d.cluster.Client
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					enipamv1alpha1.StaticIPAnnotation: string(enipamv1alpha1.ReclaimRetain),
					enipamv1alpha1.PublicIPAnnotation: "allocate",
				}},
				Spec: corev1.PodSpec{
					SchedulerName: "enipam-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](0),
					NodeSelector: map[string]string{corev1.LabelTopologyZone: staticZone},
					Containers:   []corev1.Container{{Name: "db", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if err := c.Create(ctx, sts); err != nil {
		return fmt.Errorf("creating StatefulSet db, %w", err)
	}
	before, err := d.runningStatic(ctx, "db-0", "")
	if err != nil {
		return err
	}
	d.before = before
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: before.node}, node); err != nil {
		return err
	}
	orig := node.DeepCopy()
	node.Spec.Unschedulable = true
	if err := c.Patch(ctx, node, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("cordoning %s, %w", before.node, err)
	}
	start := time.Now()
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0"}}); err != nil {
		return err
	}
	after, err := d.runningStatic(ctx, "db-0", before.node)
	if err != nil {
		return err
	}
	after.took = time.Since(start)
	d.after = after
	uncordoned := node.DeepCopy()
	uncordoned.Spec.Unschedulable = false
	return c.Patch(ctx, uncordoned, client.MergeFrom(node))
}

// placed is where a static-IP pod runs, and its public IP.
type placed struct {
	node, ip, eni   string
	publicIP, alloc string
	took            time.Duration
}

// runningStatic waits until pod runs with its claim's address on a node
// other than not, its Elastic IP associated with the address on the ENI
// EC2 has it on, and says where.
func (d *world) runningStatic(ctx context.Context, pod, not string) (placed, error) {
	c := d.cluster.Client
	for {
		p := &corev1.Pod{}
		cl := &enipamv1alpha1.StaticIPClaim{}
		if c.Get(ctx, client.ObjectKey{Namespace: "default", Name: pod}, p) == nil &&
			c.Get(ctx, client.ObjectKey{Namespace: "default", Name: pod}, cl) == nil &&
			p.Status.PodIP != "" && p.DeletionTimestamp == nil && p.Spec.NodeName != not &&
			cl.Status.Phase == enipamv1alpha1.ClaimBound && cl.Status.Address == p.Status.PodIP &&
			cl.Status.PublicIP != nil && cl.Status.PublicIP.AssociationID != "" && cl.Status.PublicIP.ENIID == cl.Status.ENIID {
			return placed{node: p.Spec.NodeName, ip: p.Status.PodIP, eni: cl.Status.ENIID, publicIP: cl.Status.PublicIP.PublicIP, alloc: cl.Status.PublicIP.AllocationID}, nil
		}
		select {
		case <-ctx.Done():
			return placed{}, fmt.Errorf("pod %s never ran with its static address: %w", pod, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// describeReschedule prints the pod's address before and after, and
// what EC2 and the old pool say of it.
func (d *world) describeReschedule(ctx context.Context) error {
	b, a := d.before, d.after
	d.p.printf("    before: pod default/db-0 on %s with %s (on %s)\n", b.node, b.ip, b.eni)
	d.p.printf("    after:  pod default/db-0 on %s with %s (on %s), %s after the delete\n", a.node, a.ip, a.eni, formatDuration(a.took))
	old := &ciliumv2.CiliumNode{}
	if err := d.cluster.Client.Get(ctx, client.ObjectKey{Name: b.node}, old); err != nil {
		return err
	}
	_, inOld := old.Spec.IPAM.Pool[b.ip]
	dump, err := d.sim.Admin.Dump(ctx)
	if err != nil {
		return err
	}
	var enis []string
	for _, e := range dump.NetworkInterfaces {
		for _, addr := range e.PrivateIPAddresses {
			if addr.PrivateIPAddress == b.ip {
				enis = append(enis, e.NetworkInterfaceID)
			}
		}
	}
	d.p.printf("    EC2 has %s on %s; %s's pool lists it: %v\n", b.ip, joinList(enis), b.node, inOld)
	if a.ip != b.ip || len(enis) != 1 || enis[0] != a.eni || inOld {
		return fmt.Errorf("the StatefulSet pod did not keep its address: %s before, %s after, on ENIs %v, still in %s's pool: %v", b.ip, a.ip, enis, b.node, inOld)
	}
	var eip ec2sim.Address
	for _, addr := range dump.Addresses {
		if addr.AllocationID == a.alloc {
			eip = addr
		}
	}
	d.p.printf("    public IP %s (%s): mapped to %s on %s before, on %s after; EC2 maps it to %s on %s\n",
		a.publicIP, a.alloc, b.ip, b.eni, a.eni, eip.PrivateIPAddress, eip.NetworkInterfaceID)
	if a.publicIP != b.publicIP || a.alloc != b.alloc || eip.PrivateIPAddress != a.ip || eip.NetworkInterfaceID != a.eni {
		return fmt.Errorf("the StatefulSet pod did not keep its public IP: %s (%s) before, %s (%s) after, EC2 maps it to %s on %s",
			b.publicIP, b.alloc, a.publicIP, a.alloc, eip.PrivateIPAddress, eip.NetworkInterfaceID)
	}
	return d.runKubectl(ctx, "get", "staticipclaims", "-o", "wide")
}
