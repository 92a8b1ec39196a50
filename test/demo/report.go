package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// report prints what a user would look at once the pools are filled, and
// how to explore the cluster.
func (d *world) report(ctx context.Context) error {
	for _, args := range [][]string{{"get", "ciliumnodes"}, {"get", "enipolicies", "-o", "wide"}} {
		if err := d.runKubectl(ctx, args...); err != nil {
			return err
		}
	}
	states, err := d.pools(ctx)
	if err != nil {
		return err
	}
	d.p.printf("\n")
	d.summary(states)
	groups, err := d.eniGroups(ctx)
	if err != nil {
		return err
	}
	d.p.printf("\n%s\n", d.placement(states, groups))
	if err := d.describeDualStack(ctx, states); err != nil {
		return err
	}
	if err := d.invariants(ctx); err != nil {
		return err
	}
	d.explore()
	return nil
}

// invariants prints what every enipam run is held to, counted from
// ec2sim's state, the CiliumNodes and the simulated agents' ledger, and
// fails the demo on any breach.
func (d *world) invariants(ctx context.Context) error {
	checker := agentsim.NewPoolChecker(3 * time.Second)
	var f agentsim.PoolFindings
	var pooled4, pooled6 int
	for look := range 2 {
		if look > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(3500 * time.Millisecond):
			}
		}
		var list ciliumv2.CiliumNodeList
		if err := d.cluster.Client.List(ctx, &list); err != nil {
			return err
		}
		dump, err := d.sim.Admin.Dump(ctx)
		if err != nil {
			return err
		}
		f = checker.Check(list.Items, dump, time.Now())
		pooled4, pooled6 = 0, 0
		for _, cn := range list.Items {
			for ip := range cn.Spec.IPAM.Pool {
				if isIPv6(ip) {
					pooled6++
				} else {
					pooled4++
				}
			}
		}
	}
	fig := d.agents.Figures()
	d.p.printf("\nInvariants: %d IPs in two pools, %d on two ENIs, %d free pool IPs off their ENI in EC2, %d released IPs in a pool; "+
		"%d ledger violations (IPs handed to two pods, removed while used or without ready-for-release, handed before routed) over %d handouts checked; "+
		"both families: %d IPv4 and %d IPv6 pool addresses checked.\n",
		f.InTwoPools, f.OnTwoENIs, f.FreeOffENI, f.ReleasedInPool, fig.Violations.Total(), fig.RoutedChecks, pooled4, pooled6)
	if n := f.Total() + fig.Violations.Total(); n > 0 {
		return fmt.Errorf("%d invariant breaches: %v; ledger %+v", n, f.Details, fig.Violations)
	}
	var claims enipamv1alpha1.StaticIPClaimList
	var nodes ciliumv2.CiliumNodeList
	if err := d.cluster.Client.List(ctx, &claims); err != nil {
		return err
	}
	if err := d.cluster.Client.List(ctx, &nodes); err != nil {
		return err
	}
	dump, err := d.sim.Admin.Dump(ctx)
	if err != nil {
		return err
	}
	if len(claims.Items) == 0 {
		return nil
	}
	pub := agentsim.CheckPublicIPs(claims.Items, nodes.Items, dump, clusterName, true)
	d.p.printf("Public IPs: %s.\n", pub)
	if pub.Total() > 0 {
		return fmt.Errorf("%d public IP breaches: %v", pub.Total(), pub.Details)
	}
	return nil
}

// runKubectl runs the built kubectl against the demo cluster and prints
// the command and its output as a terminal would.
func (d *world) runKubectl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, d.kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	d.p.printf("\n$ kubectl %s\n%s", strings.Join(args, " "), out)
	return nil
}

// summary prints a table of the pools, one node per row: what
// `kubectl get ciliumnode -o yaml` holds, counted.
func (d *world) summary(states []poolState) {
	d.p.mu.Lock()
	defer d.p.mu.Unlock()
	tw := tabwriter.NewWriter(d.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE TYPE\tZONE\tENIS\tPOOL\tUSED\tFREE\tPODS\tPOOL IPS FROM")
	for _, s := range states {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.node.name, s.node.instanceType, s.node.zone,
			len(s.enis), s.pool, s.used, s.free, len(s.node.pods), strings.Join(d.poolSubnets(s), ", "))
	}
	tw.Flush()
	fmt.Fprintln(d.out, "ENIS counts the primary ENI; POOL, USED and FREE count IPv4 addresses; USED counts the pods' IPs and the agent's router and health IPs.")
}

// poolSubnets names the subnets the node's IPv4 pool addresses come from.
func (d *world) poolSubnets(s poolState) []string {
	var out []string
	for ip, entry := range s.cn.Spec.IPAM.Pool {
		if isIPv6(ip) {
			continue
		}
		eni, ok := s.enis[entry.Resource]
		if !ok {
			continue
		}
		name := d.vpc.subnetNames[eni.Subnet.ID]
		if name == "" {
			name = eni.Subnet.ID
		}
		if label := name + " " + eni.Subnet.CIDR.String(); !slices.Contains(out, label) {
			out = append(out, label)
		}
	}
	slices.Sort(out)
	return out
}

// eniGroups are the security groups of each ENI, as EC2 holds them.
func (d *world) eniGroups(ctx context.Context) (map[string][]string, error) {
	dump, err := d.sim.Admin.Dump(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range dump.NetworkInterfaces {
		for _, g := range e.Groups {
			out[e.NetworkInterfaceID] = append(out[e.NetworkInterfaceID], g.GroupID)
		}
	}
	return out, nil
}

// placement checks that every pool IP is where the policy asks: on a
// secondary ENI, in a pod subnet, with the pod security group
// (eniGroups: each ENI's, as EC2 holds them); it says so, or lists what
// is not.
func (d *world) placement(states []poolState, eniGroups map[string][]string) string {
	var wrong []string
	ips := 0
	for _, s := range states {
		for ip, entry := range s.cn.Spec.IPAM.Pool {
			if isIPv6(ip) {
				// The IPv6 window is on the primary ENI's /80:
				// describeDualStack checks it.
				continue
			}
			ips++
			eni, ok := s.enis[entry.Resource]
			sgs := eniGroups[entry.Resource]
			switch {
			case !ok:
				wrong = append(wrong, fmt.Sprintf("%s %s: ENI %q not in the NodeRouting's spec.enis", s.node.name, ip, entry.Resource))
			case eni.Number < 1:
				wrong = append(wrong, fmt.Sprintf("%s %s: on the primary ENI", s.node.name, ip))
			case !d.vpc.podSubnets[eni.Subnet.ID]:
				wrong = append(wrong, fmt.Sprintf("%s %s: in subnet %s, not a pod subnet", s.node.name, ip, eni.Subnet.ID))
			case len(sgs) == 0 || slices.ContainsFunc(sgs, func(g string) bool { return !d.vpc.podGroups[g] }):
				wrong = append(wrong, fmt.Sprintf("%s %s: security groups %v", s.node.name, ip, sgs))
			}
		}
	}
	if len(wrong) > 0 {
		slices.Sort(wrong)
		return "NOT as ENIPolicy " + policyName + " asks:\n    " + strings.Join(wrong, "\n    ")
	}
	var groups []string
	for id := range d.vpc.podGroups {
		groups = append(groups, d.vpc.groupNames[id])
	}
	slices.Sort(groups)
	return fmt.Sprintf("All %d IPv4 pool IPs are on secondary ENIs in the subnets tagged %s=true, with security group %s,\n"+
		"as ENIPolicy %s asks; the primary ENIs and node subnets stay the hosts'.", ips, podsTag, strings.Join(groups, ", "), policyName)
}

// explore prints how to look around while the demo runs.
func (d *world) explore() {
	example := d.nodes[0].name
	d.p.printf("\nExplore it with kubectl while the demo runs:\n")
	if _, err := exec.LookPath("kubectl"); err != nil {
		d.p.printf("  export PATH=%s:$PATH\n", filepath.Dir(d.kubectl))
	}
	d.p.printf("  export KUBECONFIG=%s\n", d.kubeconfig)
	d.p.printf("  kubectl get ciliumnode %s -o yaml   # spec.ipam.pool, status.ipam.used\n", example)
	d.p.printf("  kubectl get noderouting %s -o yaml  # spec.enis: the ENIs its agent routes; status: what it routed\n", example)
	d.p.printf("  kubectl describe enipolicy %s\n", policyName)
	d.p.printf("  curl -s http://%s/metrics | grep -E '^enipam_(nodes|enis_created|ips_assigned)'\n", d.metrics)
	d.p.printf("Logs: %s/ (enipam-operator.log, ec2sim.log, demo.log)\n", d.rel(d.logDir))
}
