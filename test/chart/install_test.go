package chart

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
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
