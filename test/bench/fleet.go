package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
)

// fleetScenario is a VPC over two zones with a /16 node subnet and a /16
// pod subnet (tagged pods=true) per zone, and n instances of typ split
// over the zones. instanceExtra is appended to each instance entry (seeded
// addresses or ENIs); realistic turns on EC2's default throttling,
// latencies and attach delays. A fleet too large for one /16 per zone (up
// to 20 addresses per node: more than 6000 nodes) gets two node subnets
// per zone instead, and no pod subnets (a VPC holds at most 5 CIDRs).
func fleetScenario(n int, typ, instanceExtra string, realistic bool) string {
	var b strings.Builder
	large := n > 6000
	b.WriteString(`account: "123456789012"
clusterName: bench
region: us-east-1
seed: 42
zones: [us-east-1a, us-east-1b]
vpcs:
- id: vpc-0b0000000000000b1
  cidrs: [10.0.0.0/16, 10.1.0.0/16, 10.2.0.0/16, 10.3.0.0/16]
  subnets:
  - {id: subnet-0b0000000000000a1, name: nodes-a, cidr: 10.0.0.0/16, zone: us-east-1a}
  - {id: subnet-0b0000000000000b1, name: nodes-b, cidr: 10.1.0.0/16, zone: us-east-1b}
`)
	if large {
		b.WriteString(`  - {id: subnet-0b0000000000000a3, name: nodes-a2, cidr: 10.2.0.0/16, zone: us-east-1a}
  - {id: subnet-0b0000000000000b3, name: nodes-b2, cidr: 10.3.0.0/16, zone: us-east-1b}
`)
	} else {
		b.WriteString(`  - {id: subnet-0b0000000000000a2, name: pods-a, cidr: 10.2.0.0/16, zone: us-east-1a, tags: {pods: "true"}}
  - {id: subnet-0b0000000000000b2, name: pods-b, cidr: 10.3.0.0/16, zone: us-east-1b, tags: {pods: "true"}}
`)
	}
	b.WriteString(`  securityGroups:
  - {id: sg-0b0000000000000b1, name: nodes}
  - {id: sg-0b0000000000000b2, name: pods, tags: {pods: "true"}}
instances:
`)
	for i, zone := range []string{"a", "b"} {
		count := n / 2
		if i == 0 {
			count = n - n/2
		}
		subnets := []string{"nodes-" + zone}
		if large {
			subnets = append(subnets, "nodes-"+zone+"2")
		}
		for j, subnet := range subnets {
			c := count / len(subnets)
			if j == 0 {
				c = count - (len(subnets)-1)*(count/len(subnets))
			}
			if c == 0 {
				continue
			}
			fmt.Fprintf(&b, "- {name: %s, count: %d, type: %s, subnet: %s, securityGroups: [nodes]%s}\n", strings.Replace(subnet, "nodes", "node", 1), c, typ, subnet, instanceExtra)
		}
	}
	if realistic {
		b.WriteString("profile: realistic\n")
	}
	return b.String()
}

// fleetVPC is the VPC of fleetScenario.
const fleetVPC = "vpc-0b0000000000000b1"

// existing returns a node for every instance already in ec2sim.
func (w *world) existing(ctx context.Context) ([]agentsim.NodeSpec, error) {
	dump, err := w.sim.Admin.Dump(ctx)
	if err != nil {
		return nil, err
	}
	specs := make([]agentsim.NodeSpec, 0, len(dump.Instances))
	for _, in := range dump.Instances {
		specs = append(specs, agentsim.NodeSpec{
			Name: "node-" + in.InstanceID, InstanceID: in.InstanceID,
			AvailabilityZone: in.Placement.AvailabilityZone, InstanceType: in.InstanceType,
		})
	}
	return specs, nil
}

// launch starts n instances of typ, alternating between the zones, as an
// autoscaler would: the operator has never seen them.
func (w *world) launch(ctx context.Context, n int, typ string) ([]agentsim.NodeSpec, error) {
	specs := make([]agentsim.NodeSpec, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			subnet := []string{"nodes-a", "nodes-b"}[i%2]
			in, err := w.sim.Admin.AddInstance(ctx, ec2sim.LaunchRequest{InstanceType: typ, SubnetID: subnet})
			if err == nil {
				specs[i] = agentsim.NodeSpec{Name: "node-" + in.InstanceID, InstanceID: in.InstanceID, AvailabilityZone: in.AvailabilityZone, InstanceType: typ}
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return nil, fmt.Errorf("launching instances: %w", err)
		}
	}
	return specs, nil
}

// join adds an agent for every node and creates its Node and CiliumNode
// the way kubelet and cilium-agent do; it returns the node names.
func (w *world) join(ctx context.Context, specs []agentsim.NodeSpec) ([]string, error) {
	names := make([]string, len(specs))
	for i, s := range specs {
		w.agents.AddAgent(s.Name)
		names[i] = s.Name
	}
	return names, agentsim.CreateNodes(ctx, w.cluster.Client, specs, 64)
}
