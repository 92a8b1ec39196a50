package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enipam/enipam/internal/version"
	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

// runAsBinary, set in the environment, makes the test binary run the
// program itself: how a test runs it inside a network namespace
// (`ip netns exec`), where the in-process run would act on the host.
const runAsBinary = "ENIPAM_AGENT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsBinary) == "1" {
		main()
		return
	}
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

// TestBinaryServesProbesAndMetrics: the composition root, in-process,
// against the real apiserver through a kubeconfig file, for a node whose
// NodeRouting and CiliumNode do not exist (so nothing on this host is ever
// converged). /healthz answers 200, /readyz 503 naming the missing
// NodeRouting, /metrics
// exports the agent's series; cancelling the context stops it cleanly.
func TestBinaryServesProbesAndMetrics(t *testing.T) {
	kubeconfig, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	health, metrics := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", path, "--health-address", health, "--metrics-address", metrics}, "no-such-node", io.Discard, &logs)
	}()

	// answers polls url until it answers code with a body containing want.
	answers := func(url string, code int, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		var last string
		for {
			resp, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = fmt.Sprintf("%d %s", resp.StatusCode, b)
				if resp.StatusCode == code && strings.Contains(string(b), want) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s never answered %d with %q (last: %v %s)\nlogs:\n%s", url, code, want, err, last, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	answers("http://"+health+"/healthz", 200, "ok")
	answers("http://"+health+"/readyz", 503, "NodeRouting no-such-node not found")
	answers("http://"+metrics+"/metrics", 200, "enipam_agent_ready 0")

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run returned %v after cancel", err)
	}
}

// TestBinaryRefusesInvalidFlags: bad settings stop the program before it
// touches anything, with the reason.
func TestBinaryRefusesInvalidFlags(t *testing.T) {
	err := run(context.Background(), []string{"--ingress-rule-priority", "500"}, "node-1", io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ingress rule priority") {
		t.Errorf("run = %v, want the ingress priority refused", err)
	}
}

// TestCleanupRunInANamespace: `enipam-agent --cleanup`, the program
// itself run by `ip netns exec` in a network namespace that an agent (a
// Kernel with the same state directory) has routed: two ENIs, connmark
// on, strict rp_filter loosened. It exits 0 after logging what it
// removed, and `ip -4 rule`, `ip -4 route show table all`, the connmark
// table and every rp_filter are back to what they were before enipam. It
// needs no kubeconfig and no node name.
func TestCleanupRunInANamespace(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to run the program inside a network namespace (ip netns exec); .ci/run installs it")
	}
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth0", "02:00:00:00:0e:00")
	ns.AddENILink(t, "eth1", "02:00:00:00:0e:01")
	ns.LinkUp(t, "eth0")
	ns.AddAddr(t, "eth0", "10.0.1.30/24")
	ns.AddRoute(t, "0.0.0.0/0", "10.0.1.1", "eth0")
	for _, l := range []string{"eth0", "eth1"} {
		ns.SetSysctl(t, "net/ipv4/conf/"+l+"/rp_filter", "1")
	}
	rulesBefore, routesBefore := ns.IPDump(t)
	state := t.TempDir()
	node := routing.Node{PrimaryMAC: mustMAC(t, "02:00:00:00:0e:00"), ENIs: []routing.ENI{{
		ID: "eni-a", MAC: mustMAC(t, "02:00:00:00:0e:01"), Number: 1, Gateway: netip.MustParseAddr("10.0.2.1"),
		IPs: []netip.Addr{netip.MustParseAddr("10.0.2.10"), netip.MustParseAddr("10.0.2.11")},
	}}}
	k := kernel.New(ns.Handle, ns.NS, kernel.WithStateDir(state))
	if _, err := routing.NewConverger(k, routing.DefaultConfig()).Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if rules, _ := ns.IPDump(t); slices.Equal(rules, rulesBefore) {
		t.Fatal("converging added no rule: the test does not discriminate")
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, self, "--cleanup", "--state-dir", state)
	cmd.Env = append(os.Environ(), runAsBinary+"=1", "NODE_NAME=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("enipam-agent --cleanup: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"removed":"5 rules, 2 routes, the connmark table and 2 rp_filter values restored"`) {
		t.Errorf("log does not say what was removed:\n%s", out)
	}
	rules, routes := ns.IPDump(t)
	if !slices.Equal(rules, rulesBefore) || !slices.Equal(routes, routesBefore) {
		t.Errorf("after --cleanup\nrules  %q\nroutes %q\nwant   %q\n       %q", rules, routes, rulesBefore, routesBefore)
	}
	if c, err := ns.Kernel().Connmark(); c != nil || err != nil {
		t.Errorf("connmark table after --cleanup: %v, %v", c, err)
	}
	for _, l := range []string{"eth0", "eth1"} {
		if got := ns.Sysctl(t, "net/ipv4/conf/"+l+"/rp_filter"); got != "1" {
			t.Errorf("%s rp_filter %s after --cleanup, want 1", l, got)
		}
	}
}

// TestCleanupAndUninstallExcludeEachOther: any two one-shot modes at once
// (--cleanup, --uninstall, --resume) are refused before anything is
// touched.
func TestCleanupAndUninstallExcludeEachOther(t *testing.T) {
	for _, args := range [][]string{{"--cleanup", "--uninstall"}, {"--uninstall", "--resume"}, {"--cleanup", "--resume"}} {
		err := run(context.Background(), args, "", io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "exclude each other") {
			t.Errorf("run %v = %v, want the combination refused", args, err)
		}
	}
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// syncBuffer collects the program's logs while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freeAddr returns a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := cluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestVersionFlag: --version prints the version on stdout and returns
// before touching the cluster or the kernel (no kubeconfig here).
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, "", &out, io.Discard); err != nil {
		t.Fatalf("--version: %v", err)
	}
	if want := "enipam-agent " + version.Get() + " "; !strings.HasPrefix(out.String(), want) {
		t.Errorf("--version printed %q, want %q…", out.String(), want)
	}
}
