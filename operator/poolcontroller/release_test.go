package poolcontroller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestExcessReleasedOnlyIfItStayedAWholeWindow: pre-allocate 4, release
// delay 60 s, a node with 20 pool IPs on one ENI. Excess is 6 at first,
// dips to 2 when pods come, and is 7 when the window ends → only the 2
// IPs that were never needed during the window are marked.
func TestExcessReleasedOnlyIfItStayedAWholeWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	r := &Reconciler{now: func() time.Time { return now }, log: slog.New(slog.NewTextHandler(io.Discard, nil)), nodes: map[string]*memory{}}
	eni := cloud.ENI{ID: "eni-1", DeviceIndex: 0}
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	for i := range 20 {
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)})
		eni.IPs = append(eni.IPs, ip)
		cn.Spec.IPAM.Pool[ip.String()] = ipamtypes.AllocationIP{Resource: "eni-1"}
	}
	mem := &memory{}
	cfg := policy.Config{Config: pool.Config{Knobs: pool.Knobs{PreAllocate: 4}}, ReleaseExcessIPs: true, ReleaseDelay: time.Minute}
	step := func(used int) *nodeSync {
		cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		for i := range used {
			cn.Status.IPAM.Used[fmt.Sprintf("10.0.0.%d", 10+i)] = ipamtypes.AllocationIP{Owner: "p"}
		}
		s := testSync(r, nil, deciding{mem: mem, cn: cn, nodeState: nodeState{cfg: cfg, snap: snapshot.Node{ENIs: []cloud.ENI{eni}}}, pool: &poolView{cn: cn}})
		s.markExcess()
		return s
	}
	marked := func() int {
		n := 0
		for _, st := range cn.Status.IPAM.ReleaseIPs {
			if st == ipamoption.IPAMMarkForRelease {
				n++
			}
		}
		return n
	}

	if s := step(10); marked() != 0 || s.pool.pendingRelease != time.Minute {
		t.Fatalf("at the start: %d marked, recheck in %s; want none and a recheck at the window's end", marked(), s.pool.pendingRelease)
	}
	now = now.Add(30 * time.Second)
	step(14) // excess 20-14-4 = 2
	if marked() != 0 {
		t.Fatalf("mid-window: %d marked, want none", marked())
	}
	now = now.Add(31 * time.Second)
	step(9) // excess 7, but 2 only stayed the whole window
	if got := marked(); got != 2 {
		t.Fatalf("window over: %d marked, want the floor 2", got)
	}
	for ip := range cn.Status.IPAM.ReleaseIPs {
		if _, used := cn.Status.IPAM.Used[ip]; used {
			t.Errorf("marked %s, which is in use", ip)
		}
	}
}

// unassignRecorder is an EC2 that records Unassign calls and refuses
// every other call (the embedded nil interface panics).
type unassignRecorder struct {
	cloud.API
	unassigned []netip.Addr
}

func (u *unassignRecorder) UnassignIPs(_ context.Context, _ string, ips []netip.Addr) error {
	u.unassigned = append(u.unassigned, ips...)
	return nil
}

// TestAcknowledgedAddressARefusedClaimAsksForIsNotUnassigned is the
// regression test for seed 40038 of the static-IP simulation: claims
// db-0 and db-2 asked (spec.address) for an address claim db-1 held, and
// were refused (Invalid, AddressTaken). Once db-1 was deleted, its
// address was an ordinary pool entry again, marked as excess and
// acknowledged by the agent, and unassigned, while the refused claims,
// whose turn had come, still asked for it: given back to EC2, anything
// in the subnet could take it. An acknowledged entry a claim names is
// kept (the claim, once checked again, has it stamped); one no claim
// names is unassigned.
func TestAcknowledgedAddressARefusedClaimAsksForIsNotUnassigned(t *testing.T) {
	r := &Reconciler{now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil)), nodes: map[string]*memory{}}
	claimed, free := netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11")
	eni := cloud.ENI{ID: "eni-1", DeviceIndex: 1, IPs: []netip.Addr{claimed, free}}
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{claimed.String(): {Resource: "eni-1"}, free.String(): {Resource: "eni-1"}}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{
		claimed.String(): ipamoption.IPAMReadyForRelease, free.String(): ipamoption.IPAMReadyForRelease}
	api := &unassignRecorder{}
	r.api = api
	r.inv = inventory.New(api, inventory.Options{}, r.log)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r.metrics = m
	s := testSync(r, nil, deciding{mem: &memory{}, cn: cn, pool: &poolView{cn: cn}, nodeState: nodeState{
		snap: snapshot.Node{ENIs: []cloud.ENI{eni}},
		static: &staticInputs{claims: map[string]*claims.Claim{
			"ns/db-2": {Owner: "ns/db-2", Addr: claimed, Invalid: true},
		}}}})
	steps := decideRelease(cn, &s.snap, s.static, nil, netip.Prefix{})
	if _, err := s.exec().release(context.Background(), s.releaseUnheld(steps)); err != nil {
		t.Fatal(err)
	}
	if len(api.unassigned) != 1 || api.unassigned[0] != free {
		t.Fatalf("unassigned %v, want only %s (%s is asked for by a refused claim)", api.unassigned, free, claimed)
	}
	if _, ok := cn.Spec.IPAM.Pool[claimed.String()]; !ok || cn.Status.IPAM.ReleaseIPs[claimed.String()] != ipamoption.IPAMReadyForRelease {
		t.Fatalf("%s: in the pool %v, handshake %q; want kept, acknowledged", claimed, ok, cn.Status.IPAM.ReleaseIPs[claimed.String()])
	}
}
