package chart

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/test/cluster"
)

// previousChart is the chart as released before this one: charts/enipam
// of version 0.1.0 (commit ca2c2d1, the last before the version was
// bumped), kept whole in testdata so that an upgrade from it is tested
// against every later change of the chart.
const previousChart = "testdata/enipam-0.1.0"

// TestHelmUpgradeFromThePreviousChartKeepsEveryPodRoutedAndPooled: the
// upgrade a user runs, from the previous chart version (its CRDs, its
// release) to this one, with a pod running on a routed node, following the
// README's Upgrading steps: the CRDs first with `kubectl apply
// --server-side` (Helm never upgrades crds/), then `helm upgrade`.
//
// The previous release is installed with its own CRDs; its operator (the
// real one, under the release's ServiceAccount, with the previous
// Deployment's arguments and an EC2 endpoint that does not answer, so it
// can only keep the pool, never fill or release it) holds the Lease; its
// agent (the real core, under the release's agent ServiceAccount, with the
// previous DaemonSet's arguments) routes the node, whose pool has two
// addresses, one used by a pod.
//
// Helm leaves the previous CRDs in place on `helm upgrade`; `kubectl apply
// --server-side --force-conflicts -f crds/` puts this chart's in (kubectl
// get nrt gains its Free, Used and Max columns, kubectl get enipam its
// category), and existing objects keep their fields. `helm upgrade` then runs the resume
// hook (nothing to withdraw) and replaces the Deployment and DaemonSet.
// The pods are replaced as a rolling update does: the new operator starts
// beside the old one and takes the Lease once the old one stops; the old
// agent stops, and the new one, with the new DaemonSet's arguments and the
// same state directory, finds the node routed. At every step the node's
// rules and routes are the ones the previous agent set, the NodeRouting
// stays Routed, and no watch event of the CiliumNode shows its pool
// without one of its addresses.
func TestHelmUpgradeFromThePreviousChartKeepsEveryPodRoutedAndPooled(t *testing.T) {
	_, chartDir := paths(t)
	kc := kubeconfigFile(t)
	const ns, release, full = "enipam-upgrade", "enipam", "upgr"
	t.Cleanup(func() {
		_, _ = helm(t, "uninstall", release, "--kubeconfig", kc, "--namespace", ns, "--no-hooks")
	})
	// The apiserver of these tests starts with this chart's CRDs; the
	// previous release had its own. Whatever happens, the others get
	// this chart's back.
	// kubectl replace: exactly the previous CRDs, as `helm install` of
	// the previous chart created them (an apply would keep the fields of
	// this chart's that the previous CRDs lack).
	if out, err := kubectl(kc, "replace", "-f", filepath.Join(previousChart, "crds")); err != nil {
		t.Fatalf("kubectl replace -f the previous CRDs: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := kubectl(kc, "replace", "-f", filepath.Join(chartDir, "crds")); err != nil {
			t.Errorf("putting this chart's CRDs back: %v\n%s", err, out)
		}
		checkCRDsAre(t, filepath.Join(chartDir, "crds"))
	})
	checkCRDsAre(t, filepath.Join(previousChart, "crds"))

	node := kerneltest.New(t)
	node.AddENILink(t, "eth0", "02:00:00:00:0f:00")
	node.AddENILink(t, "eth1", "02:00:00:00:0f:01")
	node.LinkUp(t, "eth0")
	node.AddAddr(t, "eth0", "10.0.15.10/24")
	node.AddRoute(t, "0.0.0.0/0", "10.0.15.1", "eth0")
	node.SetSysctl(t, "net/ipv4/conf/eth1/rp_filter", "1")
	name := createRoutedNode(t, "02:00:00:00:0f:00", "02:00:00:00:0f:01")
	// A pod runs on the node with the first address, as Cilium records it.
	cn := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: name}, cn); err != nil {
		t.Fatal(err)
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.16.10": {Owner: "default/web-0", Resource: "eni-uninst-1"}}
	if err := env.Client.Status().Update(bg, cn); err != nil {
		t.Fatal(err)
	}
	pooled := slices.Sorted(mapKeys(cn.Spec.IPAM.Pool))
	shrunk := watchPool(t, name, pooled)

	// The previous release, as it ran.
	helmPlayingResume(t, kc, ns, full, installArgs(release, previousChart, full)...)
	if v := chartLabel(t, ns, full); v != "enipam-0.1.0" {
		t.Fatalf("the installed release's chart label %q, want enipam-0.1.0", v)
	}
	stopOldOperator := startChartOperator(t, ns, full)
	stateDir := t.TempDir() // the hostPath of --state-dir, which the next agent finds
	oldAgent, stopOldAgent := startChartAgent(t, ns, full, name, node, stateDir)
	eventually(t, "the previous release's agent routes the node", 30*time.Second, func() bool {
		c := readyCondition(t, name)
		return oldAgent.Ready() == nil && c != nil && c.Reason == enipamv1alpha1.ReasonRouted
	})
	rulesRouted, routesRouted := node.IPDump(t)
	sameRouting := func(when, reason string) {
		t.Helper()
		rules, routes := node.IPDump(t)
		if diff := cmp.Diff(rulesRouted, rules); diff != "" {
			t.Errorf("ip -4 rule %s differs from the previous release's routing (-before +now):\n%s", when, diff)
		}
		if diff := cmp.Diff(routesRouted, routes); diff != "" {
			t.Errorf("ip -4 route show table all %s differs from the previous release's routing (-before +now):\n%s", when, diff)
		}
		if c := readyCondition(t, name); c == nil || c.Reason != reason {
			t.Errorf("NodeRouting condition %s: %+v, want %s", when, c, reason)
		}
	}

	// Step 1: the CRDs. helm upgrade alone would not touch them. The
	// previous ones had no Free, Used or Max column and no category.
	if h := strings.Join(kubectlTable(t, kc, "nrt").header, " "); strings.Contains(h, "FREE") {
		t.Fatalf("kubectl get nrt under the previous CRDs shows %s: the CRDs do not differ, the test does not discriminate", h)
	}
	kubectlApplyCRDs(t, kc, filepath.Join(chartDir, "crds"))
	checkCRDsAre(t, filepath.Join(chartDir, "crds"))
	if tb := kubectlTable(t, kc, "nrt"); !slices.Contains(tb.header, "FREE") || tb.row(t, name)["READY"] != "True" || tb.row(t, name)["IPS"] != "2" {
		t.Errorf("kubectl get nrt under the upgraded CRDs: %v %v, want a Free column and the node routed with 2 IPs", tb.header, tb.rows)
	}
	if out, err := kubectl(kc, "get", "enipam", "-o", "name"); err != nil || !strings.Contains(string(out), "noderouting.enipam.io/"+name) {
		t.Errorf("kubectl get enipam under the upgraded CRDs: %v\n%s", err, out)
	}
	sameRouting("after the CRDs were upgraded", enipamv1alpha1.ReasonRouted)

	// Step 2: helm upgrade, with this chart.
	upgrade := append(installArgs(release, chartDir, full), "--reuse-values")
	upgrade[0] = "upgrade"
	if out := helmPlayingResume(t, kc, ns, full, upgrade...); len(out.Resumed) != 0 || len(out.Kept) != 0 {
		t.Errorf("resume on the upgrade: %+v, want nothing to withdraw", out)
	}
	if v := chartLabel(t, ns, full); v != "enipam-"+chartVersion(t, chartDir) {
		t.Errorf("the upgraded release's chart label %q, want enipam-%s", v, chartVersion(t, chartDir))
	}
	if hist, err := helm(t, "history", release, "--kubeconfig", kc, "--namespace", ns, "-o", "json"); err != nil || !strings.Contains(hist, `"status":"deployed","chart":"enipam-`+chartVersion(t, chartDir)+`"`) {
		t.Errorf("helm history after the upgrade: %s, %v; want revision 2 deployed with this chart", hist, err)
	}
	sameRouting("after helm upgrade, the previous agent still running", enipamv1alpha1.ReasonRouted)

	// The rolling update: operators first (one replica at a time, so a new
	// one runs beside an old one), then the agent.
	stopNewOperator := startChartOperator(t, ns, full)
	stopOldOperator()
	waitLeader(t, ns)
	stopOldAgent()
	sameRouting("between the previous agent's exit and its successor's start", enipamv1alpha1.ReasonAgentStopped)
	newAgent, _ := startChartAgent(t, ns, full, name, node, stateDir)
	eventually(t, "the upgraded release's agent reports the node routed", 30*time.Second, func() bool {
		return newAgent.Ready() == nil
	})
	sameRouting("with the upgraded release's agent", enipamv1alpha1.ReasonRouted)
	if got := node.Sysctl(t, "net/ipv4/conf/eth1/rp_filter"); got != "2" {
		t.Errorf("eth1 rp_filter %s after the upgrade, want 2", got)
	}
	stopNewOperator()

	if err := env.Client.Get(bg, client.ObjectKey{Name: name}, cn); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(mapKeys(cn.Spec.IPAM.Pool)); !slices.Equal(got, pooled) {
		t.Errorf("pool after the upgrade %v, want %v", got, pooled)
	}
	if s := shrunk(); len(s) != 0 {
		t.Errorf("the pool lost addresses during the upgrade: %v", s)
	}
}

// startChartOperator runs the real operator as the release's Deployment
// runs it (its arguments, under its ServiceAccount), with an EC2 endpoint
// that does not answer, until ready. stop ends it as the deletion of its
// pod would (it releases its Lease); it runs at the end of the test too.
func startChartOperator(t *testing.T, ns, full string) (stop func()) {
	t.Helper()
	var d appsv1.Deployment
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: ns, Name: full + "-operator"}, &d); err != nil {
		t.Fatal(err)
	}
	opts := operatorOptions(t, &d)
	opts.EC2Endpoint = "http://" + freeAddr(t)
	opts.EC2MaxAttempts = 1
	opts.MetricsAddress = "0"
	health := freeAddr(t)
	opts.HealthAddress = health
	cfg := asIn(t, ns, full+"-operator", authorizationv1.ResourceAttributes{Group: "cilium.io", Resource: "ciliumnodes", Verb: "list"})
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	op, err := operator.New(opts, cfg, awsCfg, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("operator stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	eventually(t, "the operator ready", 30*time.Second, func() bool { return httpStatus("http://"+health+"/readyz") == 200 })
	waitLeader(t, ns)
	return stop
}

// waitLeader waits until an operator holds the release's Lease.
func waitLeader(t *testing.T, ns string) {
	t.Helper()
	eventually(t, "an operator holds the Lease", 60*time.Second, func() bool {
		var leases coordinationv1.LeaseList
		if env.Client.List(bg, &leases, client.InNamespace(ns)) != nil {
			return false
		}
		return slices.ContainsFunc(leases.Items, func(l coordinationv1.Lease) bool {
			return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
		})
	})
}

// watchPool watches the CiliumNode name from now on and returns a function
// that lists every pool it saw without one of want's addresses.
func watchPool(t *testing.T, name string, want []string) (shrunk func() []string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("an empty pool: the test does not discriminate")
	}
	w, err := newClient(t).Watch(bg, &ciliumv2.CiliumNodeList{}, client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			cn, ok := ev.Object.(*ciliumv2.CiliumNode)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			for _, ip := range want {
				if _, ok := cn.Spec.IPAM.Pool[ip]; !ok {
					mu.Lock()
					seen = append(seen, "resourceVersion "+cn.ResourceVersion+" without "+ip)
					mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// chartLabel is the helm.sh/chart label of the release's agent DaemonSet.
func chartLabel(t *testing.T, ns, full string) string {
	t.Helper()
	return daemonSet(t, ns, full).Labels["helm.sh/chart"]
}

// chartVersion reads version from the Chart.yaml of chartDir.
func chartVersion(t *testing.T, chartDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.Version == "" {
		t.Fatalf("Chart.yaml of %s: version %q, %v", chartDir, c.Version, err)
	}
	return c.Version
}

// kubectl runs bin/k8s/<version>/kubectl against the test apiserver.
func kubectl(kc string, args ...string) ([]byte, error) {
	dir, err := cluster.BinaryDir()
	if err != nil {
		return nil, err
	}
	// Its discovery cache beside the kubeconfig (a test's temporary
	// directory): fresh for every test, never the machine's ~/.kube.
	cmd := exec.Command(filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", kc, "--cache-dir", filepath.Join(filepath.Dir(kc), "kube-cache")}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.Bytes(), err
}

// kubectlApplyCRDs is the README's CRD step of an upgrade:
// `kubectl apply --server-side --force-conflicts -f <chart>/crds/`.
func kubectlApplyCRDs(t *testing.T, kc, dir string) {
	t.Helper()
	if out, err := kubectl(kc, "apply", "--server-side", "--force-conflicts", "-f", dir); err != nil {
		t.Fatalf("kubectl apply --server-side -f %s: %v\n%s", dir, err, out)
	}
}

// checkCRDsAre checks that the apiserver serves the CRDs of dir: the same
// names, categories, versions, schemas and printer columns, established.
func checkCRDsAre(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no CRD in %s", dir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &want); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var got apiextensionsv1.CustomResourceDefinition
		eventually(t, "CRD "+want.Name+" established with the new spec", 30*time.Second, func() bool {
			if env.Client.Get(bg, types.NamespacedName{Name: want.Name}, &got) != nil {
				return false
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return got.Generation == got.Status.ObservedGeneration || got.Status.ObservedGeneration == 0
				}
			}
			return false
		})
		if diff := cmp.Diff(want.Spec.Names.Categories, got.Spec.Names.Categories); diff != "" {
			t.Errorf("%s categories (-%s +apiserver):\n%s", want.Name, dir, diff)
		}
		if len(want.Spec.Versions) != len(got.Spec.Versions) {
			t.Fatalf("%s: %d versions in %s, %d served", want.Name, len(want.Spec.Versions), dir, len(got.Spec.Versions))
		}
		for i, v := range want.Spec.Versions {
			g := got.Spec.Versions[i]
			if diff := cmp.Diff(v.AdditionalPrinterColumns, g.AdditionalPrinterColumns); diff != "" {
				t.Errorf("%s %s printer columns (-%s +apiserver):\n%s", want.Name, v.Name, dir, diff)
			}
			if diff := cmp.Diff(v.Schema, g.Schema); diff != "" {
				t.Errorf("%s %s schema (-%s +apiserver):\n%s", want.Name, v.Name, dir, diff)
			}
		}
	}
}
