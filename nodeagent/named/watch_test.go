package named_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/named"
	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

// selectors records the field selector of each request for NodeRoutings
// (not the client's discovery).
type selectors struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (s *selectors) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/noderoutings") {
		s.mu.Lock()
		s.seen = append(s.seen, req.URL.Query().Get("fieldSelector"))
		s.mu.Unlock()
	}
	return s.next.RoundTrip(req)
}

// TestReadListsTheObjectByName: with two NodeRoutings in the cluster, a
// watcher of read-a reads read-a afresh from the apiserver (the watch is
// not started), asking for it alone by its name, as the watch lists it;
// a watcher of an object that does not exist reads none, and no error.
func TestReadListsTheObjectByName(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"read-a", "read-b"} {
		nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.Client.Create(ctx, nr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, nr) })
	}
	rec := &selectors{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	watcher := func(name string) *named.Watcher[*enipamv1alpha1.NodeRouting] {
		return named.NewWatcher(c, "NodeRouting", name, func() *enipamv1alpha1.NodeRouting { return &enipamv1alpha1.NodeRouting{} },
			func() client.ObjectList { return &enipamv1alpha1.NodeRoutingList{} }, slog.New(slog.DiscardHandler))
	}

	nr, ok, err := watcher("read-a").Read(ctx)
	if err != nil || !ok || nr.Name != "read-a" || nr.ResourceVersion == "" {
		t.Fatalf("read-a: %v, %v, %v", nr, ok, err)
	}
	if _, ok, err := watcher("read-none").Read(ctx); err != nil || ok {
		t.Errorf("read-none: found %v, error %v; want none and no error", ok, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) != 2 || rec.seen[0] != "metadata.name=read-a" || rec.seen[1] != "metadata.name=read-none" {
		t.Errorf("field selectors sent %q, want metadata.name=read-a then metadata.name=read-none", rec.seen)
	}
}
