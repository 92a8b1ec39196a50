package poolcontroller

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
)

const (
	nodeIPsHeader    = "# HELP enipam_node_ips IPs of a node's pool: available (may be handed out), used (by pods, as Cilium's agent reports), waiting (pods bound to the node without an address yet), headroom (free IPs kept beyond used and waiting), needed (missing for the pool's target), short (the part of needed the instance has room for: its usable ENIs' free slots and its free ENI slots; 0 on a node at capacity), awaiting (assigned, waiting for the agent's routes), max (the largest pool the node can reach).\n# TYPE enipam_node_ips gauge\n"
	nodePolicyHeader = "# HELP enipam_node_policy 1 for each node, labelled with the ENIPolicy governing it (empty: none, the operator's defaults); join on node to sum other series per policy.\n# TYPE enipam_node_policy gauge\n"
)

// scrape serves one request for /metrics from reg through promhttp, as
// the operator's metrics endpoint does (openMetrics: the handler offers
// OpenMetrics too), with accept as the Accept header.
func scrape(t *testing.T, reg prometheus.Gatherer, openMetrics bool, accept string) (string, []byte) {
	t.Helper()
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError, EnableOpenMetrics: openMetrics})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Header().Get("Content-Type"), rec.Body.Bytes()
}

// nodeLines keeps the lines of the per-node families, in their order.
func nodeLines(body []byte) string {
	var b strings.Builder
	for line := range strings.SplitSeq(string(body), "\n") {
		for _, name := range []string{"enipam_node_ips", "enipam_node_policy"} {
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, "# HELP "+name+" ") || strings.HasPrefix(line, "# TYPE "+name+" ") {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// TestNodeSeriesExposition: a scrape of /metrics shows each node's
// enipam_node_ips states that were set (node-cap: only the capacity's,
// no policy series before its first decision), the policy of its last
// decision (node-9 moved from fast to slow), none of a forgotten node
// (node-gone), sorted as Prometheus's registry sorts them (node-10
// before node-9); in the text format, OpenMetrics and protobuf alike.
func TestNodeSeriesExposition(t *testing.T) {
	reg, g := servedRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.observeNode("node-9", "fast", 5, 3, 1, 2, 0, 0)
	m.observeCapacity("node-9", 0, 29)
	m.observeNode("node-9", "slow", 6, 2, 0, 4, 1, 1)
	m.observeCapacity("node-cap", 4, 58)
	m.observeNode("node-gone", "fast", 1, 1, 1, 1, 1, 1)
	m.observeCapacity("node-gone", 1, 14)
	m.observeNode("node-10", "", 14, 0, 0, 14, 0, 0)
	m.forget("node-gone")
	m.observeNode("node-a\"b", "fast", 1, 2, 3, 4, 5, 6)

	want := nodeIPsHeader +
		`enipam_node_ips{node="node-10",state="available"} 14
enipam_node_ips{node="node-10",state="headroom"} 14
enipam_node_ips{node="node-10",state="needed"} 0
enipam_node_ips{node="node-10",state="short"} 0
enipam_node_ips{node="node-10",state="used"} 0
enipam_node_ips{node="node-10",state="waiting"} 0
enipam_node_ips{node="node-9",state="available"} 6
enipam_node_ips{node="node-9",state="awaiting"} 0
enipam_node_ips{node="node-9",state="headroom"} 4
enipam_node_ips{node="node-9",state="max"} 29
enipam_node_ips{node="node-9",state="needed"} 1
enipam_node_ips{node="node-9",state="short"} 1
enipam_node_ips{node="node-9",state="used"} 2
enipam_node_ips{node="node-9",state="waiting"} 0
enipam_node_ips{node="node-a\"b",state="available"} 1
enipam_node_ips{node="node-a\"b",state="headroom"} 4
enipam_node_ips{node="node-a\"b",state="needed"} 5
enipam_node_ips{node="node-a\"b",state="short"} 6
enipam_node_ips{node="node-a\"b",state="used"} 2
enipam_node_ips{node="node-a\"b",state="waiting"} 3
enipam_node_ips{node="node-cap",state="awaiting"} 4
enipam_node_ips{node="node-cap",state="max"} 58
` + nodePolicyHeader +
		`enipam_node_policy{node="node-10",policy=""} 1
enipam_node_policy{node="node-9",policy="slow"} 1
enipam_node_policy{node="node-a\"b",policy="fast"} 1
`
	ctype, body := scrape(t, g, false, "")
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Errorf("content type %q, want text", ctype)
	}
	if got := nodeLines(body); got != want {
		t.Errorf("text exposition:\n%s\nwant:\n%s", got, want)
	}
	ctype, body = scrape(t, g, true, "application/openmetrics-text; version=1.0.0; charset=utf-8")
	if !strings.HasPrefix(ctype, "application/openmetrics-text") {
		t.Errorf("content type %q, want OpenMetrics", ctype)
	}
	// OpenMetrics writes a float's value with its decimal point.
	wantOM := regexp.MustCompile(`(?m) (\d+)$`).ReplaceAllString(want, " $1.0")
	if got := nodeLines(body); got != wantOM {
		t.Errorf("OpenMetrics exposition:\n%s\nwant:\n%s", got, wantOM)
	}
	if !bytes.HasSuffix(body, []byte("# EOF\n")) {
		t.Errorf("OpenMetrics exposition does not end with # EOF")
	}

	// Protobuf: the same families as the text format parses to.
	ctype, body = scrape(t, g, false, "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
	if !strings.HasPrefix(ctype, "application/vnd.google.protobuf") {
		t.Errorf("content type %q, want protobuf", ctype)
	}
	got := map[string]*dto.MetricFamily{}
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		got[f.GetName()] = &f
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := p.TextToMetricFamilies(strings.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range parsed {
		if !proto.Equal(got[name], f) {
			t.Errorf("protobuf %s:\n%v\nwant\n%v", name, got[name], f)
		}
	}
}

// fillNodes observes n nodes as a steady cluster's reconciles do: every
// state and the policy set.
func fillNodes(m *Metrics, n int) {
	policies := []string{"", "general", "batch", "latency"}
	for i := range n {
		node := fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i/65536, i/256%256, i%256)
		m.observeNode(node, policies[i%len(policies)], 8+i%7, 20+i%13, i%3, 8, i%5, i%2)
		m.observeCapacity(node, i%4, 58)
	}
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkScrape5000Nodes serves /metrics once per iteration with the
// per-node series of 5000 nodes (45000 series), text format as
// Prometheus asks for it (gzip) and without compression.
func BenchmarkScrape5000Nodes(b *testing.B) {
	for _, enc := range []string{"identity", "gzip"} {
		b.Run(enc, func(b *testing.B) {
			reg, g := servedRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				b.Fatal(err)
			}
			fillNodes(m, 5000)
			h := promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.9,*/*;q=0.1")
			req.Header.Set("Accept-Encoding", enc)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(&discard{h: http.Header{}}, req)
			}
		})
	}
}

// TestNodeSeriesExpositionOfManyNodes: 2000 nodes with random states,
// policies and forgotten nodes expose, through the operator's registry,
// the very bytes (text) and families (protobuf) that a plain
// prometheus.Registry gathers from the series' Collect.
func TestNodeSeriesExpositionOfManyNodes(t *testing.T) {
	reg, g := servedRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	plain := prometheus.NewRegistry()
	plain.MustRegister(m.nodes)
	rng := rand.New(rand.NewPCG(27, 5000))
	policies := []string{"", "general", "batch", "la\\tency\n"}
	for range 6000 {
		node := fmt.Sprintf("ip-10-0-%d-%d", rng.IntN(8), rng.IntN(300))
		switch rng.IntN(4) {
		case 0:
			m.observeCapacity(node, rng.IntN(5), rng.IntN(1000))
		case 1:
			m.forget(node)
		default:
			m.observeNode(node, policies[rng.IntN(len(policies))], rng.IntN(300)-3, rng.IntN(300), rng.IntN(5), rng.IntN(20), rng.IntN(50), rng.IntN(50))
		}
	}
	for _, accept := range []string{"", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"} {
		_, got := scrape(t, g, false, accept)
		_, want := scrape(t, plain, false, accept)
		if accept != "" {
			// The served registry holds the process's other metrics too.
			got = protoFamilies(t, got, "enipam_node_ips", "enipam_node_policy")
			want = protoFamilies(t, want, "enipam_node_ips", "enipam_node_policy")
		} else {
			got, want = []byte(nodeLines(got)), []byte(nodeLines(want))
		}
		if len(want) < 10000 {
			t.Fatalf("accept %q: only %d bytes of node series", accept, len(want))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("accept %q: the served registry's node series differ from the plain registry's", accept)
		}
	}
}

// protoFamilies keeps the named families of a protobuf exposition, in
// its order, each as its wire bytes.
func protoFamilies(t *testing.T, body []byte, names ...string) []byte {
	t.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []byte
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(names, f.GetName()) {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
	}
}

// TestScrapeAllocationsDoNotGrowWithNodes: a scrape through the
// operator's registry allocates as often with 5000 nodes (45 000 series)
// as with 50: the per-node series come in slabs, not a few objects per
// series (some 14 per series through a plain registry).
func TestScrapeAllocationsDoNotGrowWithNodes(t *testing.T) {
	allocs := map[int]float64{}
	for _, n := range []int{50, 5000} {
		reg, g := servedRegistry()
		m, err := NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		fillNodes(m, n)
		h := promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		allocs[n] = testing.AllocsPerRun(3, func() { h.ServeHTTP(&discard{h: http.Header{}}, req) })
	}
	t.Logf("allocations per scrape: %v with 50 nodes, %v with 5000", allocs[50], allocs[5000])
	// Sorting and the interned gauges' and policies' maps may take a
	// few more with more nodes; a per-series cost would take 45 000.
	if allocs[5000] > allocs[50]+100 {
		t.Errorf("a scrape allocates %v times with 5000 nodes, %v with 50", allocs[5000], allocs[50])
	}
}
