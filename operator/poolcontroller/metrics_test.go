package poolcontroller

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestWriteFailuresTellConflictsApart: the scale-up bench's "no CiliumNode
// write conflict" reads this counter, so a conflict must be counted as one
// and nothing else must.
func TestWriteFailuresTellConflictsApart(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	gr := schema.GroupResource{Group: "cilium.io", Resource: "ciliumnodes"}
	m.writeFailed("spec", apierrors.NewConflict(gr, "node-a", errors.New("the object has been modified")))
	m.writeFailed("spec", apierrors.NewTimeoutError("slow", 1))
	m.writeFailed("status", errors.New("connection refused"))
	for _, c := range []struct {
		part, reason string
		want         float64
	}{
		{"spec", "conflict", 1},
		{"spec", "other", 1},
		{"status", "other", 1},
		{"status", "conflict", 0},
	} {
		var got dto.Metric
		if err := m.writeFailures.WithLabelValues(c.part, c.reason).Write(&got); err != nil {
			t.Fatal(err)
		}
		if got.GetCounter().GetValue() != c.want {
			t.Errorf("%s/%s = %v, want %v", c.part, c.reason, got.GetCounter().GetValue(), c.want)
		}
	}
}
