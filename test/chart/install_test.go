package chart

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestHelmInstallAndUninstall: what a user runs, against the real
// apiserver: `helm install` with clusterName and the default ENIPolicy
// succeeds (enipam's CRDs already exist, as on an upgrade path), creates
// the operator and the policy, and prints NOTES that tell how to inspect
// CiliumNodes, ENIPolicies, events and metrics; `helm uninstall` removes
// what it created. The uninstall hook is off here (no kubelet runs its
// Job); TestHelmUninstallRemovesEveryNodesRouting plays it.
func TestHelmInstallAndUninstall(t *testing.T) {
	_, chartDir := paths(t)
	kc := kubeconfigFile(t)
	const ns = "enipam-helm"
	out, err := helm(t, "install", "enipam", chartDir, "--kubeconfig", kc, "--namespace", ns, "--create-namespace",
		"--set", "clusterName=helm-test", "--set", "fullnameOverride=helm", "--set", "defaultPolicy.enabled=true", "--set", "defaultPolicy.name=helm-default",
		"--set", "agent.uninstallCleanup.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl get ciliumnodes", "kubectl get enipolicies", "kubectl get events -n default", "/metrics", "svc/helm-operator-metrics", "operator.serviceAccount.annotations is empty"} {
		if !strings.Contains(out, want) {
			t.Errorf("NOTES lack %q:\n%s", want, out)
		}
	}
	var d appsv1.Deployment
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: "helm-operator"}, &d); err != nil {
		t.Errorf("operator Deployment after install: %v", err)
	}
	var p enipamv1alpha1.ENIPolicy
	if err := env.Client.Get(bg, client.ObjectKey{Name: "helm-default"}, &p); err != nil {
		t.Errorf("default ENIPolicy after install: %v", err)
	}

	if _, err := helm(t, "uninstall", "enipam", "--kubeconfig", kc, "--namespace", ns); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(bg, client.ObjectKey{Name: "helm-default"}, &p); !apierrors.IsNotFound(err) {
		t.Errorf("default ENIPolicy after uninstall: %v, want gone", err)
	}
}

// TestNoHooksLeavesNothingBehind: `helm install --no-hooks` creates none
// of the hooks' objects (they are all hooks: the ServiceAccounts,
// ClusterRoles, bindings and Jobs of the resume and uninstall hooks), and
// `helm uninstall --no-hooks` then leaves no object of the release in the
// cluster: no ServiceAccount, Job, ClusterRole or ClusterRoleBinding
// carrying its instance label.
func TestNoHooksLeavesNothingBehind(t *testing.T) {
	_, chartDir := paths(t)
	kc := kubeconfigFile(t)
	const ns, release = "enipam-nohooks", "nohooks"
	t.Cleanup(func() { _, _ = helm(t, "uninstall", release, "--kubeconfig", kc, "--namespace", ns, "--no-hooks") })
	if _, err := helm(t, "install", release, chartDir, "--kubeconfig", kc, "--namespace", ns, "--create-namespace", "--no-hooks",
		"--set", "clusterName=nohooks-test", "--set", "fullnameOverride=nohooks"); err != nil {
		t.Fatal(err)
	}
	mine := client.MatchingLabels{"app.kubernetes.io/instance": release}
	leftovers := func() []string {
		var out []string
		var sas corev1.ServiceAccountList
		var jobs batchv1.JobList
		var crs rbacv1.ClusterRoleList
		var crbs rbacv1.ClusterRoleBindingList
		for _, l := range []client.ObjectList{&sas, &jobs, &crs, &crbs} {
			if err := env.Client.List(bg, l, mine); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range sas.Items {
			out = append(out, "ServiceAccount/"+o.Name)
		}
		for _, o := range jobs.Items {
			out = append(out, "Job/"+o.Name)
		}
		for _, o := range crs.Items {
			out = append(out, "ClusterRole/"+o.Name)
		}
		for _, o := range crbs.Items {
			out = append(out, "ClusterRoleBinding/"+o.Name)
		}
		return out
	}
	installed := leftovers()
	if !slices.Contains(installed, "ClusterRole/nohooks-operator") || !slices.Contains(installed, "ServiceAccount/nohooks-agent") {
		t.Fatalf("after helm install --no-hooks: %v, want the release's own RBAC (the test does not discriminate)", installed)
	}
	for _, o := range installed {
		if strings.Contains(o, "-resume") || strings.Contains(o, "-uninstall") || strings.HasPrefix(o, "Job/") {
			t.Errorf("helm install --no-hooks created the hook object %s", o)
		}
	}
	if _, err := helm(t, "uninstall", release, "--kubeconfig", kc, "--namespace", ns, "--no-hooks"); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(); len(left) != 0 {
		t.Errorf("after helm uninstall --no-hooks: %v left, want nothing of the release", left)
	}
}
