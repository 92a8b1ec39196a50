package agentsim

import (
	"errors"
	"testing"
	"time"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestHandedBeforeRoutedIsJudgedOnRevisions: the agent of node n lists
// 10.0.0.1 on eni-1 at revision 10 and the prefix 10.0.1.0/28 at 15. A pod
// gets 10.0.0.1 pooled at 12 (fine) and 10.0.0.2 pooled at 12 (never
// routed: a violation). Addresses pooled at 16, 20 and 30, after the
// revision the routing watch has seen, wait for it: at 31, 10.0.1.7 (in
// the prefix, listed since 15) is fine, 10.0.0.9 (listed from 10 to 15,
// pooled again at 20) and 10.0.0.3 (never listed) are violations.
func TestHandedBeforeRoutedIsJudgedOnRevisions(t *testing.T) {
	l := NewLedger()
	now := time.Now()
	l.observeRouting("n", 10, &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-1", IPs: []string{"10.0.0.1", "10.0.0.9"}}}})
	l.observeRouting("n", 15, &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-1", IPs: []string{"10.0.0.1"}, Prefixes: []string{"10.0.1.0/28"}}}})
	l.handedOut("n", "eni-1", "10.0.0.1", "p1", 12, now)
	l.handedOut("n", "eni-1", "10.0.0.2", "p2", 12, now)
	l.handedOut("n", "eni-1", "10.0.1.7", "p3", 16, now)
	l.handedOut("n", "eni-1", "10.0.0.9", "p4", 20, now) // listed 10..15 only
	l.handedOut("n", "eni-1", "10.0.0.3", "p5", 30, now)
	// Pooled at 16, 20 and 30: the watch has seen 15, so those wait.
	if judged, pending := l.RoutedChecks(); judged != 2 || pending != 3 {
		t.Fatalf("judged %d, pending %d; want 2 and 3", judged, pending)
	}
	if v := l.Violations().HandedBeforeRouted; v != 1 {
		t.Fatalf("%d violations before the watch caught up, want 1 (10.0.0.2)", v)
	}
	l.observeRouting("n", 31, &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-1", IPs: []string{"10.0.0.1"}}}})
	if judged, pending := l.RoutedChecks(); judged != 5 || pending != 0 {
		t.Fatalf("judged %d, pending %d; want 5 and 0", judged, pending)
	}
	if v := l.Violations(); v.HandedBeforeRouted != 3 || v.Total() != 3 {
		t.Fatalf("violations %+v, want 3 handed before routed", v)
	}
}

// TestHandedBeforeRoutedIPv6: the agent of node n lists the /80
// 2001:db8::a:0:0:0/80 on eni-p and 2001:db8::20 on eni-q from revision
// 10, and no longer the /80 from 20. A window address pooled at 12 on
// eni-p is fine; one pooled at 12 but named for eni-q (the /80 is not
// routed there), one outside the /80 and one pooled at 21 are violations;
// 2001:db8::20 pooled at 12 on eni-q is fine.
func TestHandedBeforeRoutedIPv6(t *testing.T) {
	l := NewLedger()
	now := time.Now()
	l.observeRouting("n", 10, &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{
		{ID: "eni-p", IPv6Prefixes: []string{"2001:db8:0:0:a::/80"}}, {ID: "eni-q", IPv6: []string{"2001:db8::20"}}}})
	l.observeRouting("n", 20, &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-q", IPv6: []string{"2001:db8::20"}}}})
	l.handedOut("n", "eni-p", "2001:db8::a:0:0:1", "p1", 12, now)
	l.handedOut("n", "eni-q", "2001:db8::a:0:0:2", "p2", 12, now)
	l.handedOut("n", "eni-p", "2001:db8::b:0:0:1", "p3", 12, now)
	l.handedOut("n", "eni-p", "2001:db8::a:0:0:3", "p4", 21, now)
	l.handedOut("n", "eni-q", "2001:db8::20", "p5", 12, now)
	l.observeRouting("n", 22, &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-q", IPv6: []string{"2001:db8::20"}}}})
	if judged, pending := l.RoutedChecks(); judged != 5 || pending != 0 {
		t.Fatalf("judged %d, pending %d; want 5 and 0", judged, pending)
	}
	if v := l.Violations(); v.HandedBeforeRouted != 3 {
		t.Fatalf("violations %+v, want 3 handed before routed", v)
	}
}

// TestHandedBeforeRoutedTellsWhatTheLedgerSaw: a handed-before-routed
// names the revision the address was pooled in, the spans it was listed
// in, and the node's NodeRouting revisions the ledger saw, so a breach
// can be told from a watch that missed revisions; errors that ended the
// routing watch are counted.
func TestHandedBeforeRoutedTellsWhatTheLedgerSaw(t *testing.T) {
	l := NewLedger()
	now := time.Now()
	l.observeRouting("n", 10, &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-1", IPs: []string{"10.0.0.9"}}}})
	l.observeRouting("n", 15, &enipamv1alpha1.NodeRoutingStatus{})
	l.observeRouting("n", 25, &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-1", IPs: []string{"10.0.0.9"}}}})
	l.handedOut("n", "eni-1", "10.0.0.9", "p1", 20, now)
	d := l.ViolationDetails()
	if len(d) != 1 {
		t.Fatalf("violations %v, want one (pooled at 20, listed 10 to 15 and from 25)", d)
	}
	want := "ENI eni-1, pooled at revision 20, listed [{10 15} {25 0}], routing revisions seen 3 (10 to 25)"
	if d[0].Other != want {
		t.Errorf("detail %q, want %q", d[0].Other, want)
	}
	l.routingWatchError(errors.New("too old resource version"), 25)
	if n, errs := l.RoutingWatchErrors(); n != 1 || len(errs) != 1 {
		t.Errorf("watch errors %d %v, want 1", n, errs)
	}
}

// TestHandedBeforeRoutedAcrossAWatchGap: the ledger's NodeRouting watch
// ends in an error after delivering revision 12, and the list after it
// is at revision 30. Node a's agent listed nothing at 10 and 10.0.0.5 at
// 25, which the list delivers: its revisions between 12 and 25 were never
// seen, so 10.0.0.5 pooled at 20 is not judged (counted apart, named).
// Node b's NodeRouting is delivered again by the list at 10, unchanged:
// its status stood through 30, so 10.0.0.6, never listed, pooled at 20 is
// a breach. Node c, listed nothing through the list and 10.0.0.7 from
// 40 (the watch after the list): 10.0.0.7 pooled at 35 is a breach. Node
// d's breach at 8 came before the gap.
func TestHandedBeforeRoutedAcrossAWatchGap(t *testing.T) {
	l := NewLedger()
	now := time.Now()
	none := &enipamv1alpha1.NodeRoutingStatus{}
	listing := func(ip string) *enipamv1alpha1.NodeRoutingStatus {
		return &enipamv1alpha1.NodeRoutingStatus{ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-1", IPs: []string{ip}}}}
	}
	l.routingListed(1) // the first list closes no gap
	l.observeRouting("d", 5, none)
	l.observeRouting("a", 10, none)
	l.observeRouting("b", 10, none)
	l.observeRouting("c", 11, none)
	l.handedOut("d", "eni-1", "10.0.0.8", "p0", 8, now)
	l.routingWatchError(errors.New("too old resource version"), 12)
	l.routingListed(30)
	l.observeRouting("a", 25, listing("10.0.0.5"))
	l.observeRouting("b", 10, none)
	l.observeRouting("c", 11, none)
	l.observeRouting("c", 40, listing("10.0.0.7"))
	l.observeRouting("d", 41, none)
	l.handedOut("a", "eni-1", "10.0.0.5", "p1", 20, now)
	l.handedOut("b", "eni-1", "10.0.0.6", "p2", 20, now)
	l.handedOut("c", "eni-1", "10.0.0.7", "p3", 35, now)
	if judged, pending := l.RoutedChecks(); judged != 4 || pending != 0 {
		t.Fatalf("judged %d, pending %d; want 4 and 0", judged, pending)
	}
	if v := l.Violations(); v.HandedBeforeRouted != 3 {
		t.Errorf("violations %+v (%v), want 3 handed before routed (b, c, d)", v, l.ViolationDetails())
	}
	n, texts := l.RoutedUnjudged()
	if want := "10.0.0.5 on a (ENI eni-1), pooled at revision 20, watch gap after 12 up to 30"; n != 1 || len(texts) != 1 || texts[0] != want {
		t.Errorf("unjudged %d %q, want 1 %q", n, texts, want)
	}
}
