package demo

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/test/cluster"
)

// demoBin is the demo command built from this repository; binDir holds
// the binaries it builds, shared by the tests so only the first links them.
var demoBin, binDir string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	// Orphans of the demo (a process it failed to stop) are re-parented
	// to this process instead of init, where noLeftovers finds them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "enipam-demo-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	demoBin, binDir = filepath.Join(dir, "enipam-demo"), filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", demoBin, "./cmd/enipam-demo").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the demo: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// demoCommand returns the demo as `make demo` runs it, from the
// repository's root, with its own output directory.
func demoCommand(t *testing.T, ctx context.Context, out string, env ...string) *exec.Cmd {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, demoBin, "--out", out, "--bin-dir", binDir, "--wait", "2m")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// TestDemoOncePrintsFilledPools: `DEMO_ONCE=1 make demo`. The demo exits 0
// after printing kubectl's view of the three nodes and of the ENIPolicies
// (pods Accepted for 2 nodes, dual-stack for the t3.medium), a summary
// where every pool holds the pre-allocation free beside its pods' IPs, all
// from the pod subnets, the dual-stack node's IPv6 window (the /80 on its
// primary ENI in ec2sim's state) and its pods, each with one IPv4 address
// and one IPv6 address of that /80, the
// StatefulSet pod's address before and after its reschedule (the same,
// on another node, on that node's ENI only, out of the old pool), its
// public IP (the same Elastic IP, mapped to the address on the new ENI),
// the invariants, and the KUBECONFIG line; no process it started is left
// behind.
func TestDemoOncePrintsFilledPools(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	printed, err := demoCommand(t, ctx, out, "DEMO_ONCE=1").CombinedOutput()
	t.Logf("the demo ran %s", formatDuration(time.Since(start)))
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, printed)
	}
	noLeftovers(t)
	text := string(printed)

	nodes := kubectlSection(t, text, "$ kubectl get ciliumnodes")
	if len(nodes) != 4 || !strings.HasPrefix(nodes[0], "NAME ") {
		t.Errorf("kubectl get ciliumnodes printed %q, want a header and 3 nodes", nodes)
	}
	for _, line := range nodes[1:] {
		// NAME CILIUMINTERNALIP INTERNALIP AGE: the router's IP from a pod
		// subnet, the node's from a node subnet.
		if f := strings.Fields(line); len(f) != 4 || !strings.HasPrefix(f[1], "10.0.") || !strings.HasPrefix(f[2], "10.0.") {
			t.Errorf("kubectl get ciliumnodes: %q lacks the node's addresses", line)
		}
	}
	policies := kubectlSection(t, text, "$ kubectl get enipolicies -o wide")
	if len(policies) != 3 || !regexp.MustCompile(`^dual-stack\s+True\s+1\s+4\s`).MatchString(policies[1]) ||
		!regexp.MustCompile(`^pods\s+10\s+True\s+2\s+4\s`).MatchString(policies[2]) {
		t.Errorf("kubectl get enipolicies printed %q, want dual-stack Accepted for 1 node and pods (priority 10) for 2, both with pre-allocate 4", policies)
	}
	checkDualStack(t, text)

	rows := summaryRows(t, text)
	types := map[string]bool{}
	for _, r := range rows {
		types[r.instanceType] = true
		if r.free < preAllocate || r.pool != r.used+r.free || r.used != r.pods+2 || r.pods == 0 {
			t.Errorf("%s: pool %d, used %d, free %d, pods %d; want %d free beside the pods, router and health",
				r.node, r.pool, r.used, r.free, r.pods, preAllocate)
		}
		if r.enis < 2 || !strings.HasPrefix(r.from, "demo-pods-") {
			t.Errorf("%s: %d ENIs, pool IPs from %q; want a secondary ENI in a pod subnet", r.node, r.enis, r.from)
		}
	}
	if len(rows) != 3 || len(types) != 3 {
		t.Errorf("summary has %d rows of %d instance types, want 3 of 3", len(rows), len(types))
	}
	for _, want := range []string{
		"pool IPs are on secondary ENIs in the subnets tagged enipam.io/pods=true",
		"export KUBECONFIG=" + filepath.Join(out, "kubeconfig"),
		"Invariants: 0 IPs in two pools, 0 on two ENIs, 0 free pool IPs off their ENI in EC2, 0 released IPs in a pool; 0 ledger violations",
		"IPv4 pool IPs are on secondary ENIs",
		"==> stopping kube-scheduler, kube-controller-manager, enipam-operator, ec2sim, the agents, kube-apiserver and etcd ...",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo did not print %q", want)
		}
	}
	// The StatefulSet's pod: the same address before and after, on
	// another node, on one ENI, out of the old pool.
	moved := regexp.MustCompile(`before: pod default/db-0 on (\S+) with (\S+) \(on (\S+)\)\n.*after:  pod default/db-0 on (\S+) with (\S+) \(on (\S+)\)`).FindStringSubmatch(text)
	if moved == nil || moved[2] != moved[5] || moved[1] == moved[4] || moved[3] == moved[6] {
		t.Errorf("the demo did not print the StatefulSet pod's address kept across nodes: %q", moved)
	}
	if !regexp.MustCompile(`EC2 has \S+ on eni-\w+; \S+'s pool lists it: false`).MatchString(text) {
		t.Errorf("the demo did not print the address on one ENI and out of the old pool")
	}
	// Its public IP: the same Elastic IP, mapped by EC2 to the address on
	// the new ENI.
	public := regexp.MustCompile(`public IP (\d+\.\d+\.\d+\.\d+) \((eipalloc-\w+)\): mapped to (\S+) on (eni-\w+) before, on (eni-\w+) after; EC2 maps it to (\S+) on (eni-\w+)`).FindStringSubmatch(text)
	if public == nil || moved == nil || public[3] != moved[2] || public[4] == public[5] || public[6] != moved[5] || public[7] != public[5] || public[5] != moved[6] {
		t.Errorf("the demo did not print the pod's public IP kept across nodes: %q", public)
	}
	if !strings.Contains(text, "Public IPs: 0 Elastic IPs on an unstamped pool address, 0 on another pod's address, 0 claims with two, 0 Bound claims without theirs, 0 leaked; 1 associated where they belong.") {
		t.Errorf("the demo did not print the public IPs' invariants")
	}
	if t.Failed() {
		t.Logf("the demo printed:\n%s", text)
	}
}

// checkDualStack checks the dual-stack node's part of the printout: its
// IPv6 window holds the pre-allocation free beside its 3 pods, router and
// health; EC2 shows one /80 on its primary ENI; each pod holds one IPv4
// address of a pod subnet and one IPv6 address of that /80, none twice;
// and both invariant lines counted IPv6 pool addresses, with no breach.
func checkDualStack(t *testing.T, text string) {
	t.Helper()
	window := regexp.MustCompile(`(?m)^Dual-stack node (\S+) \(t3\.medium, label enipam\.io/dual-stack=true, ENIPolicy dual-stack with ipFamilies IPv4, IPv6\):\n` +
		`\s+IPv6 window: (\d+) addresses in spec\.ipam\.pool, (\d+) used, (\d+) free; EC2 has (\S+) on (eni-\w+) \(its primary ENI\)\n`).FindStringSubmatchIndex(text)
	if window == nil {
		t.Error("the demo printed no dual-stack node with its IPv6 window")
		return
	}
	group := func(i int) string { return text[window[2*i]:window[2*i+1]] }
	pool, _ := strconv.Atoi(group(2))
	used, _ := strconv.Atoi(group(3))
	free, _ := strconv.Atoi(group(4))
	if used != 3+2 || free < preAllocate || pool < used+free {
		t.Errorf("dual-stack node %s: IPv6 pool %d, used %d, free %d; want %d free beside 3 pods, router and health", group(1), pool, used, free, preAllocate)
	}
	prefix, err := netip.ParsePrefix(group(5))
	if err != nil || prefix.Bits() != 80 || !prefix.Addr().Is6() {
		t.Errorf("dual-stack node %s: EC2 shows %q on its primary ENI, want one IPv6 /80", group(1), group(5))
	}
	pods := regexp.MustCompile(`^    pod (\S+): IPv4 (\S+), IPv6 (\S+)$`)
	seen := map[string]bool{}
	count := 0
	for _, line := range strings.Split(text[window[1]:], "\n") {
		m := pods.FindStringSubmatch(line)
		if m == nil {
			break
		}
		count++
		v4, err4 := netip.ParseAddr(m[2])
		v6, err6 := netip.ParseAddr(m[3])
		if err4 != nil || !v4.Is4() || !strings.HasPrefix(m[2], "10.0.128.") {
			t.Errorf("pod %s: IPv4 %q, want one address of demo-pods-b 10.0.128.0/18", m[1], m[2])
		}
		if err6 != nil || !prefix.Contains(v6) {
			t.Errorf("pod %s: IPv6 %q, want one address of %s", m[1], m[3], prefix)
		}
		if seen[m[2]] || seen[m[3]] {
			t.Errorf("pod %s: %s or %s is another pod's too", m[1], m[2], m[3])
		}
		seen[m[2]], seen[m[3]] = true, true
	}
	if count != 3 {
		t.Errorf("the demo printed %d dual-stack pods, want the t3.medium's 3", count)
	}
	checked := regexp.MustCompile(`Invariants: 0 IPs in two pools, 0 on two ENIs, 0 free pool IPs off their ENI in EC2, 0 released IPs in a pool; 0 ledger violations .* both families: (\d+) IPv4 and (\d+) IPv6 pool addresses checked\.`).FindAllStringSubmatch(text, -1)
	if len(checked) != 2 {
		t.Errorf("the demo printed %d invariant lines of both families with no breach, want 2", len(checked))
	}
	for _, m := range checked {
		if n4, _ := strconv.Atoi(m[1]); n4 == 0 {
			t.Errorf("invariants checked no IPv4 pool address: %q", m[0])
		}
		if n6, _ := strconv.Atoi(m[2]); n6 < used+free {
			t.Errorf("invariants checked %s IPv6 pool addresses, want the dual-stack node's %d at least: %q", m[2], used+free, m[0])
		}
	}
}

// TestDemoStopsOnCtrlC: `make demo`, then Ctrl-C once it says it runs.
// It stops everything in order, exits 0 and leaves no process behind.
func TestDemoStopsOnCtrlC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := demoCommand(t, ctx, t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	running := false
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		printed.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "Running; Ctrl-C stops everything.") {
			running = true
			// A terminal's Ctrl-C reaches the demo's process group; the
			// processes it started sit in groups of their own.
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if !running || err != nil {
		t.Fatalf("demo (interrupted: %v): %v\n%s%s", running, err, printed.String(), stderr.String())
	}
	if !strings.Contains(printed.String(), "==> stopping kube-scheduler, kube-controller-manager, enipam-operator, ec2sim, the agents, kube-apiserver and etcd ...") {
		t.Errorf("no stopping line in:\n%s", printed.String())
	}
	noLeftovers(t)
}

// kubectlSection returns the lines printed after the line title, up to
// the next empty line.
func kubectlSection(t *testing.T, text, title string) []string {
	t.Helper()
	_, after, ok := strings.Cut(text, title+"\n")
	if !ok {
		t.Errorf("the demo did not print %q", title)
		return nil
	}
	section, _, _ := strings.Cut(after, "\n\n")
	return strings.Split(section, "\n")
}

// summaryRow is one node of the printed summary.
type summaryRow struct {
	node, instanceType           string
	enis, pool, used, free, pods int
	from                         string
}

// summaryRows parses the summary table under its header.
func summaryRows(t *testing.T, text string) []summaryRow {
	t.Helper()
	header := regexp.MustCompile(`(?m)^NODE\s+INSTANCE TYPE\s+ZONE\s+ENIS\s+POOL\s+USED\s+FREE\s+PODS\s+POOL IPS FROM\n`)
	loc := header.FindStringIndex(text)
	if loc == nil {
		t.Error("the demo printed no summary")
		return nil
	}
	var rows []summaryRow
	for _, line := range strings.Split(text[loc[1]:], "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "ip-") {
			break
		}
		n := make([]int, 5)
		for i := range n {
			v, err := strconv.Atoi(f[3+i])
			if err != nil {
				t.Fatalf("summary row %q: %v", line, err)
			}
			n[i] = v
		}
		rows = append(rows, summaryRow{node: f[0], instanceType: f[1], enis: n[0], pool: n[1], used: n[2], free: n[3], pods: n[4], from: f[8]})
	}
	return rows
}

// noLeftovers fails the test if a process the demo started outlived it:
// such orphans are re-parented to this process (a child subreaper). They
// are killed and reaped so the next test starts clean.
func noLeftovers(t *testing.T) {
	t.Helper()
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces): state, ppid.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		t.Errorf("process %d (state %s) left behind: %s", pid, fields[0], bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}
}
