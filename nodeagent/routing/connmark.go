package routing

import "fmt"

// Connmark is the netfilter state that sends the replies of connections
// which arrived on the primary interface back out of it, whatever ENI the
// answering pod's address lives on (NodePort and hostPort through
// kube-proxy, whose DNAT hides the pod from the client). It is Cilium's
// ENI-mode arrangement (iptables' addCiliumENIRules, loader's
// addIPv4ENIRules), which Cilium installs only in ipam: eni:
//
//   - a connection arriving on Primary for a local address gets Mark in
//     its conntrack mark;
//   - a packet of such a connection arriving on any other interface (a
//     pod's reply) gets Mark in its packet mark;
//   - the rule `fwmark Mark/Mark lookup main`, ahead of the egress rules,
//     sends it by the main table, out of Primary.
//
// The first two live in one nf_tables table that enipam owns whole.
type Connmark struct {
	// Primary is the name of the primary ENI's link.
	Primary string
	// Mark is the single bit used in both marks.
	Mark uint32
}

// String names the state for logs and errors.
func (c *Connmark) String() string {
	if c == nil {
		return "no connmark table"
	}
	return fmt.Sprintf("connmark %#x on %s", c.Mark, c.Primary)
}

// DefaultConnmarkMark is Cilium's MarkMultinodeNodeport: the same bit, so a
// node reads the same under either.
const DefaultConnmarkMark = 0x80
