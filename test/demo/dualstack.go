package demo

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// The dual-stack part of the demo: the t3.medium is labelled
// dualStackLabel=true, and ENIPolicy dual-stack (ipFamilies IPv4 and
// IPv6) wins over pods for it, so its pods get an address of each family;
// the other nodes stay IPv4-only.
const (
	dualStackPolicyName = "dual-stack"
	dualStackLabel      = "enipam.io/dual-stack"
	dualStackType       = "t3.medium"
	// The demo VPC's Amazon-provided IPv6 /56; each subnet gets a /64 of it.
	vpcIPv6CIDR = "2600:1f18:de00:ab00::/56"
)

// dualStack reports whether n is the demo's dual-stack node.
func (n node) dualStack() bool { return n.instanceType == dualStackType }

// writeScenario writes ec2sim's built-in demo scenario with IPv6 CIDRs on
// the VPC and every subnet, as an AWS VPC with an Amazon-provided IPv6
// block, and returns its path.
func (d *world) writeScenario() (string, error) {
	sc := ec2sim.DemoScenario()
	if len(sc.VPCs) != 1 {
		return "", fmt.Errorf("the demo scenario has %d VPCs, want one", len(sc.VPCs))
	}
	vpc6 := netip.MustParsePrefix(vpcIPv6CIDR)
	vpc := &sc.VPCs[0]
	vpc.IPv6CIDR = vpc6.String()
	for i := range vpc.Subnets {
		// The i+1-th /64 of the /56.
		b := vpc6.Addr().As16()
		b[7] = byte(i + 1)
		vpc.Subnets[i].IPv6CIDR = netip.PrefixFrom(netip.AddrFrom16(b), 64).String()
	}
	data, err := yaml.Marshal(sc)
	if err != nil {
		return "", fmt.Errorf("writing the demo scenario, %w", err)
	}
	path := filepath.Join(d.o.Out, "ec2sim-scenario.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// dualStackPolicy is policy() for the nodes labelled dualStackLabel=true,
// with both families and a lower priority (it wins over pods): their
// IPv4 addresses as pods asks, their IPv6 addresses from a /80 on the
// primary ENI.
func dualStackPolicy() *enipamv1alpha1.ENIPolicy {
	p := policy()
	p.Name = dualStackPolicyName
	p.Spec.Priority = 0
	p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{dualStackLabel: "true"}}
	p.Spec.IPFamilies = []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family}
	return p
}

// isIPv6 reports whether a pool entry's key is an IPv6 address.
func isIPv6(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Is6()
}

// primaryWindows returns the IPv6 /80s ec2sim shows on the primary ENI of
// instance, and that ENI's ID.
func primaryWindows(dump ec2sim.Dump, instance string) (string, []netip.Prefix) {
	for _, e := range dump.NetworkInterfaces {
		if e.Attachment == nil || e.Attachment.DeviceIndex != 0 || e.Attachment.InstanceID != instance {
			continue
		}
		var out []netip.Prefix
		for _, p := range e.IPv6Prefixes {
			if q, err := netip.ParsePrefix(p.IPv6Prefix); err == nil {
				out = append(out, q)
			}
		}
		return e.NetworkInterfaceID, out
	}
	return "", nil
}

// describeDualStack prints the dual-stack node's IPv6 window as its
// CiliumNode and ec2sim show it, and each of its pods' two addresses,
// and fails if a pod lacks one of them or an IPv6 address is outside the
// /80 on the node's primary ENI.
func (d *world) describeDualStack(ctx context.Context, states []poolState) error {
	dump, err := d.sim.Admin.Dump(ctx)
	if err != nil {
		return fmt.Errorf("reading ec2sim's state, %w", err)
	}
	for _, s := range states {
		if !s.node.dualStack() {
			continue
		}
		eni, windows := primaryWindows(dump, s.node.instanceID)
		var names []string
		for _, w := range windows {
			names = append(names, w.String())
		}
		d.p.printf("\nDual-stack node %s (%s, label %s=true, ENIPolicy %s with ipFamilies IPv4, IPv6):\n",
			s.node.name, s.node.instanceType, dualStackLabel, dualStackPolicyName)
		d.p.printf("    IPv6 window: %d addresses in spec.ipam.pool, %d used, %d free; EC2 has %s on %s (its primary ENI)\n",
			s.pool6, s.used6, s.free6, strings.Join(names, ", "), eni)
		inWindow := func(a netip.Addr) bool {
			return slices.ContainsFunc(windows, func(w netip.Prefix) bool { return w.Contains(a) })
		}
		var bad []string
		for _, owner := range s.node.pods {
			ips := d.agentOf(s.node).IPs(owner)
			var v4, v6 []string
			for _, ip := range ips {
				if ip.Is4() {
					v4 = append(v4, ip.String())
				} else {
					v6 = append(v6, ip.String())
					if !inWindow(ip) {
						bad = append(bad, fmt.Sprintf("pod %s: %s is not in the /80 on %s", owner, ip, eni))
					}
				}
			}
			if len(v4) != 1 || len(v6) != 1 {
				bad = append(bad, fmt.Sprintf("pod %s holds %v, want one IPv4 and one IPv6 address", owner, ips))
			}
			d.p.printf("    pod %s: IPv4 %s, IPv6 %s\n", owner, strings.Join(v4, ","), strings.Join(v6, ","))
		}
		for ip, entry := range s.cn.Spec.IPAM.Pool {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && (entry.Resource != eni || !inWindow(a)) {
				bad = append(bad, fmt.Sprintf("pool address %s on %q is not in the /80 on %s", ip, entry.Resource, eni))
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad)
			return fmt.Errorf("the dual-stack node %s:\n    %s", s.node.name, strings.Join(bad, "\n    "))
		}
	}
	return nil
}
