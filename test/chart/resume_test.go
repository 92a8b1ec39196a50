package chart

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/enipam/enipam/nodeagent/agent"
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
