package chart

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/uninstall"
)

// TestHelmUninstallRemovesEveryNodesRoutingAndInstallRoutesItAgain:
// `helm uninstall`, then `helm install` again, as a user runs them, with
// the hooks the chart installs by default. No kubelet runs here, so the
// test plays each hook Job's pod: the Job's own arguments, parsed by
// enipam-agent's flags, run the code of that mode under the hook's own
// ServiceAccount; then the test marks the Job complete as the Job
// controller would, and Helm goes on.
//
// `helm install` first runs the resume hook (nothing to withdraw yet). A
// node (a network namespace with the node's own address, default route
// and strict rp_filter) is routed by the real agent core running under the
// chart's agent ServiceAccount with the DaemonSet's arguments. Then
// `helm uninstall`: its pre-delete hook, enipam-agent --uninstall, which
// may list and patch NodeRoutings and list Nodes and nothing else asked
// here (reading Secrets, deleting NodeRoutings, patching Nodes),
// annotates the NodeRouting; the running agent removes its routing and
// reports CleanedUp; Helm deletes the hook's objects and the release, and
// `ip -4 rule`, `ip -4 route show table all`, the connmark table and
// rp_filter on the node are what they were before enipam.
//
// The agent goes with its DaemonSet; the NodeRouting and its annotation
// stay. `helm install` again: its pre-install hook, enipam-agent --resume
// (list and patch NodeRoutings, not even list Nodes), withdraws the
// request from this node, before any agent of the new release exists.
// The new release's agent, on the same node with the same state
// directory, routes the node again without any other step: Ready, the
// NodeRouting Routed without the annotation, the same rules and routes as
// the first time, rp_filter loose again and recorded again (a cleanup
// afterwards still puts back the value from before enipam).
func TestHelmUninstallRemovesEveryNodesRoutingAndInstallRoutesItAgain(t *testing.T) {
	_, chartDir := paths(t)
	kc := kubeconfigFile(t)
	const ns, release, full = "enipam-uninstall", "enipam", "uninst"
	installed := false
	t.Cleanup(func() {
		if installed {
			_, _ = helm(t, "uninstall", release, "--kubeconfig", kc, "--namespace", ns, "--no-hooks")
		}
	})
	install := func() uninstall.ResumeOutcome {
		installed = true
		return helmPlayingResume(t, kc, ns, full, installArgs(release, chartDir, full)...)
	}

	// The node, before enipam.
	node := kerneltest.New(t)
	node.AddENILink(t, "eth0", "02:00:00:00:0f:00")
	node.AddENILink(t, "eth1", "02:00:00:00:0f:01")
	node.LinkUp(t, "eth0")
	node.AddAddr(t, "eth0", "10.0.15.10/24")
	node.AddRoute(t, "0.0.0.0/0", "10.0.15.1", "eth0")
	for _, l := range []string{"eth0", "eth1"} {
		node.SetSysctl(t, "net/ipv4/conf/"+l+"/rp_filter", "1")
	}
	rulesBefore, routesBefore := node.IPDump(t)
	name := createRoutedNode(t, "02:00:00:00:0f:00", "02:00:00:00:0f:01")
	stateDir := t.TempDir() // the hostPath of the DaemonSet's --state-dir: it outlives the agents

	if out := install(); len(out.Resumed) != 0 || len(out.Kept) != 0 {
		t.Errorf("resume on the first install: %+v, want nothing to withdraw", out)
	}
	a, stopAgent := startChartAgent(t, ns, full, name, node, stateDir)
	eventually(t, "the agent routes the node", 30*time.Second, func() bool { return a.Ready() == nil })
	rulesRouted, routesRouted := node.IPDump(t)
	if cmp.Equal(rulesRouted, rulesBefore) {
		t.Fatal("routing added no rule: the test does not discriminate")
	}
	if got := node.Sysctl(t, "net/ipv4/conf/eth1/rp_filter"); got != "2" {
		t.Fatalf("eth1 rp_filter %s once routed, want 2", got)
	}
	ds := daemonSet(t, ns, full)

	// helm uninstall, waiting for its hook.
	helmDone := make(chan error, 1)
	go func() {
		_, err := helm(t, "uninstall", release, "--kubeconfig", kc, "--namespace", ns, "--timeout", "3m")
		helmDone <- err
	}()
	var job batchv1.Job
	eventually(t, "helm creates the hook's Job", 60*time.Second, func() bool {
		return env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: full + "-agent-uninstall"}, &job) == nil
	})
	spec := job.Spec.Template.Spec
	if spec.ServiceAccountName != full+"-agent-uninstall" || spec.RestartPolicy != corev1.RestartPolicyNever || *job.Spec.BackoffLimit != 0 {
		t.Errorf("hook Job: service account %q, restart %q, backoff %d", spec.ServiceAccountName, spec.RestartPolicy, *job.Spec.BackoffLimit)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the hook's pod may run as root; it needs no privilege")
	}
	c := spec.Containers[0]
	if c.Image != ds.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("hook image %s, want the agent's %s", c.Image, ds.Spec.Template.Spec.Containers[0].Image)
	}
	opts := hookOptions(t, &job)
	if !opts.Uninstall || opts.UninstallTimeout != 2*time.Minute {
		t.Fatalf("hook arguments %v: uninstall %v timeout %v", c.Args, opts.Uninstall, opts.UninstallTimeout)
	}

	// The Job's pod: enipam-agent --uninstall under the hook's account.
	hookCfg := asIn(t, ns, full+"-agent-uninstall", authorizationv1.ResourceAttributes{Group: "enipam.io", Resource: "noderoutings", Verb: "patch"})
	hook := asClient(t, hookCfg)
	uo := uninstall.DefaultOptions()
	uo.Timeout, uo.Poll = opts.UninstallTimeout, 100*time.Millisecond
	out, err := uninstall.Run(bg, hook, uo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("enipam-agent --uninstall: %v", err)
	}
	if !slices.Contains(out.Cleaned, name) || len(out.Pending) != 0 {
		t.Errorf("uninstall outcome %+v, want %s cleaned", out, name)
	}
	denied(t, "the hook reads Secrets", hook.List(bg, &corev1.SecretList{}, client.InNamespace(ns)))
	denied(t, "the hook deletes a NodeRouting", hook.Delete(bg, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	denied(t, "the hook patches a Node", hook.Patch(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch("application/merge-patch+json", []byte(`{}`))))
	completeJob(t, &job)

	select {
	case err := <-helmDone:
		if err != nil {
			t.Fatalf("helm uninstall: %v", err)
		}
		installed = false
	case <-time.After(2 * time.Minute):
		t.Fatal("helm uninstall still waiting two minutes after its hook Job completed")
	}
	for _, obj := range []client.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: full + "-agent"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: full + "-agent-uninstall"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: full + "-agent-uninstall"}},
	} {
		if err := env.Client.Get(bg, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after uninstall: %v, want gone", obj, obj.GetName(), err)
		}
	}

	rules, routes := node.IPDump(t)
	if diff := cmp.Diff(rulesBefore, rules); diff != "" {
		t.Errorf("ip -4 rule after helm uninstall differs from before enipam (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(routesBefore, routes); diff != "" {
		t.Errorf("ip -4 route show table all after helm uninstall differs from before enipam (-before +after):\n%s", diff)
	}
	if cm, err := node.Kernel().Connmark(); cm != nil || err != nil {
		t.Errorf("connmark table after helm uninstall: %v, %v", cm, err)
	}
	for _, l := range []string{"eth0", "eth1"} {
		if got := node.Sysctl(t, "net/ipv4/conf/"+l+"/rp_filter"); got != "1" {
			t.Errorf("%s rp_filter %s after helm uninstall, want 1", l, got)
		}
	}
	if c := readyCondition(t, name); c == nil || c.Reason != enipamv1alpha1.ReasonCleanedUp {
		t.Errorf("NodeRouting condition %+v, want CleanedUp", c)
	}

	// The DaemonSet is gone, so is its pod; the NodeRouting keeps its
	// CleanedUp report and the uninstall's request.
	stopAgent()
	if c := readyCondition(t, name); c == nil || c.Reason != enipamv1alpha1.ReasonCleanedUp {
		t.Errorf("NodeRouting condition %+v once the agent stopped, want CleanedUp", c)
	}

	// helm install again, and nothing else.
	if out := install(); !slices.Equal(out.Resumed, []string{name}) || len(out.Kept) != 0 {
		t.Errorf("resume on the second install: %+v, want %s resumed", out, name)
	}
	a, stopAgent = startChartAgent(t, ns, full, name, node, stateDir)
	eventually(t, "the new release's agent routes the node again", 30*time.Second, func() bool {
		c := readyCondition(t, name)
		return a.Ready() == nil && c != nil && c.Reason == enipamv1alpha1.ReasonRouted
	})
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: name}, nr); err != nil {
		t.Fatal(err)
	}
	if v, ok := nr.Annotations[enipamv1alpha1.AnnotationCleanup]; ok {
		t.Errorf("NodeRouting still carries %s=%q after the install", enipamv1alpha1.AnnotationCleanup, v)
	}
	if c := readyCondition(t, name); c.Status != metav1.ConditionTrue || nr.Status.RoutedIPs != 2 {
		t.Errorf("NodeRouting after the install: %+v, %d routed IPs; want Ready and 2", c, nr.Status.RoutedIPs)
	}
	rules, routes = node.IPDump(t)
	if diff := cmp.Diff(rulesRouted, rules); diff != "" {
		t.Errorf("ip -4 rule after the install differs from the first routing (-first +again):\n%s", diff)
	}
	if diff := cmp.Diff(routesRouted, routes); diff != "" {
		t.Errorf("ip -4 route show table all after the install differs from the first routing (-first +again):\n%s", diff)
	}
	if cm, err := node.Kernel().Connmark(); cm == nil || err != nil {
		t.Errorf("connmark table after the install: %v, %v; want it back", cm, err)
	}
	if got := node.Sysctl(t, "net/ipv4/conf/eth1/rp_filter"); got != "2" {
		t.Errorf("eth1 rp_filter %s after the install, want 2 again", got)
	}
	// Recorded again: a cleanup, where no agent runs any more, still
	// knows eth1 had 1 before enipam.
	stopAgent()
	aopts := agentOptions(t, daemonSet(t, ns, full))
	k := kernel.New(node.Handle, node.NS, kernel.WithStateDir(stateDir))
	if _, err := routing.NewConverger(k, aopts.Routing).Cleanup(bg); err != nil {
		t.Fatal(err)
	}
	if got := node.Sysctl(t, "net/ipv4/conf/eth1/rp_filter"); got != "1" {
		t.Errorf("eth1 rp_filter %s after a cleanup of the reinstalled node, want 1: the loosened value was not recorded again", got)
	}
}

// hookOptions parses a hook Job's arguments with enipam-agent's own flags
// and validates them, as the binary would.
func hookOptions(t *testing.T, job *batchv1.Job) *agent.Options {
	t.Helper()
	args := job.Spec.Template.Spec.Containers[0].Args
	opts := agent.NewOptions("")
	fs := flag.NewFlagSet("enipam-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("enipam-agent refuses the hook's arguments %v: %v", args, err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("enipam-agent refuses the hook's settings %v: %v", args, err)
	}
	return opts
}

func daemonSet(t *testing.T, ns, full string) *appsv1.DaemonSet {
	t.Helper()
	var ds appsv1.DaemonSet
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: full + "-agent"}, &ds); err != nil {
		t.Fatal(err)
	}
	return &ds
}

// startChartAgent runs the real agent core for the node as the release's
// DaemonSet runs it (its arguments, under its ServiceAccount), on the
// node's namespace with stateDir as the hostPath of --state-dir. stop
// ends it as the deletion of its pod would; it runs at the end of the
// test too.
func startChartAgent(t *testing.T, ns, full, name string, node *kerneltest.Namespace, stateDir string) (a *agent.Agent, stop func()) {
	t.Helper()
	conf := agentOptions(t, daemonSet(t, ns, full)).Config
	conf.NodeName = name
	// Its identity names its node, as its pod-bound token does: the
	// chart's node restriction admits its reports.
	cfg := onNode(asIn(t, ns, full+"-agent", authorizationv1.ResourceAttributes{Group: "enipam.io", Resource: "noderoutings", Verb: "watch"}), name)
	host := kernel.New(node.Handle, node.NS, kernel.WithStateDir(stateDir))
	a, err := agent.New(conf, cfg, host, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return a, stop
}

func readyCondition(t *testing.T, name string) *metav1.Condition {
	t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: name}, nr); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(nr.Status.Conditions, enipamv1alpha1.ConditionReady)
}

// createRoutedNode writes, as the operator would, a CiliumNode with the
// primary ENI and one secondary ENI carrying two pool addresses, its
// NodeRouting (first interface index 1), and a Node whose kubelet posts
// Ready. It returns the node's name.
func createRoutedNode(t *testing.T, primaryMAC, secondaryMAC string) string {
	t.Helper()
	const name = "ip-10-0-15-10.ec2.internal"
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(bg, cn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, cn) })
	subnet := func(cidr string) awstypes.AwsSubnet {
		return awstypes.AwsSubnet{ID: "subnet-" + cidr, CIDR: iputil.PrefixFrom(netip.MustParsePrefix(cidr))}
	}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{
		"eni-uninst-0": {ID: "eni-uninst-0", Number: 0, MAC: primaryMAC, Subnet: subnet("10.0.15.0/24")},
		"eni-uninst-1": {ID: "eni-uninst-1", Number: 1, MAC: secondaryMAC, Subnet: subnet("10.0.16.0/24")},
	}
	if err := env.Client.Status().Update(bg, cn); err != nil {
		t.Fatal(err)
	}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.16.10": {Resource: "eni-uninst-1"}, "10.0.16.11": {Resource: "eni-uninst-1"}}
	if err := env.Client.Update(bg, cn); err != nil {
		t.Fatal(err)
	}
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: enipamv1alpha1.NodeRoutingSpec{FirstInterfaceIndex: 1}}
	if err := env.Client.Create(bg, nr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, nr) })
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(bg, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, n) })
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if err := env.Client.Status().Update(bg, n); err != nil {
		t.Fatal(err)
	}
	return name
}

// completeJob records the Job as succeeded, as the Job controller would
// once its pod exited 0.
func completeJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-time.Second))
	job.Status.StartTime = &start
	job.Status.CompletionTime = &now
	job.Status.Succeeded = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
	}
	if err := env.Client.Status().Update(context.Background(), job); err != nil {
		t.Fatalf("completing the hook Job: %v", err)
	}
}
