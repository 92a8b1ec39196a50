package agentsim

import (
	"slices"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// RemapsFromState answers a NodeRouting's remap queries as its
// enipam-agent would from the instance metadata, read off EC2's true
// state (an address is on an ENI once its remap landed; describes may lag
// it): for the spec's generation, each asked address landed when an ENI
// attached to the node's instance with the asked MAC holds it, else
// missing. Nil when nothing is asked.
func RemapsFromState(nr *enipamv1alpha1.NodeRouting, enis []ec2sim.NetworkInterface) *enipamv1alpha1.RemapReport {
	if len(nr.Spec.RemapQueries) == 0 {
		return nil
	}
	local := map[string][]string{}
	for _, e := range enis {
		if e.Attachment == nil || e.Attachment.InstanceID != nr.Spec.InstanceID || e.Attachment.Status != "attached" {
			continue
		}
		for _, a := range e.PrivateIPAddresses {
			local[e.MacAddress] = append(local[e.MacAddress], a.PrivateIPAddress)
		}
	}
	r := &enipamv1alpha1.RemapReport{ObservedGeneration: nr.Generation}
	for _, q := range nr.Spec.RemapQueries {
		if slices.Contains(local[q.MAC], q.Address) {
			r.Landed = append(r.Landed, q.Address)
		} else {
			r.Missing = append(r.Missing, q.Address)
		}
	}
	return r
}
