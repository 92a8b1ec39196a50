package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run found: the invariant counts and the figures that
// say what the run put the operator through.
type Report struct {
	Name   string
	Params string
	Ran    time.Duration
	// Converged: nothing changed for Options.Quiet before the timeout;
	// ConvergedAfter is when that quiet began, from the end of the last
	// phase.
	Converged      bool
	ConvergedAfter time.Duration
	Findings       Findings
	// Figures are name, value pairs in the order they were taken.
	Figures [][2]string
}

// OK reports whether the run converged with no breach.
func (r *Report) OK() bool { return r.Converged && r.Findings.Total() == 0 }

func (r *Report) add(name string, format string, args ...any) {
	r.Figures = append(r.Figures, [2]string{name, fmt.Sprintf(format, args...)})
}

// Print writes the report as tables: the invariants, then the figures,
// then the first breaches found.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n== %s (ran %s)\n%s\n", r.Name, r.Ran.Round(time.Second), r.Params)
	f := r.Findings
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "count\t  invariant\t")
	for _, row := range []struct {
		n    int
		name string
	}{
		{f.IPsInTwoPools, "IPs in two pools"},
		{f.FreeOffENI, "free pool IPs not on their ENI in EC2"},
		{f.UsedOffENI, "used pool IPs not on their ENI in EC2"},
		{f.MissingFromPool, "EC2 addresses of pod ENIs missing from the pool"},
		{f.ReleasedInPool, "released IPs still in a pool"},
		{f.ExtraENIs, "ENIs attached beyond the node's need (duplicates)"},
		{f.LeakedENIs, "unattached ENIs of the cluster (not adopted or collected)"},
		{f.Ledger.DoubleAllocation, "ledger: IPs handed to two pods"},
		{f.Ledger.RemovedWhileUsed, "ledger: IPs removed from a pool while used"},
		{f.Ledger.ReleasedWithoutReady, "ledger: IPs removed without ready-for-release"},
		{f.Ledger.Total() - f.Ledger.DoubleAllocation - f.Ledger.RemovedWhileUsed - f.Ledger.ReleasedWithoutReady, "ledger: other violations"},
		{f.Claims.InTwoPools, "claimed IPs in two pools (every look)"},
		{f.Claims.OnTwoENIs, "claimed IPs on two ENIs in EC2"},
		{f.Claims.Unassigned, "claimed IPs unassigned in EC2 while claimed"},
		{f.Claims.TwoPods, "claimed IPs held by two pods"},
		{f.Claims.OtherPod, "claimed IPs held by a pod other than its claim's"},
		{f.PublicIPs.OnOrdinaryAddress + f.PublicIPs.OnOtherPod, "Elastic IPs on an unstamped pool IP or another pod's"},
		{f.PublicIPs.TwicePerClaim, "claims with two Elastic IPs"},
		{f.PublicIPs.Unassociated + f.PublicIPs.Leaked, "Elastic IPs off their claim's IP at rest, or leaked"},
		{f.Claims.NotBound + f.Claims.WrongAddress, "claims not Bound at rest, or pods without their claim's IP"},
		{f.StaticStalls, "static steps never completed (placements, moves, claim deletions)"},
	} {
		fmt.Fprintf(tw, "%d\t  %s\t\n", row.n, row.name)
	}
	converged := "yes"
	if !r.Converged {
		converged = "NO"
	}
	fmt.Fprintf(tw, "%s\t  converged (after %s)\t\n", converged, r.ConvergedAfter.Round(time.Second))
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, fig := range r.Figures {
		fmt.Fprintf(tw, "  %s\t%s\n", fig[0], fig[1])
	}
	tw.Flush()
	if len(f.Details) > 0 {
		fmt.Fprintf(w, "first breaches:\n  %s\n", strings.Join(f.Details, "\n  "))
	}
}
