package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/enipam/enipam/test/agentsim"
)

// fleetScenario is a VPC over two zones with a /16 node subnet and a /16
// pod subnet (tagged pods=true) per zone, and n instances of typ split
// over the zones. instanceExtra is appended to each instance entry (seeded
// addresses or ENIs); realistic turns on EC2's default throttling,
// latencies and attach delays.
func fleetScenario(n int, typ, instanceExtra string, realistic bool) string {
	var b strings.Builder
	b.WriteString(`account: "123456789012"
region: us-east-1
seed: 42
zones: [us-east-1a, us-east-1b]
vpcs:
- id: vpc-0b0000000000000b1
  cidrs: [10.0.0.0/16, 10.1.0.0/16, 10.2.0.0/16, 10.3.0.0/16]
  subnets:
  - {id: subnet-0b0000000000000a1, name: nodes-a, cidr: 10.0.0.0/16, zone: us-east-1a}
  - {id: subnet-0b0000000000000b1, name: nodes-b, cidr: 10.1.0.0/16, zone: us-east-1b}
  - {id: subnet-0b0000000000000a2, name: pods-a, cidr: 10.2.0.0/16, zone: us-east-1a, tags: {pods: "true"}}
  - {id: subnet-0b0000000000000b2, name: pods-b, cidr: 10.3.0.0/16, zone: us-east-1b, tags: {pods: "true"}}
  securityGroups:
  - {id: sg-0b0000000000000b1, name: nodes}
  - {id: sg-0b0000000000000b2, name: pods, tags: {pods: "true"}}
instances:
`)
	for i, zone := range []string{"a", "b"} {
		count := n / 2
		if i == 0 {
			count = n - n/2
		}
		if count == 0 {
			continue
		}
		fmt.Fprintf(&b, "- {name: node-%s, count: %d, type: %s, subnet: nodes-%s, securityGroups: [nodes]%s}\n", zone, count, typ, zone, instanceExtra)
	}
	if realistic {
		b.WriteString("profile: realistic\n")
	}
	return b.String()
}

// fleetVPC is the VPC of fleetScenario.
const fleetVPC = "vpc-0b0000000000000b1"

// joinFleet adds an agent and creates the Node and CiliumNode for every
// instance in ec2sim, and returns the node names.
func (w *world) joinFleet(ctx context.Context, labels map[string]string) ([]string, error) {
	dump, err := w.sim.Admin.Dump(ctx)
	if err != nil {
		return nil, err
	}
	specs := make([]agentsim.NodeSpec, 0, len(dump.Instances))
	for _, in := range dump.Instances {
		specs = append(specs, agentsim.NodeSpec{
			Name: "node-" + in.InstanceID, InstanceID: in.InstanceID,
			AvailabilityZone: in.Placement.AvailabilityZone, InstanceType: in.InstanceType, Labels: labels,
		})
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		w.agents.AddAgent(s.Name)
		names[i] = s.Name
	}
	return names, agentsim.CreateNodes(ctx, w.cluster.Client, specs, 64)
}
