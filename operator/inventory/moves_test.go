package inventory

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// TestReassignedAddressIsNotTrustedUntilEC2ShowsIt is the regression test
// for what ec2sim's asynchronous reassignment found end to end: a static
// address reassigned onto another node's ENI was pooled, routed and given
// to its pod there while EC2 still had it on the old node's ENI (EC2
// remaps asynchronously). After RecordMoved the address is not Trusted on
// the new ENI; a describe before EC2 completed the move keeps it so, and
// so does one after it within the consistency grace (a describe may show
// a past state); a describe a grace after the move does not.
func TestReassignedAddressIsNotTrustedUntilEC2ShowsIt(t *testing.T) {
	c, inv, clock, ctx, from, to, ip := startOneMove(t)
	if err := c.AssignAddresses(ctx, to, []netip.Addr{ip}, true); err != nil {
		t.Fatal(err)
	}
	inv.RecordMoved(ip, to)
	if inv.Trusted(to, ip) {
		t.Fatalf("%s trusted on %s right after the reassignment", ip, to)
	}
	clock.Advance(2 * time.Second)
	if err := inv.RefreshENIs(ctx, []string{to, from}); err != nil {
		t.Fatal(err)
	}
	if inv.Trusted(to, ip) {
		t.Fatalf("%s trusted on %s on a describe before EC2 moved it", ip, to)
	}
	clock.Advance(time.Second)
	if err := inv.RefreshENIs(ctx, []string{to}); err != nil {
		t.Fatal(err)
	}
	if inv.Trusted(to, ip) {
		t.Fatalf("%s trusted on %s on a describe within the consistency grace of the reassignment", ip, to)
	}
	clock.Advance(time.Minute)
	if err := inv.RefreshENIs(ctx, []string{to}); err != nil {
		t.Fatal(err)
	}
	if !inv.Trusted(to, ip) {
		t.Fatalf("%s not trusted on %s once EC2 shows it there, a grace after the reassignment", ip, to)
	}
}

// TestLandedRemapIsTrustedBeforeDescribesShowIt: the node's agent read
// the instance metadata listing a reassigned address on its new ENI
// (RecordLanded). The address is trusted there at once, though describes
// lag the remap by 3 minutes (every change, in this scenario): a describe
// of both ENIs made in that window, showing the address still on the ENI
// it left and not on the new one, neither takes it back off the new ENI
// nor puts it on the old one, within the consistency grace (a minute) or
// after it; once describes show the remap, they are believed again.
func TestLandedRemapIsTrustedBeforeDescribesShowIt(t *testing.T) {
	c, inv, clock, ctx := startMoves(t, time.Minute, `
- {id: i-0a000000000000001, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1, secondaryIPs: 1}]}
- {id: i-0a000000000000002, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1}]}
timing: {reassignDelay: {min: 2s, max: 2s}, lag: {reassign: {min: 3m, max: 3m}, share: 1}}
`)

	enis, err := c.ListENIs(ctx, "vpc-0a000000000000001", nil)
	if err != nil {
		t.Fatal(err)
	}
	var from, to string
	var ip netip.Addr
	for _, e := range enis {
		switch {
		case e.DeviceIndex == 1 && e.InstanceID == "i-0a000000000000001":
			from, ip = e.ID, e.IPs[0]
		case e.DeviceIndex == 1:
			to = e.ID
		}
	}
	if err := c.AssignAddresses(ctx, to, []netip.Addr{ip}, true); err != nil {
		t.Fatal(err)
	}
	inv.RecordMoved(ip, to)
	if got := inv.MovingOnto([]string{to}); got[ip] != to || len(got) != 1 {
		t.Fatalf("MovingOnto(%s) = %v, want %s → %s", to, got, ip, to)
	}
	if got := inv.MovingOnto([]string{from}); len(got) != 0 {
		t.Fatalf("MovingOnto(%s) = %v, want none", from, got)
	}
	clock.Advance(2 * time.Second) // the remap lands; describes show it 3 minutes later
	inv.RecordLanded(ip, to)
	if !inv.Trusted(to, ip) {
		t.Fatalf("%s not trusted on %s once the agent saw it there", ip, to)
	}
	if got := inv.MovingOnto([]string{to}); len(got) != 0 {
		t.Fatalf("MovingOnto after the confirmation = %v, want none", got)
	}
	clock.Advance(time.Second)
	described, err := c.GetENIs(ctx, []string{from, to})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range described {
		if (e.ID == from) != slices.Contains(e.IPs, ip) {
			t.Fatalf("the scenario's describe should still lag the remap: %s shows %v", e.ID, e.IPs)
		}
	}
	check := func(when string) {
		t.Helper()
		if err := inv.RefreshENIs(ctx, []string{from, to}); err != nil {
			t.Fatal(err)
		}
		if err := inv.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if !inv.Trusted(to, ip) {
			t.Fatalf("%s: %s no longer trusted on %s", when, ip, to)
		}
		if loc := inv.Locate(ip); !loc.Found || loc.ENI.ID != to {
			t.Fatalf("%s: %s is located on %+v, want %s", when, ip, loc.ENI.ID, to)
		}
		if h := inv.Holders([]netip.Addr{ip}); h[ip] != "i-0a000000000000002" {
			t.Fatalf("%s: %s is held by %q, want i-0a000000000000002", when, ip, h[ip])
		}
	}
	check("a lagging describe within the grace")
	clock.Advance(2 * time.Minute)
	check("a lagging describe after the grace")
	clock.Advance(2 * time.Minute)
	check("describes that show the remap")
}

// TestLandedAnswerOfASupersededReassignmentIsRefused is the regression
// test for seed 13545 of the static-IP simulation: kube-scheduler's bind
// retries asked a claim onto node 2, then node 3, then node 2 again. The
// address was reassigned onto node 2's ENI (it landed), then onto node
// 3's before node 2's agent answered; node 2's agent then reported it
// Landed (true until the second remap lands), node 2 pooled it and its
// pod started with it, and EC2 moved it to node 3. An answer about an
// earlier reassignment is refused while a later one is under way, and
// the address is trusted on no ENI until the later remap lands: neither
// where the earlier one put it nor where it goes.
func TestLandedAnswerOfASupersededReassignmentIsRefused(t *testing.T) {
	c, inv, clock, ctx := startMoves(t, time.Minute, `
- {id: i-0a000000000000001, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1, secondaryIPs: 1}]}
- {id: i-0a000000000000002, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1}]}
- {id: i-0a000000000000003, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1}]}
timing: {reassignDelay: {min: 3s, max: 3s}}
`)

	enis, err := c.ListENIs(ctx, "vpc-0a000000000000001", nil)
	if err != nil {
		t.Fatal(err)
	}
	eni := map[string]string{}
	var ip netip.Addr
	for _, e := range enis {
		if e.DeviceIndex != 1 {
			continue
		}
		eni[e.InstanceID] = e.ID
		if e.InstanceID == "i-0a000000000000001" {
			ip = e.IPs[0]
		}
	}
	first, second := eni["i-0a000000000000002"], eni["i-0a000000000000003"]
	reassign := func(to string) {
		t.Helper()
		if err := c.AssignAddresses(ctx, to, []netip.Addr{ip}, true); err != nil {
			t.Fatal(err)
		}
		inv.RecordMoved(ip, to)
	}
	reassign(first)
	clock.Advance(3 * time.Second) // the first remap lands
	reassign(second)
	clock.Advance(time.Second) // the second is under way: EC2 has it on first
	described, err := c.GetENIs(ctx, []string{first, second})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range described {
		if (e.ID == first) != slices.Contains(e.IPs, ip) {
			t.Fatalf("the scenario should have %s on %s alone now: %s shows %v", ip, first, e.ID, e.IPs)
		}
	}
	if inv.RecordLanded(ip, first) {
		t.Fatalf("the answer that %s landed on %s was taken while its reassignment onto %s is under way", ip, first, second)
	}
	if err := inv.RefreshENIs(ctx, []string{first, second}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first, second} {
		if inv.Trusted(id, ip) {
			t.Fatalf("%s trusted on %s while its reassignment onto %s is under way", ip, id, second)
		}
	}
	clock.Advance(2 * time.Second) // the second remap lands
	if !inv.RecordLanded(ip, second) {
		t.Fatalf("the answer that %s landed on %s, where it was last reassigned, was refused", ip, second)
	}
	if !inv.Trusted(second, ip) {
		t.Fatalf("%s not trusted on %s once its last remap landed", ip, second)
	}
	if loc := inv.Locate(ip); !loc.Found || loc.ENI.ID != second {
		t.Fatalf("%s is located on %q, want %s", ip, loc.ENI.ID, second)
	}
}

// TestAnAddressMovedAwayAndBackIsNotTrustedOnAStaleDescribe (staticsim
// seed 107518): an address reassigned from ENI A to B (the remap lands
// after a second, describes show each landed remap 3 s late), then back
// onto A. A describe of A
// made right after the move back shows A as it was before the address
// left it, with the address: that is no sign the move back landed (it
// has not: EC2 has the address on B), so it is not trusted on A; a
// describe a grace after the move back, once EC2 has it on A, is.
func TestAnAddressMovedAwayAndBackIsNotTrustedOnAStaleDescribe(t *testing.T) {
	c, inv, clock, ctx := startMoves(t, 5*time.Second, `
- {id: i-0a000000000000001, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1, secondaryIPs: 1}]}
- {id: i-0a000000000000002, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1}]}
timing: {reassignDelay: {min: 1s, max: 1s}, lag: {reassign: {min: 3s, max: 3s}, share: 1}}
`)

	enis, err := c.ListENIs(ctx, "vpc-0a000000000000001", nil)
	if err != nil {
		t.Fatal(err)
	}
	var a, b string
	var ip netip.Addr
	for _, e := range enis {
		switch {
		case e.DeviceIndex == 1 && e.InstanceID == "i-0a000000000000001":
			a, ip = e.ID, e.IPs[0]
		case e.DeviceIndex == 1:
			b = e.ID
		}
	}
	// Away onto B; it lands at 1 s, describes show it at 4 s.
	if err := c.AssignAddresses(ctx, b, []netip.Addr{ip}, true); err != nil {
		t.Fatal(err)
	}
	inv.RecordMoved(ip, b)
	clock.Advance(2 * time.Second)
	inv.RecordLanded(ip, b) // B's agent saw it in the metadata
	// Back onto A at 2 s: it lands at 3 s.
	if err := c.AssignAddresses(ctx, a, []netip.Addr{ip}, true); err != nil {
		t.Fatal(err)
	}
	inv.RecordMoved(ip, a)
	described, err := c.GetENIs(ctx, []string{a})
	if err != nil {
		t.Fatal(err)
	}
	if len(described) != 1 || !slices.Contains(described[0].IPs, ip) {
		t.Fatalf("the scenario's describe of %s should still show %s, from before it left: %+v", a, ip, described)
	}
	if err := inv.RefreshENIs(ctx, []string{a}); err != nil {
		t.Fatal(err)
	}
	if inv.Trusted(a, ip) {
		t.Fatalf("%s trusted on %s on a describe showing it there from before it left, while EC2 has it on %s", ip, a, b)
	}
	// The move back lands at 3 s (ec2sim runs what is due when it is
	// next looked at), describes show it at 6 s; a describe at 12 s,
	// a grace after the move, is believed.
	clock.Advance(time.Second)
	c.State().DumpNetwork()
	clock.Advance(9 * time.Second)
	if err := inv.RefreshENIs(ctx, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	if !inv.Trusted(a, ip) {
		t.Fatalf("%s not trusted on %s on a describe showing it there a grace after the move back", ip, a)
	}
}

// TestLandedAddressUnassignedLeavesItsENI (seed 60983 of the static-IP
// simulation): a reassigned address the node's agent saw land
// (RecordLanded), then unassigned by this process (its claim deleted,
// released as excess): the cache no longer shows it on the ENI, so the
// pool does not list it again.
func TestLandedAddressUnassignedLeavesItsENI(t *testing.T) {
	c, inv, clock, ctx := startMoves(t, time.Minute, `
- {id: i-0a000000000000001, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1, secondaryIPs: 1}]}
- {id: i-0a000000000000002, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1}]}
`)
	enis, err := c.ListENIs(ctx, "vpc-0a000000000000001", nil)
	if err != nil {
		t.Fatal(err)
	}
	var to string
	var ip netip.Addr
	for _, e := range enis {
		switch {
		case e.DeviceIndex == 1 && e.InstanceID == "i-0a000000000000001":
			ip = e.IPs[0]
		case e.DeviceIndex == 1:
			to = e.ID
		}
	}
	if err := c.AssignAddresses(ctx, to, []netip.Addr{ip}, true); err != nil {
		t.Fatal(err)
	}
	inv.RecordMoved(ip, to)
	clock.Advance(5 * time.Second)
	if !inv.RecordLanded(ip, to) {
		t.Fatalf("RecordLanded(%s, %s) refused", ip, to)
	}
	if err := c.UnassignIPs(ctx, to, []netip.Addr{ip}); err != nil {
		t.Fatal(err)
	}
	inv.RecordUnassigned(to, []netip.Addr{ip})
	if loc := inv.Locate(ip); loc.Found {
		t.Fatalf("%s unassigned from %s is still located on %s", ip, to, loc.ENI.ID)
	}
	if err := inv.RefreshENIs(ctx, []string{to}); err != nil {
		t.Fatal(err)
	}
	if loc := inv.Locate(ip); loc.Found {
		t.Fatalf("after a describe: %s unassigned from %s is located on %s", ip, to, loc.ENI.ID)
	}
}

// startMoves starts an inventory with the given consistency grace over
// the in-memory EC2 of a one-subnet VPC holding instances (and timing, if
// given), its clock manual, and returns once the inventory has synced.
func startMoves(t *testing.T, grace time.Duration, instancesAndTiming string) (*cloudfake.Cloud, *Inventory, *ec2sim.ManualClock, context.Context) {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(`
account: "111122223333"
region: eu-west-1
zones: [eu-west-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.1.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, cidr: 10.1.1.0/24, zone: eu-west-1a}
instances:
` + instancesAndTiming))
	if err != nil {
		t.Fatal(err)
	}
	clock := ec2sim.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st, err := ec2sim.NewState(sc, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	c := cloudfake.New(st)
	inv := New(c, Options{VPCIDs: []string{"vpc-0a000000000000001"}, ResyncInterval: time.Hour, ConsistencyGrace: grace, NotFoundRetry: time.Minute},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	inv.now = clock.Now
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()
	return c, inv, clock, ctx
}

// startOneMove starts the inventory on two instances whose device-1
// ENIs are from (holding ip, its one secondary address) and to (none),
// with EC2 taking 3 s to complete a reassignment.
func startOneMove(t *testing.T) (c *cloudfake.Cloud, inv *Inventory, clock *ec2sim.ManualClock, ctx context.Context, from, to string, ip netip.Addr) {
	t.Helper()
	c, inv, clock, ctx = startMoves(t, time.Minute, `
- {id: i-0a000000000000001, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1, secondaryIPs: 1}]}
- {id: i-0a000000000000002, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1}]}
timing: {reassignDelay: {min: 3s, max: 3s}}
`)
	enis, err := c.ListENIs(ctx, "vpc-0a000000000000001", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range enis {
		switch {
		case e.DeviceIndex == 1 && e.InstanceID == "i-0a000000000000001":
			from, ip = e.ID, e.IPs[0] // IPs are the secondary addresses
		case e.DeviceIndex == 1:
			to = e.ID
		}
	}
	return c, inv, clock, ctx, from, to, ip
}

// TestMovingToNamesTheLastMoveUntilItLands: an address reassigned from
// node 1's ENI onto node 2's (the remap takes 3 s in EC2) is moving to
// node 2's ENI, as the pool controller reads it beside the agent's
// answers, until the agent's word that it landed there is recorded;
// then to none.
func TestMovingToNamesTheLastMoveUntilItLands(t *testing.T) {
	c, inv, clock, ctx, _, to, ip := startOneMove(t)
	if got := inv.MovingTo(ip); got != "" {
		t.Fatalf("%s moving to %q before any reassignment, want none", ip, got)
	}
	if err := c.AssignAddresses(ctx, to, []netip.Addr{ip}, true); err != nil {
		t.Fatal(err)
	}
	inv.RecordMoved(ip, to)
	if got := inv.MovingTo(ip); got != to {
		t.Fatalf("%s moving to %q after its reassignment, want %s", ip, got, to)
	}
	clock.Advance(3 * time.Second)
	if !inv.RecordLanded(ip, to) {
		t.Fatalf("the answer that %s landed on %s was refused", ip, to)
	}
	if got := inv.MovingTo(ip); got != "" {
		t.Fatalf("%s moving to %q once it landed, want none", ip, got)
	}
}
