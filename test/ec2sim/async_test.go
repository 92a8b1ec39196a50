package ec2sim_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// attachedENI creates an ENI with n secondaries in subnet big and attaches
// it to the instance at device index dev (attach delays off).
func (e *env) attachedENI(instance string, dev int32, n int32) types.NetworkInterface {
	e.t.Helper()
	ni := e.createENI("big", n)
	_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: aws.String(instance), DeviceIndex: aws.Int32(dev)})
	noErr(e.t, err)
	return e.eni(*ni.NetworkInterfaceId)
}

// macAddresses is IMDS local-ipv4s of one MAC, one address a line.
func macAddresses(t *testing.T, e *env, instance, mac string) []string {
	t.Helper()
	return strings.Split(metadata(t, e, e.imdsClient(instance), "network/interfaces/macs/"+mac+"/local-ipv4s"), "\n")
}

// TestReassignmentLandsAfterItsDelay moves a secondary address with its
// Elastic IP from one instance's ENI to another's with a 3 s
// reassignment delay: the call answers with the address at once, but
// for 3 s every describe, the Elastic IP's association and IMDS show it
// on the old ENI, and the new ENI's slot is already taken; then all of
// them show it on the new ENI, the association keeping its ID.
func TestReassignmentLandsAfterItsDelay(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{ReassignDelay: fixed(3 * time.Second)}))
	m5, t3 := aws.ToString(e.instanceByName("node-m5").InstanceId), aws.ToString(e.instanceByName("node-t3").InstanceId)
	from := e.attachedENI(m5, 1, 1)
	to := e.attachedENI(t3, 1, 4) // t3.medium: 6 addresses an ENI, 5 used
	ip := addresses(from)[1]
	alloc, err := e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{})
	noErr(t, err)
	assoc, err := e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{AllocationId: alloc.AllocationId, NetworkInterfaceId: from.NetworkInterfaceId, PrivateIpAddress: aws.String(ip)})
	noErr(t, err)

	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: to.NetworkInterfaceId, PrivateIpAddresses: []string{ip}, AllowReassignment: aws.Bool(true)})
	noErr(t, err)
	if len(out.AssignedPrivateIpAddresses) != 1 || aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress) != ip {
		t.Fatalf("assigned %+v, want %s", out.AssignedPrivateIpAddresses, ip)
	}

	where := func() (onFrom, onTo bool, assocENI string) {
		t.Helper()
		onFrom = slices.Contains(addresses(e.eni(*from.NetworkInterfaceId)), ip)
		onTo = slices.Contains(addresses(e.eni(*to.NetworkInterfaceId)), ip)
		desc, err := e.ec2.DescribeAddresses(e.ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{*alloc.AllocationId}})
		noErr(t, err)
		if id := aws.ToString(desc.Addresses[0].AssociationId); id != aws.ToString(assoc.AssociationId) {
			t.Errorf("association %q, want %q kept", id, aws.ToString(assoc.AssociationId))
		}
		return onFrom, onTo, aws.ToString(desc.Addresses[0].NetworkInterfaceId)
	}
	for _, step := range []time.Duration{0, 2 * time.Second} {
		e.clock.Advance(step)
		onFrom, onTo, eip := where()
		if !onFrom || onTo || eip != *from.NetworkInterfaceId {
			t.Errorf("before landing: on old ENI %v, on new %v, Elastic IP on %s; want old, old", onFrom, onTo, eip)
		}
		if got := macAddresses(t, e, m5, aws.ToString(from.MacAddress)); !slices.Contains(got, ip) {
			t.Errorf("before landing: old MAC's local-ipv4s %v lack %s", got, ip)
		}
		if got := macAddresses(t, e, t3, aws.ToString(to.MacAddress)); slices.Contains(got, ip) {
			t.Errorf("before landing: new MAC's local-ipv4s %v already hold %s", got, ip)
		}
	}
	// The move holds the new ENI's sixth slot.
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: to.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")

	e.clock.Advance(time.Second)
	onFrom, onTo, eip := where()
	if onFrom || !onTo || eip != *to.NetworkInterfaceId {
		t.Errorf("after landing: on old ENI %v, on new %v, Elastic IP on %s; want new, new", onFrom, onTo, eip)
	}
	if got := macAddresses(t, e, t3, aws.ToString(to.MacAddress)); !slices.Contains(got, ip) {
		t.Errorf("after landing: new MAC's local-ipv4s %v lack %s", got, ip)
	}
	if got := macAddresses(t, e, m5, aws.ToString(from.MacAddress)); slices.Contains(got, ip) {
		t.Errorf("after landing: old MAC's local-ipv4s %v still hold %s", got, ip)
	}
}

// TestReassignmentInFlight covers what happens to a move before it
// lands: asked again onto a third ENI, the later move wins and the first
// never lands; the address released meanwhile still lands; the target
// deleted meanwhile leaves the address where it was.
func TestReassignmentInFlight(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{ReassignDelay: fixed(2 * time.Second)}))
	a, b, c := e.createENI("big", 3), e.createENI("big", 0), e.createENI("big", 0)
	ips := addresses(a)[1:]
	reassign := func(to types.NetworkInterface, ip string) {
		t.Helper()
		_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: to.NetworkInterfaceId, PrivateIpAddresses: []string{ip}, AllowReassignment: aws.Bool(true)})
		noErr(t, err)
	}
	reassign(b, ips[0])
	e.clock.Advance(time.Second)
	reassign(c, ips[0]) // supersedes the move to b
	reassign(b, ips[1])
	_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: a.NetworkInterfaceId, PrivateIpAddresses: []string{ips[1]}})
	noErr(t, err)
	reassign(c, ips[2])
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: c.NetworkInterfaceId})
	noErr(t, err)
	reassign(b, ips[2]) // c is gone: b takes the address
	e.clock.Advance(time.Second)
	if got := addresses(e.eni(*b.NetworkInterfaceId)); len(got) != 1 {
		t.Errorf("at 2 s, b holds %v: want its primary alone (its first move was superseded, the others land at 3 s)", got)
	}
	e.clock.Advance(time.Second)
	if got := addresses(e.eni(*b.NetworkInterfaceId)); len(got) != 3 || !slices.Contains(got, ips[1]) || !slices.Contains(got, ips[2]) {
		t.Errorf("at 3 s, b holds %v: want its primary, %s (released, then landed) and %s", got, ips[1], ips[2])
	}
	if got := addresses(e.eni(*a.NetworkInterfaceId)); len(got) != 2 || got[1] != ips[0] {
		t.Errorf("a holds %v: want its primary and %s (its move onto deleted c is lost)", got, ips[0])
	}
}

// TestReleasedAddressCoolsDown unassigns a secondary address and deletes
// an ENI under a 5 s cooldown: their addresses are not handed out fresh,
// not assignable by name and not counted available until it ends.
func TestReleasedAddressCoolsDown(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{ReleaseCooldown: ec2sim.Duration(5 * time.Second)}))
	free := func() int32 { return aws.ToInt32(e.subnetByName("tiny").AvailableIpAddressCount) }
	ni := e.createENI("tiny", 2) // 11 usable: 8 left
	doomed := e.createENI("tiny", 0)
	ip := addresses(ni)[2]
	_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: []string{ip}})
	noErr(t, err)
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: doomed.NetworkInterfaceId})
	noErr(t, err)
	if got := free(); got != 7 {
		t.Errorf("available while cooling down: %d, want 7", got)
	}
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: []string{ip}})
	wantCode(t, err, "PrivateIpAddressInUse")
	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(7)})
	noErr(t, err)
	for _, a := range out.AssignedPrivateIpAddresses {
		if got := aws.ToString(a.PrivateIpAddress); got == ip || got == addresses(doomed)[0] {
			t.Errorf("cooling address %s handed out", got)
		}
	}
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	if err == nil {
		t.Fatal("a subnet whose only free addresses cool down answered an assign")
	}
	e.clock.Advance(5 * time.Second)
	if got := free(); got != 2 {
		t.Errorf("available after the cooldown: %d, want 2", got)
	}
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: []string{ip}})
	noErr(t, err)
}

// TestRealisticProfileMovesAsynchronously: the realistic profile turns
// reassignment delays and release cooldowns on, the default leaves them
// off, and a scenario's timing sets them from YAML.
func TestRealisticProfileMovesAsynchronously(t *testing.T) {
	def, err := ec2sim.NewState(scenario(t, smallScenario), nil)
	noErr(t, err)
	if tm := def.Timing(); tm.ReassignDelay != (ec2sim.Range{}) || tm.ReleaseCooldown != 0 {
		t.Errorf("default profile: reassign %v, cooldown %v; want off", tm.ReassignDelay, tm.ReleaseCooldown)
	}
	sc := scenario(t, smallScenario)
	sc.Profile = ec2sim.ProfileRealistic
	real, err := ec2sim.NewState(sc, nil)
	noErr(t, err)
	if tm := real.Timing(); tm.ReassignDelay.Min <= 0 || tm.ReleaseCooldown <= 0 {
		t.Errorf("realistic profile: reassign %v, cooldown %v; want on", tm.ReassignDelay, tm.ReleaseCooldown)
	}
	yml := scenario(t, smallScenario+"timing: {reassignDelay: {min: 1s, max: 2s}, releaseCooldown: 30s}\n")
	if yml.Timing.ReassignDelay != (ec2sim.Range{Min: ec2sim.Duration(time.Second), Max: ec2sim.Duration(2 * time.Second)}) || yml.Timing.ReleaseCooldown != ec2sim.Duration(30*time.Second) {
		t.Errorf("YAML timing %+v", *yml.Timing)
	}
	if _, err := ec2sim.ParseScenario([]byte(smallScenario + "timing: {releaseCooldown: -1s}\n")); err == nil {
		t.Error("a negative cooldown was accepted")
	}
}

// TestRealisticTimingIsOverlaid: under the realistic profile a timing
// section in YAML changes the fields it names and keeps the profile's
// others (chaos's scenario sets a few and must keep the rest).
func TestRealisticTimingIsOverlaid(t *testing.T) {
	sc := scenario(t, smallScenario+"profile: realistic\ntiming: {attachDelay: {min: 1s, max: 1s}, eventualConsistency: 3s}\n")
	want := ec2sim.RealisticTiming()
	want.AttachDelay = fixed(time.Second)
	want.EventualConsistency = ec2sim.Duration(3 * time.Second)
	if *sc.Timing != want {
		t.Errorf("timing %+v, want %+v", *sc.Timing, want)
	}
}

// TestReassigningAgainKeepsTheMove: asking a move again onto the same ENI
// while it is on its way neither resets its time nor needs another slot.
func TestReassigningAgainKeepsTheMove(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{ReassignDelay: fixed(2 * time.Second)}))
	m5, t3 := aws.ToString(e.instanceByName("node-m5").InstanceId), aws.ToString(e.instanceByName("node-t3").InstanceId)
	from := e.attachedENI(m5, 1, 1)
	to := e.attachedENI(t3, 1, 4) // t3.medium: 6 addresses, one left
	ip := addresses(from)[1]
	for range 2 {
		_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: to.NetworkInterfaceId, PrivateIpAddresses: []string{ip}, AllowReassignment: aws.Bool(true)})
		noErr(t, err)
		e.clock.Advance(time.Second)
	}
	if got := addresses(e.eni(*to.NetworkInterfaceId)); !slices.Contains(got, ip) || len(got) != 6 {
		t.Errorf("2 s after the first ask, the new ENI holds %v: want %s landed, 6 addresses", got, ip)
	}
}

// TestRemapsRecorded: the admin API lists each reassignment's remap with
// its drawn delay and outcome, through the same in-flight cases as
// TestReassignmentInFlight: superseded by a later move, landed after the
// address was released meanwhile, lost with its deleted target, landed,
// and pending until its time.
func TestRemapsRecorded(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{ReassignDelay: fixed(2 * time.Second)}))
	a, b, c := e.createENI("big", 4), e.createENI("big", 0), e.createENI("big", 0)
	ips := addresses(a)[1:]
	reassign := func(to types.NetworkInterface, ip string) {
		t.Helper()
		_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: to.NetworkInterfaceId, PrivateIpAddresses: []string{ip}, AllowReassignment: aws.Bool(true)})
		noErr(t, err)
	}
	start := e.clock.Now()
	reassign(b, ips[0])
	e.clock.Advance(time.Second)
	reassign(c, ips[0]) // supersedes the move to b
	reassign(b, ips[1])
	_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: a.NetworkInterfaceId, PrivateIpAddresses: []string{ips[1]}})
	noErr(t, err)
	reassign(c, ips[2])
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: c.NetworkInterfaceId})
	noErr(t, err)
	e.clock.Advance(2 * time.Second)
	reassign(b, ips[3])
	e.clock.Advance(time.Second)

	got, err := e.admin.Remaps(e.ctx)
	noErr(t, err)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	b0, c0 := aws.ToString(b.NetworkInterfaceId), aws.ToString(c.NetworkInterfaceId)
	want := []ec2sim.Remap{
		{Address: ips[0], NetworkInterfaceID: b0, Asked: at(0), Outcome: ec2sim.RemapSuperseded, Ended: at(time.Second)},
		{Address: ips[0], NetworkInterfaceID: c0, Asked: at(time.Second), Outcome: ec2sim.RemapLost, Ended: at(3 * time.Second)},
		{Address: ips[1], NetworkInterfaceID: b0, Asked: at(time.Second), Outcome: ec2sim.RemapLanded, Ended: at(3 * time.Second)},
		{Address: ips[2], NetworkInterfaceID: c0, Asked: at(time.Second), Outcome: ec2sim.RemapLost, Ended: at(3 * time.Second)},
		{Address: ips[3], NetworkInterfaceID: b0, Asked: at(3 * time.Second), Outcome: ec2sim.RemapPending},
	}
	if len(got) != len(want) {
		t.Fatalf("remaps %+v, want %d", got, len(want))
	}
	for i, w := range want {
		w.Delay = ec2sim.Duration(2 * time.Second)
		g := got[i]
		if g.Address != w.Address || g.NetworkInterfaceID != w.NetworkInterfaceID || !g.Asked.Equal(w.Asked) || g.Delay != w.Delay ||
			g.Outcome != w.Outcome || !g.Ended.Equal(w.Ended) {
			t.Errorf("remap %d: %+v, want %+v", i, g, w)
		}
	}
	e.clock.Advance(time.Second)
	got, err = e.admin.Remaps(e.ctx)
	noErr(t, err)
	if last := got[len(got)-1]; last.Outcome != ec2sim.RemapLanded || !last.Ended.Equal(at(5*time.Second)) {
		t.Errorf("the last remap 2 s after its ask: %+v, want landed at 5 s", last)
	}
}
