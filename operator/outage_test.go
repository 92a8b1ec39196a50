package operator_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/faultproxy"
)

// actingLog orders what two replicas do: their terms starting and
// stopping (Operator.OnTerm) and the EC2 mutations each sends (seen by
// its own proxy to ec2sim), in one sequence.
type actingLog struct {
	mu     sync.Mutex
	events []actingEvent
}

type actingEvent struct {
	replica int
	// kind is "start", "stop" or the EC2 action.
	kind string
}

func (l *actingLog) add(replica int, kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, actingEvent{replica, kind})
}

// check replays the log: no term starts while another replica acts, and
// every mutation comes from a replica that acts. It returns the
// violations and the terms started.
func (l *actingLog) check() (violations []string, terms int, mutations int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	acting := map[int]bool{}
	for i, e := range l.events {
		switch e.kind {
		case "start":
			terms++
			for other, on := range acting {
				if on && other != e.replica {
					violations = append(violations, fmt.Sprintf("event %d: replica %d started acting while replica %d acts", i, e.replica, other))
				}
			}
			acting[e.replica] = true
		case "stop":
			acting[e.replica] = false
		default:
			mutations++
			if !acting[e.replica] {
				violations = append(violations, fmt.Sprintf("event %d: replica %d called %s while not acting", i, e.replica, e.kind))
			}
		}
	}
	return violations, terms, mutations
}

// TestLeaderStandsByThroughAnAPIServerOutage: two replicas with leader
// election reach the apiserver through a proxy that cuts them off for
// 30 s (twice the Lease's 15 s), each calling EC2 through its own
// recording proxy to the same ec2sim; a node joins during the outage →
// the leader stops acting once it cannot renew the Lease, neither replica
// exits, one of them leads again once the apiserver is back and fills the
// new node's pool; no term starts while another replica acts and every
// EC2 mutation comes from the replica acting at the time.
func TestLeaderStandsByThroughAnAPIServerOutage(t *testing.T) {
	r := newRig(t, vpcScenario)
	api, err := faultproxy.New(env.Config, faultproxy.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	var log actingLog
	leaseName := fmt.Sprintf("enipam-outage-%d", time.Now().UnixNano())
	exited := make(chan string, 2)
	for i := range 2 {
		target, _ := url.Parse(r.ec2)
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			form, _ := url.ParseQuery(string(body))
			if action := form.Get("Action"); action != "" && !strings.HasPrefix(action, "Describe") {
				log.add(i, action)
			}
			proxy.ServeHTTP(w, req)
		}))
		t.Cleanup(srv.Close)
		opts := r.options()
		opts.EC2Endpoint = srv.URL
		opts.LeaderElect, opts.LeaderNamespace, opts.LeaderElectionID = true, "default", leaseName
		awsCfg := aws.Config{
			Region:      "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider(ec2sim.DefaultAccessKeyID, ec2sim.DefaultSecretAccessKey, ""),
		}
		var out io.Writer = io.Discard
		if testing.Verbose() {
			out = os.Stderr
		}
		op, err := operator.New(opts, api.Config(), awsCfg, prometheus.NewRegistry(),
			slog.New(slog.NewTextHandler(out, nil)).With("replica", i))
		if err != nil {
			t.Fatal(err)
		}
		op.OnTerm(func(acting bool) {
			if acting {
				log.add(i, "start")
			} else {
				log.add(i, "stop")
			}
		})
		ctx, cancel := context.WithCancel(r.ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := op.Run(ctx); ctx.Err() == nil {
				exited <- fmt.Sprintf("replica %d exited: %v", i, err)
			}
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("replica %d did not stop within 30s", i)
			}
		})
	}

	r.addNode("node-o1", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-o1", 60*time.Second, "pool filled", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })

	const outage = 30 * time.Second
	api.Cut(outage)
	cutEnds := time.Now().Add(outage)
	time.Sleep(outage / 3)
	r.addNode("node-o2", "i-0a000000000000002", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	time.Sleep(time.Until(cutEnds))
	_, termsDuringOutage, _ := log.check()
	r.waitNode("node-o2", 90*time.Second, "pool filled after the outage", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })

	select {
	case msg := <-exited:
		t.Fatal(msg)
	default:
	}
	violations, terms, mutations := log.check()
	for _, v := range violations {
		t.Error(v)
	}
	log.mu.Lock()
	stops := 0
	for _, e := range log.events {
		if e.kind == "stop" {
			stops++
		}
	}
	log.mu.Unlock()
	t.Logf("terms %d (%d by the outage's end), stops %d, EC2 mutations %d", terms, termsDuringOutage, stops, mutations)
	if stops == 0 || terms < 2 {
		t.Errorf("terms started %d, stopped %d: the leader never lost its Lease in the outage", terms, stops)
	}
	if mutations == 0 {
		t.Error("no EC2 mutation recorded: nothing was checked")
	}
}
