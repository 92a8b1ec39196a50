package chart

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/uninstall"
)

// TestResumeHookRendersWithTheUninstallHook: the chart withdraws on
// `helm install`, `helm upgrade` and `helm rollback` what its uninstall
// hook asked on `helm uninstall`. The resume hook's ServiceAccount,
// ClusterRole, binding and Job are pre-install, pre-upgrade and
// pre-rollback hooks (before any agent of the release exists), deleted
// before the next creation and on success as the uninstall hook's are,
// RBAC first (weight -10) and the Job after (0); the uninstall hook stays
// pre-delete only, so neither runs in the other's place. The ClusterRole
// allows exactly list and patch on NodeRoutings; the binding names the
// hook's own ServiceAccount, which the Job runs under, as non-root with
// the agent's image and arguments that enipam-agent's own flags parse as
// --resume.
func TestResumeHookRendersWithTheUninstallHook(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=resume", "--set", "agent.logLevel=debug")
	const name = "enipam-agent-resume"
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"} {
		u := m.find(kind, name)
		if u == nil {
			t.Fatalf("%s/%s not rendered", kind, name)
		}
		a := u.GetAnnotations()
		weight := "-10"
		if kind == "Job" {
			weight = "0"
		}
		if a["helm.sh/hook"] != "pre-install,pre-upgrade,pre-rollback" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" || a["helm.sh/hook-weight"] != weight {
			t.Errorf("%s/%s hook annotations %v", kind, name, a)
		}
		if u := m.find(kind, "enipam-agent-uninstall"); u == nil || u.GetAnnotations()["helm.sh/hook"] != "pre-delete" {
			t.Errorf("uninstall hook's %s: %v, want a pre-delete hook only", kind, u)
		}
	}

	var role rbacv1.ClusterRole
	m.typed(t, "ClusterRole", name, &role)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"enipam.io"}, Resources: []string{"noderoutings"}, Verbs: []string{"list", "patch"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("resume hook's rules (-want +got):\n%s", diff)
	}
	var crb rbacv1.ClusterRoleBinding
	m.typed(t, "ClusterRoleBinding", name, &crb)
	if crb.RoleRef.Name != name || len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "ServiceAccount" || crb.Subjects[0].Name != name || crb.Subjects[0].Namespace != "kube-system" {
		t.Errorf("binding %+v to %+v", crb.RoleRef, crb.Subjects)
	}

	var job batchv1.Job
	m.typed(t, "Job", name, &job)
	var ds appsv1.DaemonSet
	m.typed(t, "DaemonSet", "enipam-agent", &ds)
	spec := job.Spec.Template.Spec
	if spec.ServiceAccountName != name || spec.RestartPolicy != "Never" || job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit < 1 {
		t.Errorf("Job: service account %q, restart %q, backoff %v", spec.ServiceAccountName, spec.RestartPolicy, job.Spec.BackoffLimit)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the resume hook's pod may run as root; it needs no privilege")
	}
	c := spec.Containers[0]
	if c.Image != ds.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("resume hook image %s, want the agent's %s", c.Image, ds.Spec.Template.Spec.Containers[0].Image)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("resume container security context %+v", sc)
	}
	opts := agent.NewOptions("")
	fs := flag.NewFlagSet("enipam-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("enipam-agent refuses the resume hook's arguments %v: %v", c.Args, err)
	}
	if err := opts.Validate(); err != nil || !opts.Resume || opts.Uninstall || opts.Cleanup || opts.LogLevel != "debug" {
		t.Errorf("resume hook arguments %v: resume %v uninstall %v cleanup %v log level %q, %v", c.Args, opts.Resume, opts.Uninstall, opts.Cleanup, opts.LogLevel, err)
	}
}

// TestHelmRollbackAfterAnUninstallThatStoppedRoutesTheNodesAgain: an
// uninstall that stopped half-way, then the way back. The node is routed
// by the release's agent; `helm uninstall` runs its hook, which cleans the
// node (CleanedUp), but the Job fails (as when another node's agent never
// reports), so Helm stops: the DaemonSet and its agent stay, and so does
// the annotation, and Helm records the release as `uninstalling`, which
// `helm upgrade` refuses ("has no deployed releases"). `helm rollback
// <release> 1` runs the resume hook (pre-rollback), which withdraws the
// request; the agent, still the same one, routes the node again (Ready,
// Routed, the same rules and routes, rp_filter loose) with no other step.
// The release is deployed again: a `helm upgrade` runs the resume hook
// (pre-upgrade), which finds nothing to withdraw.
func TestHelmRollbackAfterAnUninstallThatStoppedRoutesTheNodesAgain(t *testing.T) {
	_, chartDir := paths(t)
	kc := kubeconfigFile(t)
	const ns, release, full = "enipam-halfway", "enipam", "halfway"
	t.Cleanup(func() {
		_, _ = helm(t, "uninstall", release, "--kubeconfig", kc, "--namespace", ns, "--no-hooks")
		for _, obj := range []client.Object{ // the failed hook's objects, kept by Helm for its logs
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: full + "-agent-uninstall"}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: full + "-agent-uninstall"}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: full + "-agent-uninstall"}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: full + "-agent-uninstall"}},
		} {
			_ = env.Client.Delete(bg, obj)
		}
	})
	node := kerneltest.New(t)
	node.AddENILink(t, "eth0", "02:00:00:00:0f:00")
	node.AddENILink(t, "eth1", "02:00:00:00:0f:01")
	node.LinkUp(t, "eth0")
	node.AddAddr(t, "eth0", "10.0.15.10/24")
	node.AddRoute(t, "0.0.0.0/0", "10.0.15.1", "eth0")
	node.SetSysctl(t, "net/ipv4/conf/eth1/rp_filter", "1")
	name := createRoutedNode(t, "02:00:00:00:0f:00", "02:00:00:00:0f:01")

	helmPlayingResume(t, kc, ns, full, installArgs(release, chartDir, full)...)
	a, _ := startChartAgent(t, ns, full, name, node, t.TempDir())
	eventually(t, "the agent routes the node", 30*time.Second, func() bool { return a.Ready() == nil })
	rulesRouted, routesRouted := node.IPDump(t)

	helmDone := make(chan error, 1)
	go func() {
		_, err := helm(t, "uninstall", release, "--kubeconfig", kc, "--namespace", ns, "--timeout", "3m")
		helmDone <- err
	}()
	var job batchv1.Job
	eventually(t, "helm creates the uninstall hook's Job", 60*time.Second, func() bool {
		return env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: full + "-agent-uninstall"}, &job) == nil
	})
	hook := asClient(t, asIn(t, ns, full+"-agent-uninstall", authorizationv1.ResourceAttributes{Group: "enipam.io", Resource: "noderoutings", Verb: "patch"}))
	uo := uninstall.DefaultOptions()
	uo.Timeout, uo.Poll = time.Minute, 100*time.Millisecond
	if out, err := uninstall.Run(bg, hook, uo, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil || !slices.Contains(out.Cleaned, name) {
		t.Fatalf("enipam-agent --uninstall: %+v, %v; want %s cleaned", out, err, name)
	}
	failJob(t, &job)
	select {
	case err := <-helmDone:
		if err == nil {
			t.Fatal("helm uninstall succeeded although its hook Job failed")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("helm uninstall still waiting two minutes after its hook Job failed")
	}
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: full + "-agent"}, &appsv1.DaemonSet{}); err != nil {
		t.Fatalf("the DaemonSet after the uninstall stopped: %v, want kept", err)
	}
	// What the failed hook leaves: its Job, for the logs, which the Job
	// controller deletes a day after it finished if no later run of the
	// hook does; Helm has deleted the hook's ServiceAccount, ClusterRole
	// and binding (their hook-succeeded policy applies once a later hook
	// of the same event fails), so nothing cluster-wide outlives a
	// `helm uninstall --no-hooks` that gives up.
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(&job), &job); err != nil || job.Spec.TTLSecondsAfterFinished == nil || *job.Spec.TTLSecondsAfterFinished != 86400 {
		t.Errorf("the failed hook's Job: %v, TTL %v; want kept for its logs with a TTL of a day", err, job.Spec.TTLSecondsAfterFinished)
	}
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: full + "-agent-uninstall"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: full + "-agent-uninstall"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: full + "-agent-uninstall"}},
	} {
		if err := env.Client.Get(bg, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("the failed hook's %T: %v, want deleted", obj, err)
		}
	}
	if c := readyCondition(t, name); c == nil || c.Reason != enipamv1alpha1.ReasonCleanedUp || a.Ready() == nil {
		t.Fatalf("after the uninstall stopped: condition %+v, agent ready %v; want CleanedUp, not ready", c, a.Ready())
	}

	if hist, err := helm(t, "history", release, "--kubeconfig", kc, "--namespace", ns, "-o", "json"); err != nil || !strings.Contains(hist, `"status":"uninstalling"`) {
		t.Errorf("helm history after the uninstall stopped: %s, %v; want the release uninstalling", hist, err)
	}
	if _, err := helm(t, "upgrade", release, chartDir, "--kubeconfig", kc, "--namespace", ns, "--set", "clusterName=uninstall-test", "--set", "fullnameOverride="+full); err == nil || !strings.Contains(err.Error(), "has no deployed releases") {
		t.Errorf("helm upgrade after the uninstall stopped: %v, want refused (no deployed release)", err)
	}

	if out := helmPlayingResume(t, kc, ns, full, "rollback", release, "1"); !slices.Equal(out.Resumed, []string{name}) {
		t.Errorf("resume on the rollback: %+v, want %s resumed", out, name)
	}
	eventually(t, "the agent routes the node again", 30*time.Second, func() bool {
		c := readyCondition(t, name)
		return a.Ready() == nil && c != nil && c.Reason == enipamv1alpha1.ReasonRouted
	})
	rules, routes := node.IPDump(t)
	if !cmp.Equal(rulesRouted, rules) || !cmp.Equal(routesRouted, routes) {
		t.Errorf("routing after the rollback differs from before the uninstall:\nrules %s\nroutes %s", cmp.Diff(rulesRouted, rules), cmp.Diff(routesRouted, routes))
	}
	if got := node.Sysctl(t, "net/ipv4/conf/eth1/rp_filter"); got != "2" {
		t.Errorf("eth1 rp_filter %s after the rollback, want 2", got)
	}
	upgrade := append(installArgs(release, chartDir, full), "--reuse-values")
	upgrade[0] = "upgrade"
	if out := helmPlayingResume(t, kc, ns, full, upgrade...); len(out.Resumed) != 0 || len(out.Kept) != 0 {
		t.Errorf("resume on an upgrade of the deployed release: %+v, want nothing to withdraw", out)
	}
	if c := readyCondition(t, name); c == nil || c.Reason != enipamv1alpha1.ReasonRouted {
		t.Errorf("NodeRouting condition after the upgrade: %+v, want Routed", c)
	}
}

// failJob records the Job as failed, as the Job controller would once its
// pod exited non-zero with no retry left.
func failJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-time.Second))
	job.Status.StartTime = &start
	job.Status.Failed = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastProbeTime: now, LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastProbeTime: now, LastTransitionTime: now},
	}
	if err := env.Client.Status().Update(context.Background(), job); err != nil {
		t.Fatalf("failing the hook Job: %v", err)
	}
}

// installArgs are the arguments of `helm install` in these tests.
func installArgs(release, chartDir, full string) []string {
	return []string{"install", release, chartDir, "--create-namespace", "--set", "clusterName=uninstall-test", "--set", "fullnameOverride=" + full}
}

// helmPlayingResume runs `helm <args> --kubeconfig kc --namespace ns`
// (an install, upgrade or rollback of the release whose fullnameOverride
// is full) and plays the pod of its resume hook's Job: checks the Job
// and its arguments, runs enipam-agent --resume's code under the hook's
// ServiceAccount (which may not list Nodes, read Secrets or delete
// NodeRoutings), marks the Job complete, and waits for Helm to finish and
// delete the hook's objects. It returns what the resume did.
func helmPlayingResume(t *testing.T, kc, ns, full string, args ...string) uninstall.ResumeOutcome {
	t.Helper()
	action := args[0]
	helmDone := make(chan error, 1)
	go func() {
		_, err := helm(t, append(args, "--kubeconfig", kc, "--namespace", ns, "--timeout", "3m")...)
		helmDone <- err
	}()
	name := full + "-agent-resume"
	var job batchv1.Job
	eventually(t, "helm creates the resume hook's Job", 60*time.Second, func() bool {
		select {
		case err := <-helmDone:
			t.Fatalf("helm %s returned before its resume hook's Job ran: %v", action, err)
		default:
		}
		return env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: name}, &job) == nil
	})
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: full + "-agent"}, &appsv1.DaemonSet{}); action == "install" && !apierrors.IsNotFound(err) {
		t.Errorf("the agent DaemonSet while the resume hook runs: %v, want not yet created", err)
	}
	if sa := job.Spec.Template.Spec.ServiceAccountName; sa != name {
		t.Errorf("resume Job runs under %q, want %q", sa, name)
	}
	if opts := hookOptions(t, &job); !opts.Resume {
		t.Fatalf("resume Job arguments %v do not select --resume", job.Spec.Template.Spec.Containers[0].Args)
	}
	hook := asClient(t, asIn(t, ns, name, authorizationv1.ResourceAttributes{Group: "enipam.io", Resource: "noderoutings", Verb: "patch"}))
	out, err := uninstall.Resume(bg, hook, uninstall.Requester, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("enipam-agent --resume: %v", err)
	}
	denied(t, "the resume hook lists Nodes", hook.List(bg, &corev1.NodeList{}))
	denied(t, "the resume hook reads Secrets", hook.List(bg, &corev1.SecretList{}, client.InNamespace(ns)))
	denied(t, "the resume hook deletes a NodeRouting", hook.Delete(bg, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "any"}}))
	completeJob(t, &job)
	select {
	case err := <-helmDone:
		if err != nil {
			t.Fatalf("helm %s: %v", action, err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("helm %s still waiting two minutes after its resume hook Job completed", action)
	}
	for _, obj := range []client.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
	} {
		if err := env.Client.Get(bg, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after helm %s: %v, want gone (hook-succeeded)", obj, obj.GetName(), action, err)
		}
	}
	return out
}
