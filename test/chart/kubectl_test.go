package chart

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// table is kubectl's printed table: its header and rows, by column name.
type table struct {
	header []string
	rows   []map[string]string
}

// kubectlTable runs `kubectl get args...` against the test apiserver,
// which prints the table server-side from the CRDs' printer columns, and
// cuts each line at the header's column starts (kubectl aligns every cell
// on its header; a cell may be empty).
func kubectlTable(t *testing.T, kc string, args ...string) table {
	t.Helper()
	out, err := kubectl(kc, append([]string{"get"}, args...)...)
	if err != nil {
		t.Fatalf("kubectl get %v: %v\n%s", args, err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var tb table
	var starts []int
	for i, f := range strings.Fields(lines[0]) {
		from := 0
		if i > 0 {
			from = starts[i-1] + len(tb.header[i-1])
		}
		starts = append(starts, from+strings.Index(lines[0][from:], f))
		tb.header = append(tb.header, f)
	}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, col := range tb.header {
			end := len(line)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(line))
			}
			if starts[i] < end {
				row[col] = strings.TrimSpace(line[starts[i]:end])
			}
		}
		tb.rows = append(tb.rows, row)
	}
	return tb
}

func (tb table) row(t *testing.T, name string) map[string]string {
	t.Helper()
	for _, r := range tb.rows {
		if r["NAME"] == name {
			return r
		}
	}
	t.Fatalf("no row %s in %v", name, tb.rows)
	return nil
}

// TestKubectlGetTellsEachNodesHeadroom: what kubectl shows of enipam's
// objects, through the real apiserver's table printing of the chart's
// CRDs. `kubectl get nrt` has, for every node, the routed ENIs and
// addresses the agent reports and the pool's Free, Used and Max the
// operator writes in spec.capacity; `kubectl get enip` the policies'
// Priority; `kubectl get enipam` lists all three kinds (every CRD is in
// the enipam category).
func TestKubectlGetTellsEachNodesHeadroom(t *testing.T) {
	kc := kubeconfigFile(t)
	nr := &enipamv1alpha1.NodeRouting{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-40-7.ec2.internal"},
		Spec: enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-0kubectl000000001", FirstInterfaceIndex: 1, Capacity: &enipamv1alpha1.NodeCapacity{
			MaxIPs: 42, PoolIPs: 18, UsedIPs: 11, FreeIPs: 7, CanGrow: true,
		}},
	}
	create(t, nr)
	nr.Status.RoutedENIs, nr.Status.RoutedIPs = 2, 18
	meta.SetStatusCondition(&nr.Status.Conditions, metav1.Condition{Type: enipamv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: enipamv1alpha1.ReasonRouted, Message: "routed"})
	if err := env.Client.Status().Update(bg, nr); err != nil {
		t.Fatal(err)
	}
	tb := kubectlTable(t, kc, "nrt")
	if want := "NAME INSTANCE READY ENIS IPS FREE USED MAX AGE"; strings.Join(tb.header, " ") != want {
		t.Errorf("kubectl get nrt header %v, want %s", tb.header, want)
	}
	r := tb.row(t, nr.Name)
	for col, want := range map[string]string{"INSTANCE": "i-0kubectl000000001", "READY": "True", "ENIS": "2", "IPS": "18", "FREE": "7", "USED": "11", "MAX": "42"} {
		if r[col] != want {
			t.Errorf("kubectl get nrt %s: %s %q, want %q (row %v)", nr.Name, col, r[col], want, r)
		}
	}

	p := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "kubectl-columns"}, Spec: enipamv1alpha1.ENIPolicySpec{Priority: 250}}
	create(t, p)
	if r := kubectlTable(t, kc, "enip").row(t, p.Name); r["PRIORITY"] != "250" {
		t.Errorf("kubectl get enip %s: %v, want PRIORITY 250", p.Name, r)
	}

	createNamespace(t, "enipam-kubectl")
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "enipam-kubectl"},
		Spec: enipamv1alpha1.StaticIPClaimSpec{ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
	create(t, claim)
	out, err := kubectl(kc, "get", "enipam", "-A", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get enipam: %v\n%s", err, out)
	}
	for _, want := range []string{"enipolicy.enipam.io/" + p.Name, "noderouting.enipam.io/" + nr.Name, "staticipclaim.enipam.io/" + claim.Name} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("kubectl get enipam -A lacks %s:\n%s", want, out)
		}
	}
}
