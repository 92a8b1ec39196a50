package chart

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/operator"
)

// operatorOptions parses the operator container's arguments with the
// operator's own flag set and validates them, as the binary would at start.
func operatorOptions(t *testing.T, d *appsv1.Deployment) operator.Options {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	opts := operator.DefaultOptions()
	fs := flag.NewFlagSet("enipam-operator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("enipam-operator refuses the chart's arguments %v: %v", c.Args, err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("enipam-operator refuses the chart's settings %v: %v", c.Args, err)
	}
	return opts
}

// agentOptions does the same for the agent, with the node name the
// downward API gives.
func agentOptions(t *testing.T, ds *appsv1.DaemonSet) *agent.Options {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	opts := agent.NewOptions("ip-10-0-1-10.ec2.internal")
	fs := flag.NewFlagSet("enipam-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("enipam-agent refuses the chart's arguments %v: %v", c.Args, err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("enipam-agent refuses the chart's settings %v: %v", c.Args, err)
	}
	return opts
}

func envValue(c corev1.Container, name string) (corev1.EnvVar, bool) {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return corev1.EnvVar{}, false
	}
	return c.Env[i], true
}

// TestDefaultsRenderTheWholeInstall: with only clusterName set, the chart
// renders exactly the objects of an install (a ServiceAccount, a
// ClusterRole and binding per binary, the leader-election Roles and
// bindings, the metrics Services, the PDBs, the DaemonSet, the operator's
// Deployment, enipam-scheduler's Deployment, configuration and bindings
// to the built-in scheduler roles, and the Job, ServiceAccount and RBAC
// of the uninstall hook and of the resume hook; no ENIPolicy unless
// asked),
// and the arguments it passes are accepted by the binaries' own flag
// parsing and validation with the documented defaults.
func TestDefaultsRenderTheWholeInstall(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=prod-1")
	want := []string{
		"ClusterRole/enipam-agent", "ClusterRole/enipam-agent-resume", "ClusterRole/enipam-agent-uninstall", "ClusterRole/enipam-operator", "ClusterRole/enipam-scheduler",
		"ClusterRoleBinding/enipam-agent", "ClusterRoleBinding/enipam-agent-resume", "ClusterRoleBinding/enipam-agent-uninstall", "ClusterRoleBinding/enipam-operator", "ClusterRoleBinding/enipam-scheduler",
		"ClusterRoleBinding/enipam-scheduler-kube-scheduler", "ClusterRoleBinding/enipam-scheduler-volume-scheduler",
		"ConfigMap/enipam-scheduler",
		"DaemonSet/enipam-agent", "Deployment/enipam-operator", "Deployment/enipam-scheduler",
		"Job/enipam-agent-resume", "Job/enipam-agent-uninstall",
		"PodDisruptionBudget/enipam-operator", "PodDisruptionBudget/enipam-scheduler",
		"Role/enipam-operator-leader-election", "Role/enipam-scheduler-leader-election",
		"RoleBinding/enipam-operator-leader-election", "RoleBinding/enipam-scheduler-authentication-reader", "RoleBinding/enipam-scheduler-leader-election",
		"Service/enipam-agent-metrics", "Service/enipam-operator-metrics", "Service/enipam-scheduler-metrics",
		"ServiceAccount/enipam-agent", "ServiceAccount/enipam-agent-resume", "ServiceAccount/enipam-agent-uninstall", "ServiceAccount/enipam-operator", "ServiceAccount/enipam-scheduler",
		"ValidatingAdmissionPolicy/enipam-agent-node-restriction", "ValidatingAdmissionPolicyBinding/enipam-agent-node-restriction",
	}
	got := m.names()
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered objects (-want +got):\n%s", diff)
	}
	for _, u := range m {
		if cluster := []string{"ClusterRole", "ClusterRoleBinding", "ENIPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}; !slices.Contains(cluster, u.GetKind()) && u.GetNamespace() != "kube-system" {
			t.Errorf("%s/%s is in namespace %q, want the release's", u.GetKind(), u.GetName(), u.GetNamespace())
		}
	}

	var d appsv1.Deployment
	m.typed(t, "Deployment", "enipam-operator", &d)
	opts := operatorOptions(t, &d)
	defaults := operator.DefaultOptions()
	if opts.ClusterName != "prod-1" || opts.Knobs != defaults.Knobs || opts.ReleaseExcessIPs != defaults.ReleaseExcessIPs ||
		opts.ReleaseDelay != defaults.ReleaseDelay || opts.ResyncInterval != defaults.ResyncInterval ||
		opts.GCInterval != defaults.GCInterval || opts.GCMaxPerPass != defaults.GCMaxPerPass || opts.Workers != defaults.Workers ||
		opts.Headroom != defaults.Headroom || opts.PodDemand != defaults.PodDemand {
		t.Errorf("operator options %+v differ from the binary's defaults %+v", opts, defaults)
	}
	if !opts.LeaderElect || opts.LeaderNamespace != "kube-system" || opts.LeaderElectionID != "enipam-operator" {
		t.Errorf("leader election: elect=%v namespace=%q id=%q", opts.LeaderElect, opts.LeaderNamespace, opts.LeaderElectionID)
	}

	var ds appsv1.DaemonSet
	m.typed(t, "DaemonSet", "enipam-agent", &ds)
	aopts := agentOptions(t, &ds)
	if aopts.ProcSysNet != "/host/proc/sys/net" || aopts.StateDir != "/run/enipam" || aopts.Routing.MTU != 9001 || aopts.Routing.EgressPriority != 111 || aopts.Routing.IngressPriority != 20 ||
		aopts.Routing.Egress != routing.EgressAll || !aopts.Routing.Connmark || aopts.StartupTaintKey != "" {
		t.Errorf("agent options: %+v", aopts)
	}
	var agentRole rbacv1.ClusterRole
	m.typed(t, "ClusterRole", "enipam-agent", &agentRole)
	for _, r := range agentRole.Rules {
		if slices.Contains(r.Resources, "nodes") {
			t.Errorf("the agent may %v nodes without a start-up taint to remove", r.Verbs)
		}
	}

	var pdb policyv1.PodDisruptionBudget
	m.typed(t, "PodDisruptionBudget", "enipam-operator", &pdb)
	if pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "operator" {
		t.Errorf("PDB: %+v", pdb.Spec)
	}
}

// TestOperatorDeploymentIsHardened: two replicas spread over nodes on the
// host network (it must run before pods have IPs), probes on the health
// port (/healthz, /readyz), resources, non-root with a read-only root
// filesystem, no privilege escalation, every capability dropped, the
// runtime's seccomp profile, a critical priority, every taint tolerated,
// and the namespace from the downward API.
func TestOperatorDeploymentIsHardened(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=prod-1")
	var d appsv1.Deployment
	m.typed(t, "Deployment", "enipam-operator", &d)
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if *d.Spec.Replicas != 2 || !spec.HostNetwork || spec.DNSPolicy != corev1.DNSDefault || spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("replicas %d hostNetwork %v dnsPolicy %s priority %q", *d.Spec.Replicas, spec.HostNetwork, spec.DNSPolicy, spec.PriorityClassName)
	}
	aa := spec.Affinity.PodAntiAffinity
	if aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 || aa.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("replicas are not kept on different nodes: %+v", spec.Affinity)
	}
	if d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxSurge.IntValue() != 0 {
		t.Errorf("rolling update may surge a pod onto occupied host ports: %+v", d.Spec.Strategy)
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "health" {
			t.Errorf("probe %s: %+v", name, p)
		}
	}
	health := c.Ports[slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "health" })]
	if opts := operatorOptions(t, &d); opts.HealthAddress != ":"+itoa(health.ContainerPort) {
		t.Errorf("health port %d but the operator listens on %s", health.ContainerPort, opts.HealthAddress)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources: %+v", c.Resources)
	}
	sc := c.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !*sc.RunAsNonRoot ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container security context: %+v", sc)
	}
	psc := spec.SecurityContext
	if !*psc.RunAsNonRoot || *psc.RunAsUser == 0 || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context: %+v", psc)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool { return t.Operator == corev1.TolerationOpExists && t.Key == "" }) {
		t.Errorf("tolerations %+v do not tolerate every taint", spec.Tolerations)
	}
	if e, ok := envValue(c, "POD_NAMESPACE"); !ok || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE: %+v", e)
	}
}

// TestAgentDaemonSetHasOnlyNetAdmin: the agent runs on every node (host
// network, every taint tolerated, system-node-critical), with NET_ADMIN as
// its only capability, no privilege escalation, a read-only root
// filesystem, the runtime's seccomp profile; NODE_NAME comes from the
// downward API; the host's /proc/sys/net is mounted where --proc-sys-net
// points; readiness is the agent's routing readiness (/readyz).
func TestAgentDaemonSetHasOnlyNetAdmin(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=prod-1")
	var ds appsv1.DaemonSet
	m.typed(t, "DaemonSet", "enipam-agent", &ds)
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	if !spec.HostNetwork || spec.PriorityClassName != "system-node-critical" {
		t.Errorf("hostNetwork %v priority %q", spec.HostNetwork, spec.PriorityClassName)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" || spec.Tolerations[0].Effect != "" {
		t.Errorf("tolerations %+v, want one that tolerates every taint", spec.Tolerations)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged != nil && *sc.Privileged || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context: %+v", sc)
	}
	if spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp: %+v", spec.SecurityContext)
	}
	if e, ok := envValue(c, "NODE_NAME"); !ok || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME: %+v", e)
	}
	opts := agentOptions(t, &ds)
	mount := c.VolumeMounts[slices.IndexFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.MountPath == opts.ProcSysNet })]
	vol := spec.Volumes[slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })]
	if mount.ReadOnly || vol.HostPath == nil || vol.HostPath.Path != "/proc/sys/net" {
		t.Errorf("--proc-sys-net=%s is mount %+v of volume %+v, want the host's /proc/sys/net, writable", opts.ProcSysNet, mount, vol)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "health" {
		t.Errorf("readiness probe: %+v", p)
	}
	health := c.Ports[slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "health" })]
	if opts.HealthAddress != ":"+itoa(health.ContainerPort) {
		t.Errorf("health port %d but the agent listens on %s", health.ContainerPort, opts.HealthAddress)
	}
}

// TestRolesListOnlyNamedVerbs: no rendered Role or ClusterRole uses a
// wildcard for verbs, resources or API groups.
func TestRolesListOnlyNamedVerbs(t *testing.T) {
	m := render(t, "enipam", "kube-system", "-f", ciValues(t, "full-values.yaml"))
	for _, kind := range []string{"Role", "ClusterRole"} {
		for _, u := range m.ofKind(kind) {
			var role rbacv1.ClusterRole // a Role's rules decode the same
			u = u.DeepCopy()
			u.SetKind("ClusterRole")
			if err := fromUnstructured(u, &role); err != nil {
				t.Fatal(err)
			}
			for _, r := range role.Rules {
				if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
					t.Errorf("%s/%s has a wildcard rule: %+v", kind, u.GetName(), r)
				}
			}
		}
	}
}

// TestEdgeValuesChangeWhatRenders: each value that changes the structure
// of the install, one at a time, against what a user would check in the
// rendered manifest.
func TestEdgeValuesChangeWhatRenders(t *testing.T) {
	base := []string{"--set", "clusterName=prod-1"}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, m manifest)
	}{
		{"agent disabled leaves only the operator", []string{"--set", "agent.enabled=false", "--set", "serviceMonitor.enabled=true"}, func(t *testing.T, m manifest) {
			for _, n := range m.names() {
				if strings.Contains(n, "agent") {
					t.Errorf("%s rendered with the agent disabled", n)
				}
			}
			if m.find("Deployment", "enipam-operator") == nil || m.find("ServiceMonitor", "enipam-operator") == nil {
				t.Errorf("operator objects missing: %v", m.names())
			}
		}},
		{"the pod watch off takes pods' list and watch out of the operator's role", []string{"--set", "operator.podDemand=false"}, func(t *testing.T, m manifest) {
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			if o := operatorOptions(t, &d); o.PodDemand {
				t.Error("the operator still watches pods")
			}
			var role rbacv1.ClusterRole
			m.typed(t, "ClusterRole", "enipam-operator", &role)
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "pods") && (slices.Contains(r.Verbs, "list") || slices.Contains(r.Verbs, "watch")) {
					t.Errorf("the operator may %v pods without the pod watch", r.Verbs)
				}
			}
		}},
		{"default policy enabled with nothing else", []string{"--set", "defaultPolicy.enabled=true"}, func(t *testing.T, m manifest) {
			var p enipamv1alpha1.ENIPolicy
			m.typed(t, "ENIPolicy", "default", &p)
			if p.Spec.Priority != 1000 || p.Spec.NodeSelector != nil || p.Spec.PreAllocate != nil || len(p.Spec.SubnetIDs) != 0 {
				t.Errorf("ENIPolicy spec: %+v", p.Spec)
			}
		}},
		{"default policy from values", []string{"-f", ciValues(t, "full-values.yaml")}, func(t *testing.T, m manifest) {
			var p enipamv1alpha1.ENIPolicy
			m.typed(t, "ENIPolicy", "workers", &p)
			s := p.Spec
			if s.Priority != 500 || s.NodeSelector.MatchLabels["node.kubernetes.io/pool"] != "workers" || len(s.NodeSelector.MatchExpressions) != 1 ||
				!slices.Equal(s.SubnetIDs, []enipamv1alpha1.SubnetID{"subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"}) ||
				s.SubnetTags["kubernetes.io/role/pods"] != "1" || !slices.Equal(s.SecurityGroupIDs, []enipamv1alpha1.SecurityGroupID{"sg-0bbbbbbbbbbbbbbb1"}) ||
				s.SecurityGroupTags["purpose"] != "pods" || s.ExcludeInterfaceTags["node.k8s.amazonaws.com/no_manage"] != "true" || s.Tags["cost-center"] != "42" {
				t.Errorf("ENIPolicy spec: %+v", s)
			}
		}},
		{"pool defaults reach the operator's flags", []string{"-f", ciValues(t, "full-values.yaml")}, func(t *testing.T, m manifest) {
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			o := operatorOptions(t, &d)
			if o.Knobs.PreAllocate != 16 || o.Knobs.MinAllocate != 4 || o.Knobs.MaxAllocate != 120 || o.Knobs.MaxAboveWatermark != 8 ||
				o.FirstInterfaceIndex != 1 || !o.PrefixDelegation || o.ReleaseExcessIPs || o.ReleaseDelay != 10*time.Minute ||
				o.Headroom != "Adaptive" || !o.PodDemand {
				t.Errorf("pool options: %+v", o)
			}
			if o.Region != "eu-west-1" || o.EC2Endpoint != "https://ec2.eu-west-1.amazonaws.com" || !slices.Equal([]string(o.VPCIDs), []string{"vpc-0123456789abcdef0"}) ||
				o.ResyncInterval != 2*time.Minute || o.Workers != 50 || o.EC2RateScale != 0.5 || o.EC2MaxAttempts != 5 ||
				o.GCInterval != 10*time.Minute || o.GCMaxPerPass != 10 || o.LeaderElectionID != "enipam-leader" || o.LogLevel != "debug" {
				t.Errorf("operator options: %+v", o)
			}
		}},
		{"agent settings reach the agent's flags", []string{"-f", ciValues(t, "full-values.yaml")}, func(t *testing.T, m manifest) {
			var ds appsv1.DaemonSet
			m.typed(t, "DaemonSet", "enipam-agent", &ds)
			o := agentOptions(t, &ds)
			if o.Routing.MTU != 1500 || o.Routing.EgressPriority != 200 || o.Routing.IngressPriority != 0 || o.ResyncInterval != 30*time.Second ||
				o.LinkWaitTimeout != 5*time.Minute || o.HealthAddress != ":19881" || o.MetricsAddress != ":19882" || o.LogLevel != "warn" ||
				o.Routing.Egress != routing.EgressVPC || o.Routing.Connmark || o.StartupTaintKey != "enipam.io/agent-not-ready" {
				t.Errorf("agent options: %+v", o)
			}
			var role rbacv1.ClusterRole
			m.typed(t, "ClusterRole", "enipam-agent", &role)
			if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Equal(r.Resources, []string{"nodes"}) && slices.Equal(r.Verbs, []string{"patch"})
			}) {
				t.Errorf("with a start-up taint the agent may not patch nodes: %+v", role.Rules)
			}
			if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
				t.Errorf("update strategy: %+v", ds.Spec.UpdateStrategy)
			}
			if got := ds.Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/enipam/enipam-agent:0.1.0-rc.1" {
				t.Errorf("agent image %s", got)
			}
		}},
		{"IRSA annotation and named service accounts", []string{"-f", ciValues(t, "full-values.yaml")}, func(t *testing.T, m manifest) {
			sa := m.find("ServiceAccount", "enipam-controller")
			if sa == nil || sa.GetAnnotations()["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/enipam" {
				t.Fatalf("operator ServiceAccount: %v", sa)
			}
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			var crb rbacv1.ClusterRoleBinding
			m.typed(t, "ClusterRoleBinding", "enipam-operator", &crb)
			if d.Spec.Template.Spec.ServiceAccountName != "enipam-controller" || crb.Subjects[0].Name != "enipam-controller" {
				t.Errorf("deployment uses %q, binding names %+v", d.Spec.Template.Spec.ServiceAccountName, crb.Subjects)
			}
		}},
		{"no uninstall or resume hook when asked", []string{"--set", "agent.uninstallCleanup.enabled=false"}, func(t *testing.T, m manifest) {
			for _, u := range m {
				if u.GetAnnotations()["helm.sh/hook"] != "" {
					t.Errorf("%s/%s is a hook", u.GetKind(), u.GetName())
				}
			}
		}},
		{"existing service accounts are used, not created", []string{"--set", "operator.serviceAccount.create=false", "--set", "operator.serviceAccount.name=mine", "--set", "agent.serviceAccount.create=false", "--set", "agent.serviceAccount.name=theirs",
			"--set", "scheduler.serviceAccount.create=false", "--set", "scheduler.serviceAccount.name=placement"}, func(t *testing.T, m manifest) {
			// The hooks' own ServiceAccounts live only while the hooks
			// run; every other one is the user's.
			for _, sa := range m.ofKind("ServiceAccount") {
				if sa.GetAnnotations()["helm.sh/hook"] == "" {
					t.Errorf("ServiceAccount %s rendered", sa.GetName())
				}
			}
			var ds appsv1.DaemonSet
			m.typed(t, "DaemonSet", "enipam-agent", &ds)
			var crb rbacv1.ClusterRoleBinding
			m.typed(t, "ClusterRoleBinding", "enipam-agent", &crb)
			if ds.Spec.Template.Spec.ServiceAccountName != "theirs" || crb.Subjects[0].Name != "theirs" {
				t.Errorf("agent uses %q, binding %+v", ds.Spec.Template.Spec.ServiceAccountName, crb.Subjects)
			}
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-scheduler", &d)
			for _, b := range m.ofKind("ClusterRoleBinding") {
				if strings.HasPrefix(b.GetName(), "enipam-scheduler") {
					var crb rbacv1.ClusterRoleBinding
					if err := fromUnstructured(b, &crb); err != nil || crb.Subjects[0].Name != "placement" {
						t.Errorf("%s binds %+v", b.GetName(), crb.Subjects)
					}
				}
			}
			if d.Spec.Template.Spec.ServiceAccountName != "placement" {
				t.Errorf("scheduler uses %q", d.Spec.Template.Spec.ServiceAccountName)
			}
		}},
		{"one replica without leader election has no Lease role", []string{"--set", "operator.replicas=1", "--set", "operator.leaderElection.enabled=false"}, func(t *testing.T, m manifest) {
			if m.find("Role", "enipam-operator-leader-election") != nil || m.find("RoleBinding", "enipam-operator-leader-election") != nil {
				t.Errorf("leader-election RBAC rendered: %v", m.names())
			}
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			if o := operatorOptions(t, &d); o.LeaderElect || *d.Spec.Replicas != 1 {
				t.Errorf("leader-elect %v replicas %d", o.LeaderElect, *d.Spec.Replicas)
			}
		}},
		{"no PodDisruptionBudget", []string{"--set", "operator.podDisruptionBudget.enabled=false", "--set", "scheduler.podDisruptionBudget.enabled=false"}, func(t *testing.T, m manifest) {
			if len(m.ofKind("PodDisruptionBudget")) != 0 {
				t.Error("PDB rendered")
			}
		}},
		{"operator off the host network", []string{"--set", "operator.hostNetwork=false"}, func(t *testing.T, m manifest) {
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			spec := d.Spec.Template.Spec
			aa := spec.Affinity.PodAntiAffinity
			if spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirst || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Errorf("hostNetwork %v dnsPolicy %s affinity %+v", spec.HostNetwork, spec.DNSPolicy, aa)
			}
		}},
		{"custom affinity replaces the default", []string{"--set", "operator.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=role", "--set", "operator.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists"}, func(t *testing.T, m manifest) {
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			if a := d.Spec.Template.Spec.Affinity; a.NodeAffinity == nil || a.PodAntiAffinity != nil {
				t.Errorf("affinity: %+v", a)
			}
		}},
		{"image digest wins over tag", []string{"--set", "operator.image.tag=1.2.3", "--set", "operator.image.digest=sha256:" + strings.Repeat("ab", 32)}, func(t *testing.T, m manifest) {
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			if got := d.Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/enipam/enipam-operator@sha256:"+strings.Repeat("ab", 32) {
				t.Errorf("image %s", got)
			}
		}},
		{"apiserver address for every binary", []string{"--set", "k8sServiceHost=api.internal", "--set", "k8sServicePort=6443"}, func(t *testing.T, m manifest) {
			var d, sd appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			m.typed(t, "Deployment", "enipam-scheduler", &sd)
			var ds appsv1.DaemonSet
			m.typed(t, "DaemonSet", "enipam-agent", &ds)
			for _, c := range append([]corev1.Container{d.Spec.Template.Spec.Containers[0], ds.Spec.Template.Spec.Containers[0]}, sd.Spec.Template.Spec.Containers...) {
				h, _ := envValue(c, "KUBERNETES_SERVICE_HOST")
				p, _ := envValue(c, "KUBERNETES_SERVICE_PORT")
				if h.Value != "api.internal" || p.Value != "6443" {
					t.Errorf("%s: host %q port %q", c.Name, h.Value, p.Value)
				}
			}
		}},
		{"ServiceMonitors for every binary", []string{"--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prom"}, func(t *testing.T, m manifest) {
			for _, c := range []string{"operator", "agent", "scheduler"} {
				sm := m.find("ServiceMonitor", "enipam-"+c)
				if sm == nil || sm.GetLabels()["release"] != "prom" {
					t.Fatalf("ServiceMonitor enipam-%s: %v", c, sm)
				}
				sel, _, _ := unstructuredMap(sm, "spec", "selector", "matchLabels")
				svc := m.find("Service", "enipam-"+c+"-metrics")
				var s corev1.Service
				if err := fromUnstructured(svc, &s); err != nil {
					t.Fatal(err)
				}
				for k, v := range sel {
					if s.Labels[k] != v {
						t.Errorf("ServiceMonitor %s selects %s=%v, Service has %q", c, k, v, s.Labels[k])
					}
				}
			}
		}},
		{"names follow fullnameOverride", []string{"--set", "fullnameOverride=ipam"}, func(t *testing.T, m manifest) {
			for _, n := range []string{"Deployment/ipam-operator", "DaemonSet/ipam-agent", "ClusterRole/ipam-operator", "Service/ipam-agent-metrics", "Deployment/ipam-scheduler", "ConfigMap/ipam-scheduler"} {
				if !slices.Contains(m.names(), n) {
					t.Errorf("%s missing: %v", n, m.names())
				}
			}
		}},
		{"the operator's soft memory limit follows its container's", nil, func(t *testing.T, m manifest) {
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			c := d.Spec.Template.Spec.Containers[0]
			e, ok := envValue(c, "MEMORY_LIMIT")
			if !ok || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil {
				t.Fatalf("MEMORY_LIMIT: %+v", e)
			}
			if r := e.ValueFrom.ResourceFieldRef; r.ContainerName != c.Name || r.Resource != "limits.memory" {
				t.Errorf("MEMORY_LIMIT from %+v, want limits.memory of container %s", r, c.Name)
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Error("the operator has no memory limit for MEMORY_LIMIT to follow")
			}
		}},
		{"no memory limit, no soft limit", []string{"--set", "operator.resources.limits=null"}, func(t *testing.T, m manifest) {
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			if e, ok := envValue(d.Spec.Template.Spec.Containers[0], "MEMORY_LIMIT"); ok {
				t.Errorf("MEMORY_LIMIT without a container limit: %+v", e)
			}
		}},
		{"extra arguments and environment", []string{"--set", "agent.extraArgs[0]=--link-wait-backoff=2s", "--set", "operator.extraEnv[0].name=AWS_STS_REGIONAL_ENDPOINTS", "--set", "operator.extraEnv[0].value=regional"}, func(t *testing.T, m manifest) {
			var ds appsv1.DaemonSet
			m.typed(t, "DaemonSet", "enipam-agent", &ds)
			if o := agentOptions(t, &ds); o.LinkWaitBackoff != 2*time.Second {
				t.Errorf("extra agent flag lost: %+v", o)
			}
			var d appsv1.Deployment
			m.typed(t, "Deployment", "enipam-operator", &d)
			if e, ok := envValue(d.Spec.Template.Spec.Containers[0], "AWS_STS_REGIONAL_ENDPOINTS"); !ok || e.Value != "regional" {
				t.Errorf("extra env: %+v", e)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, render(t, "enipam", "kube-system", append(slices.Clone(base), tc.args...)...))
		})
	}
}
