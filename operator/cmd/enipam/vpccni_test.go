package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/enipam/enipam/operator/catalog"
)

// TestMaxPodsMatchesVPCCNI: for every type of the AWS VPC CNI's published
// eni-max-pods.txt (testdata/README.md names its commit), enipam max-pods
// states the CNI's figure, ENIs × (IPv4 per ENI − 1) + 2, when asked
// under the CNI's assumptions: every secondary address a pod's, no
// address kept for cilium-agent (--agent-endpoint-ips 0), two pods on the
// host network, no prefix delegation, and the whole figure rather than
// EKS's ceiling (--show-max-allowed). Under enipam's defaults it states 2
// fewer, the router and health addresses cilium-agent takes from the pool.
// The catalog lists every type the file does.
func TestMaxPodsMatchesVPCCNI(t *testing.T) {
	f, err := os.Open("testdata/eni-max-pods.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	compared, multiCard, graviton := 0, 0, 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			t.Fatalf("line %q", line)
		}
		name := fields[0]
		want, err := strconv.Atoi(fields[1])
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		it, ok := catalog.Lookup(name)
		if !ok {
			t.Errorf("%s: listed by the VPC CNI, not in the catalog", name)
			continue
		}
		compared++
		if it.Cards() > 1 {
			multiCard++
		}
		if it.Architecture == "arm64" {
			graviton++
		}
		for _, c := range []struct {
			args []string
			want int
		}{
			{[]string{"--agent-endpoint-ips", "0", "--host-network-pods", "2"}, want},
			{nil, want - 2},
		} {
			args := append([]string{"max-pods", "--instance-type", name, "--show-max-allowed"}, c.args...)
			code, out, errOut := runCLI(t, args...)
			if code != 0 || out != strconv.Itoa(c.want) {
				t.Errorf("enipam %v = %q (exit %d, %s); the VPC CNI's figure makes it %d", args, out, code, errOut, c.want)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The file lists every current type: Graviton and multi-card ones are
	// among them, and none is left out by the comparison.
	if compared < 1300 || multiCard < 30 || graviton < 300 {
		t.Errorf("compared %d types (%d with several network cards, %d Graviton)", compared, multiCard, graviton)
	}
	t.Logf("enipam max-pods agrees with the VPC CNI on %d types (%d with several network cards, %d Graviton)", compared, multiCard, graviton)
}
