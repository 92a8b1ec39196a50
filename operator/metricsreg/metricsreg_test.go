package metricsreg

import (
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// direct is a Direct collector of one gauge family with a node label.
type direct struct {
	desc  *prometheus.Desc
	name  string
	nodes []string
}

func newDirect(name string, nodes ...string) *direct {
	return &direct{desc: prometheus.NewDesc(name, "Per node.", []string{"node"}, nil), name: name, nodes: nodes}
}

func (d *direct) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *direct) Collect(ch chan<- prometheus.Metric) {
	for _, n := range d.nodes {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, 1, n)
	}
}

func (d *direct) GatherDirect() []*dto.MetricFamily {
	if len(d.nodes) == 0 {
		return nil
	}
	f := &dto.MetricFamily{Name: proto.String(d.name), Help: proto.String("Per node."), Type: dto.MetricType_GAUGE.Enum()}
	for _, n := range d.nodes {
		f.Metric = append(f.Metric, &dto.Metric{
			Label: []*dto.LabelPair{{Name: proto.String("node"), Value: proto.String(n)}},
			Gauge: &dto.Gauge{Value: proto.Float64(1)},
		})
	}
	return []*dto.MetricFamily{f}
}

// gathered is what r's Gather returns: family name and metric count.
func gathered(t *testing.T, r prometheus.Gatherer) ([]string, error) {
	t.Helper()
	fams, err := r.Gather()
	var out []string
	for _, f := range fams {
		out = append(out, f.GetName()+":"+string(rune('0'+len(f.Metric))))
	}
	return out, err
}

// TestDirectCollectorsOfSuccessiveTerms: a Direct collector is gathered
// through GatherDirect among the inner registry's families, in name
// order; a second one of the same names is refused while the first is
// registered (the error names the first), and takes its place once the
// first is unregistered, as the operator's terms do.
func TestDirectCollectorsOfSuccessiveTerms(t *testing.T) {
	inner := prometheus.NewRegistry()
	r := New(inner)
	a := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "A."})
	z := prometheus.NewCounter(prometheus.CounterOpts{Name: "z_total", Help: "Z."})
	r.MustRegister(a, z)
	first := newDirect("m_nodes", "n1", "n2")
	if err := r.Register(first); err != nil {
		t.Fatal(err)
	}
	got, err := gathered(t, r)
	if err != nil || !slices.Equal(got, []string{"a_total:1", "m_nodes:2", "z_total:1"}) {
		t.Fatalf("gathered %v, %v", got, err)
	}
	// Collect is not called: the inner registry holds the descriptors only.
	innerGot, err := gathered(t, inner)
	if err != nil || !slices.Equal(innerGot, []string{"a_total:1", "z_total:1"}) {
		t.Fatalf("inner registry gathered %v, %v", innerGot, err)
	}

	second := newDirect("m_nodes", "n3")
	err = r.Register(second)
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); !ok || are.ExistingCollector != first {
		t.Fatalf("registering a second collector of the same names: %v", err)
	}
	// Another shape of the same name is refused too, as by the inner
	// registry alone.
	clash := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "m_nodes", Help: "Per node."}, []string{"zone"})
	if err := r.Register(clash); err == nil {
		t.Fatal("a gauge of the Direct collector's name and other labels was registered")
	}

	if !r.Unregister(first) {
		t.Fatal("unregistering the first term's collector failed")
	}
	if got, err := gathered(t, r); err != nil || !slices.Equal(got, []string{"a_total:1", "z_total:1"}) {
		t.Fatalf("gathered after unregistering %v, %v", got, err)
	}
	if r.Unregister(first) {
		t.Error("unregistering twice succeeded")
	}
	if err := r.Register(second); err != nil {
		t.Fatal(err)
	}
	if got, err := gathered(t, r); err != nil || !slices.Equal(got, []string{"a_total:1", "m_nodes:1", "z_total:1"}) {
		t.Fatalf("gathered with the second term's collector %v, %v", got, err)
	}
}

// unchecked emits a family of the given name without describing it.
type unchecked struct{ desc *prometheus.Desc }

func (unchecked) Describe(chan<- *prometheus.Desc) {}
func (u unchecked) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(u.desc, prometheus.GaugeValue, 1, "x")
}

// TestDirectFamilyGatheredTwice: a Direct family whose name the inner
// registry gathered too (from an unchecked collector) is left out with
// an error, as the inner registry refuses a series collected twice.
func TestDirectFamilyGatheredTwice(t *testing.T) {
	r := New(prometheus.NewRegistry())
	r.MustRegister(unchecked{prometheus.NewDesc("m_nodes", "Per node.", []string{"node"}, nil)})
	r.MustRegister(newDirect("m_nodes", "n1", "n2"))
	got, err := gathered(t, r)
	if err == nil {
		t.Error("no error for a family gathered twice")
	}
	if !slices.Equal(got, []string{"m_nodes:1"}) {
		t.Errorf("gathered %v, want the inner registry's m_nodes only", got)
	}
}
