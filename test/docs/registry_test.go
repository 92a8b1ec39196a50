// Package docs holds the README to the product: the metrics its tables
// list are exactly those the binaries register, with their labels; the
// event reasons its table lists are exactly those the code records.
package docs

import (
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/scheduler/extender"
	"github.com/enipam/enipam/scheduler/tracker"
	"github.com/enipam/enipam/test/cluster"
)

// recorder is a prometheus.Registerer that keeps, for every metric a
// collector describes, its labels: every metric a binary registers,
// including vectors that have no series yet (a scrape shows those only
// once they do).
type recorder map[string][]string

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

func (r recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			panic("cannot read " + d.String())
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		slices.Sort(labels)
		r[m[1]] = labels
	}
	return nil
}

func (r recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r recorder) Unregister(prometheus.Collector) bool { return false }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var env *cluster.Cluster

// TestMain runs a real apiserver: building the operator's manager asks it
// for its API groups.
func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

// operatorMetrics are the metrics enipam-operator registers itself
// (operator.New with every component), beside controller-runtime's own.
func operatorMetrics(t *testing.T) recorder {
	t.Helper()
	rec := recorder{}
	opts := operator.DefaultOptions()
	opts.ClusterName = "docs"
	if _, err := operator.New(opts, env.Config, aws.Config{Region: "us-east-1"}, rec, quiet); err != nil {
		t.Fatalf("building the operator: %v", err)
	}
	return rec
}

// agentMetrics are the metrics enipam-agent registers (agent.New), beside
// the Go and process collectors.
func agentMetrics(t *testing.T) recorder {
	t.Helper()
	rec := recorder{}
	if _, err := agent.New(agent.DefaultConfig("docs"), env.Config, &routingtest.Host{}, rec, quiet); err != nil {
		t.Fatalf("building the agent: %v", err)
	}
	return rec
}

// schedulerMetrics are the metrics enipam-scheduler registers
// (extender.New over its tracker), beside the Go and process collectors.
func schedulerMetrics(t *testing.T) recorder {
	t.Helper()
	scheme, err := tracker.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	opts := extender.NewOptions()
	rec := recorder{}
	if _, err := extender.New(tracker.New(c, opts.Tracker, quiet), c, opts.Config, rec, quiet); err != nil {
		t.Fatalf("building the extender: %v", err)
	}
	return rec
}
