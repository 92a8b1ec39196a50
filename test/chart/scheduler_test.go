package chart

import (
	"flag"
	"io"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/enipam/enipam/scheduler/extender"
	"github.com/enipam/enipam/test/cluster"
)

// kubeSchedulerConfig is the part of KubeSchedulerConfiguration
// (kubescheduler.config.k8s.io/v1) the chart writes. The real
// kube-scheduler reads the whole file in test/schedtest and in the RBAC
// test.
type kubeSchedulerConfig struct {
	APIVersion     string `json:"apiVersion"`
	Kind           string `json:"kind"`
	LeaderElection struct {
		LeaderElect       bool   `json:"leaderElect"`
		ResourceNamespace string `json:"resourceNamespace"`
		ResourceName      string `json:"resourceName"`
	} `json:"leaderElection"`
	Profiles []struct {
		SchedulerName string `json:"schedulerName"`
	} `json:"profiles"`
	Extenders []struct {
		URLPrefix        string `json:"urlPrefix"`
		FilterVerb       string `json:"filterVerb"`
		PrioritizeVerb   string `json:"prioritizeVerb"`
		BindVerb         string `json:"bindVerb"`
		Weight           int64  `json:"weight"`
		NodeCacheCapable bool   `json:"nodeCacheCapable"`
		Ignorable        bool   `json:"ignorable"`
		HTTPTimeout      string `json:"httpTimeout"`
	} `json:"extenders"`
}

// scheduler is the rendered scheduler of one release.
type scheduler struct {
	d         appsv1.Deployment
	cm        corev1.ConfigMap
	cfg       kubeSchedulerConfig
	kube, ext corev1.Container
	opts      *extender.Options
}

// schedulerOf decodes the Deployment and ConfigMap called name, and the
// extender's arguments with its own flag set and validation.
func schedulerOf(t *testing.T, m manifest, name string) *scheduler {
	t.Helper()
	s := &scheduler{}
	m.typed(t, "Deployment", name, &s.d)
	m.typed(t, "ConfigMap", name, &s.cm)
	if err := yaml.UnmarshalStrict([]byte(s.cm.Data["config.yaml"]), &s.cfg); err != nil {
		t.Fatalf("config.yaml holds more or other than expected: %v\n%s", err, s.cm.Data["config.yaml"])
	}
	for _, c := range s.d.Spec.Template.Spec.Containers {
		switch c.Name {
		case "kube-scheduler":
			s.kube = c
		case "extender":
			s.ext = c
		default:
			t.Errorf("unexpected container %s", c.Name)
		}
	}
	s.opts = extender.NewOptions()
	fs := flag.NewFlagSet("enipam-scheduler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s.opts.AddFlags(fs)
	if err := fs.Parse(s.ext.Args); err != nil {
		t.Fatalf("enipam-scheduler refuses the chart's arguments %v: %v", s.ext.Args, err)
	}
	if err := s.opts.Validate(); err != nil {
		t.Fatalf("enipam-scheduler refuses the chart's settings %v: %v", s.ext.Args, err)
	}
	return s
}

func argValue(args []string, name string) string {
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") })
	if i < 0 {
		return ""
	}
	return strings.TrimPrefix(args[i], "--"+name+"=")
}

func port(c corev1.Container, name string) int32 {
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
	if i < 0 {
		return 0
	}
	return c.Ports[i].ContainerPort
}

// TestSchedulerRunsKubeSchedulerBesideItsExtender: by default the chart
// runs enipam-scheduler: two leader-elected replicas of a pod holding the
// upstream kube-scheduler of the cluster's version and the extender. kube-scheduler's
// configuration comes from the ConfigMap mounted where --config points: a
// profile enipam-scheduler, a Lease enipam-scheduler in the release
// namespace, and one extender on the pod's loopback at the address the
// extender listens on, with the verbs it serves (filter, prioritize; no
// bind yet), node names only, weight 5, not ignorable. Probes: HTTPS
// /livez and /readyz on kube-scheduler's secure port; /healthz and
// /readyz on the extender's health port. Both containers are non-root
// with read-only root filesystems and no capability; a change of the
// configuration changes the pods' template, so they roll.
func TestSchedulerRunsKubeSchedulerBesideItsExtender(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=prod-1")
	s := schedulerOf(t, m, "enipam-scheduler")
	spec := s.d.Spec.Template.Spec

	if *s.d.Spec.Replicas != 2 || spec.ServiceAccountName != "enipam-scheduler" || spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("replicas %d serviceAccount %q priority %q", *s.d.Spec.Replicas, spec.ServiceAccountName, spec.PriorityClassName)
	}
	if s.kube.Image != "registry.k8s.io/kube-scheduler:v"+cluster.KubernetesVersion || !slices.Equal(s.kube.Command, []string{"kube-scheduler"}) {
		t.Errorf("kube-scheduler image %s command %v", s.kube.Image, s.kube.Command)
	}
	if s.ext.Image != "ghcr.io/enipam/enipam-scheduler:0.2.0" {
		t.Errorf("extender image %s", s.ext.Image)
	}

	// The configuration file is the ConfigMap's, where --config points.
	cfgPath := argValue(s.kube.Args, "config")
	mount := s.kube.VolumeMounts[slices.IndexFunc(s.kube.VolumeMounts, func(v corev1.VolumeMount) bool { return strings.HasPrefix(cfgPath, v.MountPath+"/") })]
	vol := spec.Volumes[slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })]
	if vol.ConfigMap == nil || vol.ConfigMap.Name != s.cm.Name || path.Base(cfgPath) != "config.yaml" || !mount.ReadOnly {
		t.Errorf("--config=%s is mount %+v of volume %+v", cfgPath, mount, vol)
	}

	c := s.cfg
	if c.APIVersion != "kubescheduler.config.k8s.io/v1" || c.Kind != "KubeSchedulerConfiguration" {
		t.Errorf("config kind %s/%s", c.APIVersion, c.Kind)
	}
	if len(c.Profiles) != 1 || c.Profiles[0].SchedulerName != "enipam-scheduler" {
		t.Errorf("profiles %+v", c.Profiles)
	}
	if le := c.LeaderElection; !le.LeaderElect || le.ResourceNamespace != "kube-system" || le.ResourceName != "enipam-scheduler" {
		t.Errorf("leader election %+v", le)
	}
	if len(c.Extenders) != 1 {
		t.Fatalf("extenders %+v", c.Extenders)
	}
	e := c.Extenders[0]
	if e.URLPrefix != "http://"+s.opts.Address || !strings.HasPrefix(s.opts.Address, "127.0.0.1:") {
		t.Errorf("kube-scheduler calls %s, the extender listens on %s", e.URLPrefix, s.opts.Address)
	}
	if e.FilterVerb != extender.VerbFilter || e.PrioritizeVerb != extender.VerbPrioritize || e.BindVerb != extender.VerbBind ||
		!e.NodeCacheCapable || e.Ignorable || e.Weight != 5 || e.HTTPTimeout != "30s" {
		t.Errorf("extender %+v", e)
	}
	if d, err := time.ParseDuration(e.HTTPTimeout); err != nil || d <= s.opts.SettleTimeout || d <= s.opts.BindTimeout {
		t.Errorf("httpTimeout %s does not leave room for the settle timeout %v or the bind timeout %v", e.HTTPTimeout, s.opts.SettleTimeout, s.opts.BindTimeout)
	}
	defaults := extender.NewOptions()
	if s.opts.Config != defaults.Config || s.opts.Tracker != defaults.Tracker || s.opts.LogLevel != "info" {
		t.Errorf("extender options %+v differ from the binary's defaults %+v", s.opts, defaults)
	}

	// Probes and ports.
	if p := s.kube.LivenessProbe; p == nil || p.HTTPGet.Path != "/livez" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port.String() != "https" {
		t.Errorf("kube-scheduler liveness %+v", p)
	}
	if p := s.kube.ReadinessProbe; p == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("kube-scheduler readiness %+v", p)
	}
	if argValue(s.kube.Args, "secure-port") != itoa(port(s.kube, "https")) {
		t.Errorf("secure port %s, container port %d", argValue(s.kube.Args, "secure-port"), port(s.kube, "https"))
	}
	for path, p := range map[string]*corev1.Probe{"/healthz": s.ext.LivenessProbe, "/readyz": s.ext.ReadinessProbe} {
		if p == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "health" {
			t.Errorf("extender probe %s: %+v", path, p)
		}
	}
	if s.opts.HealthAddress != ":"+itoa(port(s.ext, "health")) || s.opts.MetricsAddress != ":"+itoa(port(s.ext, "metrics")) {
		t.Errorf("extender listens on %s and %s, ports %v", s.opts.HealthAddress, s.opts.MetricsAddress, s.ext.Ports)
	}
	var svc corev1.Service
	m.typed(t, "Service", "enipam-scheduler-metrics", &svc)
	if svc.Spec.Ports[0].TargetPort.String() != "metrics" || svc.Spec.Selector["app.kubernetes.io/component"] != "scheduler" {
		t.Errorf("metrics Service %+v", svc.Spec)
	}

	// Hardening.
	for _, ctr := range []corev1.Container{s.kube, s.ext} {
		sc := ctr.SecurityContext
		if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !*sc.RunAsNonRoot ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("%s security context: %+v", ctr.Name, sc)
		}
		if ctr.Resources.Requests.Memory().IsZero() || ctr.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s resources: %+v", ctr.Name, ctr.Resources)
		}
	}
	if psc := spec.SecurityContext; !*psc.RunAsNonRoot || *psc.RunAsUser == 0 || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context: %+v", psc)
	}

	// A new configuration rolls the pods.
	other := schedulerOf(t, render(t, "enipam", "kube-system", "--set", "clusterName=prod-1", "--set", "scheduler.extender.weight=3"), "enipam-scheduler")
	sum := s.d.Spec.Template.Annotations["checksum/config"]
	if sum == "" || other.d.Spec.Template.Annotations["checksum/config"] == sum {
		t.Errorf("the pod template does not follow the configuration: %q then %q", sum, other.d.Spec.Template.Annotations["checksum/config"])
	}
}

// TestSchedulerValuesReachItsConfigurationAndFlags: every scheduler value
// of ci/full-values.yaml reaches kube-scheduler's configuration or flags,
// or the extender's flags (as its own flag parsing reads them).
func TestSchedulerValuesReachItsConfigurationAndFlags(t *testing.T) {
	m := render(t, "enipam", "kube-system", "-f", ciValues(t, "full-values.yaml"))
	s := schedulerOf(t, m, "enipam-scheduler")
	c, e := s.cfg, s.cfg.Extenders[0]
	if c.Profiles[0].SchedulerName != "vpc-ip-scheduler" || c.LeaderElection.ResourceName != "vpc-ip-scheduler" ||
		e.Weight != 3 || !e.Ignorable || e.HTTPTimeout != "10s" || e.URLPrefix != "http://127.0.0.1:19885" {
		t.Errorf("configuration %+v", c)
	}
	o := s.opts
	if o.Address != "127.0.0.1:19885" || o.HealthAddress != ":19886" || o.MetricsAddress != ":19887" || o.SettleTimeout != 500*time.Millisecond ||
		o.Tracker.HoldTTL != time.Minute || o.Tracker.StartedGrace != time.Minute || o.LogLevel != "debug" {
		t.Errorf("extender options %+v", o)
	}
	if s.kube.Image != "registry.example.com/kube-scheduler:v1.36.4" || s.kube.ImagePullPolicy != corev1.PullAlways ||
		argValue(s.kube.Args, "v") != "4" || argValue(s.kube.Args, "logging-format") != "json" || argValue(s.kube.Args, "secure-port") != "11259" {
		t.Errorf("kube-scheduler %s %s %v", s.kube.Image, s.kube.ImagePullPolicy, s.kube.Args)
	}
	if e, ok := envValue(s.ext, "GOMAXPROCS"); !ok || e.Value != "2" {
		t.Errorf("extender env %+v", s.ext.Env)
	}
	spec := s.d.Spec.Template.Spec
	if *s.d.Spec.Replicas != 3 || spec.ServiceAccountName != "enipam-placement" || spec.NodeSelector["node.kubernetes.io/pool"] != "system" ||
		len(spec.Tolerations) != 1 || len(spec.TopologySpreadConstraints) != 1 || s.d.Spec.Template.Labels["tier"] != "control" ||
		s.d.Spec.Template.Annotations["example.com/owner"] != "platform" {
		t.Errorf("pod spec %+v", spec)
	}
	if sa := m.find("ServiceAccount", "enipam-placement"); sa == nil || sa.GetAnnotations()["example.com/team"] != "platform" {
		t.Errorf("ServiceAccount %v", sa)
	}
	if r := m.find("Role", "enipam-scheduler-leader-election"); r == nil || !strings.Contains(mustJSON(t, r.Object), `"vpc-ip-scheduler"`) {
		t.Errorf("the leader-election Role does not name the Lease vpc-ip-scheduler: %v", r)
	}
}

// TestSchedulerDisabledRendersNoneOfIt: scheduler.enabled=false leaves
// no object of the scheduler behind.
func TestSchedulerDisabledRendersNoneOfIt(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=prod-1", "--set", "scheduler.enabled=false", "--set", "serviceMonitor.enabled=true")
	for _, u := range m {
		if u.GetLabels()["app.kubernetes.io/component"] == "scheduler" || strings.Contains(u.GetName(), "scheduler") {
			t.Errorf("%s/%s rendered with the scheduler disabled", u.GetKind(), u.GetName())
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}
