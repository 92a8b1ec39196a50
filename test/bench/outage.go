package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/faultproxy"
	"github.com/enipam/enipam/test/stack"
)

// Outage is the apiserver-outage scenario: two operator replicas with
// leader election serve Nodes nodes, then the apiserver is gone for both
// replicas for Outage (a proxy between them and the apiserver refuses
// every connection) while Joining more nodes join (their kubelets and
// agents still reach it). The figure is the recovery: from the
// apiserver's return to every node served (its pool at pre-allocate
// beyond Cilium's router and health addresses). A replica that exits is
// restarted after the delay a kubelet's crash-loop back-off would apply
// (10 s, doubling per exit, at most 5 minutes). Each replica calls EC2
// through its own recording proxy, and its terms (when it acted) are read
// from its log: a term overlapping another replica's, or a mutation
// outside a term of its sender, is a violation.
type Outage struct {
	Nodes, Joining int
	Outage         time.Duration
	InstanceType   string
	PreAllocate    int
}

// DefaultOutage is 200 nodes and 50 joining during a 90 s outage (50 and
// 20 quick), m5.xlarge with pod addresses on the primary ENI.
func DefaultOutage(quick bool) Outage {
	o := Outage{Nodes: 200, Joining: 50, Outage: 90 * time.Second, InstanceType: "m5.xlarge", PreAllocate: 8}
	if quick {
		o.Nodes, o.Joining = 50, 20
	}
	return o
}

// Name is the scenario's report name.
func (s Outage) Name() string { return "outage" }

// Run runs the scenario.
func (s Outage) Run(ctx context.Context, e *Env) (*Report, error) {
	rep := &Report{Scenario: s.Name(), Started: time.Now(), Params: map[string]any{
		"nodes": s.Nodes, "joiningDuringOutage": s.Joining, "outageSeconds": s.Outage.Seconds(),
		"instanceType": s.InstanceType, "preAllocate": s.PreAllocate, "replicas": 2,
		"ec2":     "ec2sim realistic: EC2 default buckets, mutating calls 150-400 ms, describes 50-150 ms",
		"outage":  "both replicas cut off from the apiserver by a proxy; kubelets and agents keep it",
		"restart": "an exit restarts after 10 s, doubling per exit up to 5 min (a kubelet's crash-loop back-off)",
	}}
	args := []string{fmt.Sprintf("--vpc-id=%s", fleetVPC), fmt.Sprintf("--pre-allocate=%d", s.PreAllocate)}
	w, err := e.startWorld(ctx, s.Name(), fleetScenario(0, s.InstanceType, "", true), args,
		agentsim.Options{UpdateInterval: 15 * time.Second, QPS: 1000, Burst: 2000, Writers: 32})
	if err != nil {
		return nil, err
	}
	defer w.stop()
	if err := w.waitSynced(ctx); err != nil {
		return nil, err
	}
	// The world's single operator gives way to two replicas behind the
	// proxy.
	if err := w.op.Stop(10 * time.Second); err != nil {
		return nil, err
	}
	api, err := faultproxy.New(w.cluster.Config, faultproxy.Options{Seed: 1})
	if err != nil {
		return nil, err
	}
	defer api.Close()
	kc, err := api.KubeConfig()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(w.dir, "kubeconfig-proxied")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	var mutations mutationLog
	replicas := make([]*replica, 2)
	for i := range replicas {
		ec2URL, stop, err := recordingEC2(w.sim.Endpoints.EC2, &mutations, i)
		if err != nil {
			return nil, err
		}
		defer stop()
		replicas[i] = &replica{env: e, dir: w.dir, idx: i, kubeconfig: kubeconfig, ec2: ec2URL,
			args: append(slices.Clone(w.opArgs), "--leader-elect=true", "--leader-election-namespace=default", "--metrics-bind-address=0")}
		if err := replicas[i].start(ctx); err != nil {
			return nil, err
		}
		defer replicas[i].stop()
	}
	full := s.PreAllocate + 2

	e.say("%s: %d %s nodes join two replicas", s.Name(), s.Nodes, s.InstanceType)
	first, err := s.joinAndServe(ctx, w, s.Nodes, full, time.Now().Add(time.Duration(s.Nodes)*time.Second+5*time.Minute))
	if err != nil {
		return nil, err
	}
	if err := w.agents.WaitReady(ctx, len(first)); err != nil {
		return nil, err
	}

	e.say("%s: the apiserver is gone for both replicas for %s; %d nodes join a third of the way in", s.Name(), s.Outage, s.Joining)
	api.Cut(s.Outage)
	cut := time.Now()
	back := cut.Add(s.Outage)
	if err := sleep(ctx, s.Outage/3); err != nil {
		return nil, err
	}
	specs, err := w.launch(ctx, s.Joining, s.InstanceType)
	if err != nil {
		return nil, err
	}
	joining, err := w.join(ctx, specs)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, time.Until(back)); err != nil {
		return nil, err
	}
	e.say("%s: the apiserver is back", s.Name())
	served, err := waitServed(ctx, w, joining, full, time.Now().Add(5*time.Minute+time.Duration(s.Joining)*time.Second))
	if err != nil {
		return nil, err
	}
	var recovery time.Duration
	for _, at := range served {
		recovery = max(recovery, at.Sub(back))
	}
	e.say("%s: every node served %s after the apiserver's return", s.Name(), recovery.Round(100*time.Millisecond))
	if err := w.agents.WaitReady(ctx, len(first)+len(joining)); err != nil {
		return nil, err
	}
	time.Sleep(10 * time.Second)

	terms, exits, starts := []term{}, 0, 0
	for _, r := range replicas {
		t, err := r.terms()
		if err != nil {
			return nil, err
		}
		terms = append(terms, t...)
		r.mu.Lock()
		exits, starts = exits+r.exits, starts+r.starts
		r.mu.Unlock()
	}
	overlaps, outside := checkTerms(terms, mutations.all())
	lost := 0
	for _, t := range terms {
		if t.to.After(cut) && t.to.Before(back) {
			lost++
		}
	}
	figures := w.agents.Figures()
	rep.add("recovery: apiserver back → every node served", recovery, "")
	rep.add("terms (a replica acting under the Lease)", len(terms), "")
	rep.add("terms ended during the outage (Lease lost)", lost, "")
	rep.add("replica processes started", starts, "")
	rep.add("replica exits", exits, "")
	rep.add("EC2 mutations recorded", len(mutations.all()), "")
	rep.add("terms overlapping another replica's", overlaps, "")
	rep.add("EC2 mutations outside a term of their sender", outside, "")
	rep.add("agent violations", figures.Violations.Total(), "")
	rep.target("every node served within 30 s of the apiserver's return", "≤ 30 s", recovery.Round(100*time.Millisecond).String(), recovery <= 30*time.Second)
	violations := overlaps + outside + figures.Violations.Total()
	rep.target("zero violations (one acting replica, routed before handed)", "0", fmt.Sprint(violations), violations == 0)
	pools, err := w.poolFindings(ctx)
	if err != nil {
		return nil, err
	}
	rep.addPoolFindings(pools)
	rep.Ran = Seconds(time.Since(rep.Started))
	return rep, nil
}

// joinAndServe launches n instances, joins them and waits until every
// pool holds full addresses.
func (s Outage) joinAndServe(ctx context.Context, w *world, n, full int, deadline time.Time) ([]string, error) {
	specs, err := w.launch(ctx, n, s.InstanceType)
	if err != nil {
		return nil, err
	}
	names, err := w.join(ctx, specs)
	if err != nil {
		return nil, err
	}
	_, err = waitServed(ctx, w, names, full, deadline)
	return names, err
}

// waitServed waits until every named node's pool held full addresses and
// returns when each first did.
func waitServed(ctx context.Context, w *world, names []string, full int, deadline time.Time) (map[string]time.Time, error) {
	reached := map[string]time.Time{}
	for len(reached) < len(names) {
		for _, name := range names {
			if _, ok := reached[name]; ok {
				continue
			}
			if at, ok := w.agents.Agent(name).PoolReachedAt(full); ok {
				reached[name] = at
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d nodes reached %d IPs before the deadline", len(reached), len(names), full)
		}
		if len(reached) < len(names) {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	return reached, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// replica keeps one enipam-operator process running as a kubelet would:
// one that exits is started again after the crash-loop back-off.
type replica struct {
	env             *Env
	dir             string
	idx             int
	kubeconfig, ec2 string
	args            []string

	mu      sync.Mutex
	cur     *stack.Process
	procs   []*process
	starts  int
	exits   int
	stopped bool
}

// process is one run of a replica: its log and when it ended.
type process struct {
	log   string
	ended time.Time
}

// crashLoopBackOff is a kubelet's delay before the n-th restart (n ≥ 1).
func crashLoopBackOff(n int) time.Duration {
	d := 10 * time.Second
	for range n - 1 {
		d *= 2
		if d >= 5*time.Minute {
			return 5 * time.Minute
		}
	}
	return d
}

func (r *replica) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.starts++
	name := fmt.Sprintf("enipam-operator-r%d-%d", r.idx, r.starts)
	p, err := stack.StartOperator(ctx, r.env.Bins.Operator, r.dir, name, r.kubeconfig, r.ec2, "bench", r.args...)
	if err != nil {
		return err
	}
	r.cur = p
	proc := &process{log: p.LogPath}
	r.procs = append(r.procs, proc)
	go func() {
		<-p.Done()
		r.mu.Lock()
		proc.ended = time.Now()
		if r.stopped || ctx.Err() != nil {
			r.mu.Unlock()
			return
		}
		r.exits++
		delay := crashLoopBackOff(r.exits)
		r.mu.Unlock()
		r.env.say("replica %d exited (%d so far); restarting in %s", r.idx, r.exits, delay)
		if sleep(ctx, delay) == nil {
			if err := r.start(ctx); err != nil {
				r.env.say("restarting replica %d: %v", r.idx, err)
			}
		}
	}()
	return nil
}

func (r *replica) stop() {
	r.mu.Lock()
	r.stopped = true
	p := r.cur
	r.mu.Unlock()
	if p != nil {
		_ = p.Stop(10 * time.Second)
	}
}

// term is a span during which a replica acted: from its "leading:
// acting" log line to its "stopped acting" one (or the end of its
// process; zero while it still acts).
type term struct {
	replica  int
	from, to time.Time
}

// terms reads the replica's terms from the logs of its processes.
func (r *replica) terms() ([]term, error) {
	r.mu.Lock()
	procs := slices.Clone(r.procs)
	ended := make([]time.Time, len(procs))
	for i, p := range procs {
		ended[i] = p.ended
	}
	r.mu.Unlock()
	var out []term
	for i, p := range procs {
		f, err := os.Open(p.log)
		if err != nil {
			return nil, err
		}
		var open *term
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case "leading: acting":
				open = &term{replica: r.idx, from: line.Time}
			case "stopped acting":
				if open != nil {
					open.to = line.Time
					out = append(out, *open)
					open = nil
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
		if open != nil {
			open.to = ended[i] // zero while the process runs
			out = append(out, *open)
		}
	}
	return out, nil
}

// mutation is an EC2 call other than a Describe, as a replica's proxy saw
// it arrive.
type mutation struct {
	replica int
	action  string
	at      time.Time
}

type mutationLog struct {
	mu sync.Mutex
	ms []mutation
}

func (l *mutationLog) add(m mutation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ms = append(l.ms, m)
}

func (l *mutationLog) all() []mutation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ms)
}

// recordingEC2 serves a proxy to the EC2 endpoint target that records the
// mutations replica sends through it.
func recordingEC2(target string, log *mutationLog, replica int) (string, func(), error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if form, err := url.ParseQuery(string(body)); err == nil {
			if action := form.Get("Action"); action != "" && !strings.HasPrefix(action, "Describe") {
				log.add(mutation{replica: replica, action: action, at: time.Now()})
			}
		}
		proxy.ServeHTTP(w, req)
	}))
	return srv.URL, srv.Close, nil
}

// checkTerms counts the terms that overlap a term of another replica and
// the mutations sent outside every term of their sender.
func checkTerms(terms []term, ms []mutation) (overlaps, outside int) {
	end := func(t term) time.Time {
		if t.to.IsZero() {
			return time.Now()
		}
		return t.to
	}
	for i, a := range terms {
		for _, b := range terms[i+1:] {
			if a.replica != b.replica && a.from.Before(end(b)) && b.from.Before(end(a)) {
				overlaps++
			}
		}
	}
	for _, m := range ms {
		in := slices.ContainsFunc(terms, func(t term) bool {
			return t.replica == m.replica && !m.at.Before(t.from) && !m.at.After(end(t))
		})
		if !in {
			outside++
		}
	}
	return overlaps, outside
}
