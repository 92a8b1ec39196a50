package e2e

import (
	"fmt"
	"testing"
	"time"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// TestStaticPodsPlacedWhileOrdinaryPodsWait: the three us-east-1a nodes
// each get 16 ordinary pods, more than their pools hold, so pods wait
// while the pools grow (new addresses, new ENIs); the operator is
// restarted, and StatefulSet web of 3 static-IP pods is created in
// us-east-1a at once: each first placement lands on a node whose pool
// is growing under waiting pods. Each static pod runs with its claim's
// address, and the agents' ledger counts no address handed to two pods
// (the kill campaign caught a static pod given its stamped entry over
// an ordinary pod that held it); the pools hold to EC2.
func TestStaticPodsPlacedWhileOrdinaryPodsWait(t *testing.T) {
	w := newStaticWorld(t)
	for _, n := range w.nodes {
		if w.zone[n] != "us-east-1a" {
			continue
		}
		a := w.sim.Agent(n)
		for k := range 16 {
			a.AllocateAsync(fmt.Sprintf("%s/%s-%d", w.ns, n, k), func(agentsim.Result) {})
		}
	}
	w.restartOperator(staticOperatorArgs...)
	w.statefulSetWith("web", 3, map[string]string{enipamv1alpha1.StaticIPAnnotation: string(enipamv1alpha1.ReclaimRetain)})
	ips := map[string]string{}
	for i := range 3 {
		pod := fmt.Sprintf("web-%d", i)
		var node string
		node, ips[pod] = w.running(pod, 2*time.Minute)
		t.Logf("%s on %s with %s", pod, node, ips[pod])
	}
	time.Sleep(2 * time.Second) // the agents' next status writes
	if v := w.sim.Ledger().Violations(); v.Total() != 0 {
		t.Errorf("ledger: %+v %v", v, w.sim.Ledger().ViolationDetails())
	}
	w.onlyIPs(ips)
	w.checkPools(w.sim)
}
