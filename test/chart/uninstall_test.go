package chart

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/enipam/enipam/nodeagent/uninstall"
)

// TestHelmUninstallRemovesEveryNodesRouting: `helm uninstall` as a user
// runs it, with the pre-delete hook the chart installs by default. A node
// (a network namespace with the node's own address, default route and
// strict rp_filter) is routed by the real agent core running under the
// chart's agent ServiceAccount with the DaemonSet's arguments. Then
// `helm uninstall` starts: Helm creates the hook's ServiceAccount, RBAC
// and Job and waits for the Job. No kubelet runs here, so the test plays
// the Job's pod: the Job's own arguments, parsed by enipam-agent's flags,
// run enipam-agent --uninstall's code under the hook's ServiceAccount,
// which annotates the NodeRouting; the running agent removes its routing
// and reports CleanedUp; the program returns with the node cleaned. The
// test then marks the Job complete as the Job controller would, Helm
// deletes the hook's objects and the release, and `ip -4 rule`,
// `ip -4 route show table all`, the connmark table and rp_filter on the
// node are what they were before enipam. The hook's ServiceAccount may
// list and patch NodeRoutings and list Nodes, and nothing else asked here
// (reading Secrets, deleting NodeRoutings, patching Nodes).
func TestHelmUninstallRemovesEveryNodesRouting(t *testing.T) {
	_, chartDir := paths(t)
	kubeconfig, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	const ns, release, full = "enipam-uninstall", "enipam", "uninst"
	if _, err := helm(t, "install", release, chartDir, "--kubeconfig", kc, "--namespace", ns, "--create-namespace",
		"--set", "clusterName=uninstall-test", "--set", "fullnameOverride="+full); err != nil {
		t.Fatal(err)
	}
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_, _ = helm(t, "uninstall", release, "--kubeconfig", kc, "--namespace", ns, "--no-hooks")
		}
	})

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

	// The agent, as the DaemonSet runs it.
	var ds appsv1.DaemonSet
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: full + "-agent"}, &ds); err != nil {
		t.Fatal(err)
	}
	aopts := agentOptions(t, &ds)
	conf := aopts.Config
	conf.NodeName = name
	// Its identity names its node, as its pod-bound token does: the
	// chart's node restriction admits its reports.
	agentCfg := onNode(asIn(t, ns, full+"-agent", authorizationv1.ResourceAttributes{Group: "enipam.io", Resource: "noderoutings", Verb: "watch"}), name)
	host := kernel.New(node.Handle, node.NS, kernel.WithStateDir(t.TempDir())) // the hostPath of aopts.StateDir
	a, err := agent.New(conf, agentCfg, host, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAgent := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- a.Start(actx) }()
	t.Cleanup(func() { stopAgent(); <-done })
	eventually(t, "the agent routes the node", 30*time.Second, func() bool { return a.Ready() == nil })
	if rules, _ := node.IPDump(t); cmp.Equal(rules, rulesBefore) {
		t.Fatal("routing added no rule: the test does not discriminate")
	}

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
	opts := agent.NewOptions("")
	fs := flag.NewFlagSet("enipam-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("enipam-agent refuses the hook's arguments %v: %v", c.Args, err)
	}
	if err := opts.Validate(); err != nil || !opts.Uninstall || opts.UninstallTimeout != 2*time.Minute {
		t.Fatalf("hook arguments %v: uninstall %v timeout %v, %v", c.Args, opts.Uninstall, opts.UninstallTimeout, err)
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
		uninstalled = true
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
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: name}, nr); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(nr.Status.Conditions, enipamv1alpha1.ConditionReady); c == nil || c.Reason != enipamv1alpha1.ReasonCleanedUp {
		t.Errorf("NodeRouting condition %+v, want CleanedUp", c)
	}
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
