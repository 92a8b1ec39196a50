package waiting

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

func slim(t *testing.T, name, node, nominated string, static bool) *Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, UID: types.UID("uid-" + name)}}
	p.Spec.NodeName, p.Status.NominatedNodeName = node, nominated
	if static {
		p.Annotations = map[string]string{enipamv1alpha1.StaticIPAnnotation: "true"}
	}
	obj, err := Slim(p)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*Pod)
}

// TestAPodWaitsOnItsTargetNode: a pod bound to a node waits there; one
// only nominated waits on the nominated node; binding it moves it; its
// removal leaves nothing behind.
func TestAPodWaitsOnItsTargetNode(t *testing.T) {
	s := NewSet()
	s.Put(slim(t, "a", "n1", "", false))
	s.Put(slim(t, "b", "", "n2", true))
	if len(s.On("n1")) != 1 || len(s.On("n2")) != 1 || s.Len() != 2 {
		t.Fatalf("n1 %d, n2 %d, all %d; want 1, 1, 2", len(s.On("n1")), len(s.On("n2")), s.Len())
	}
	if b, _ := s.Get("uid-b"); !b.Static() || b.Owner() != "web/b" {
		t.Errorf("b: static %v, owner %q", b.Static(), b.Owner())
	}
	if old := s.Put(slim(t, "b", "n1", "n2", true)); old == nil || old.Target() != "n2" {
		t.Errorf("rebinding b replaced %v", old)
	}
	if len(s.On("n1")) != 2 || len(s.On("n2")) != 0 {
		t.Errorf("after binding b to n1: n1 %d, n2 %d; want 2, 0", len(s.On("n1")), len(s.On("n2")))
	}
	s.Remove("uid-a")
	s.Remove("uid-b")
	if s.Len() != 0 || len(s.byNode) != 0 {
		t.Errorf("left behind: %d pods, %d nodes", s.Len(), len(s.byNode))
	}
}

// TestAStartedPodCountsUntilListedOrGraceEnds: a pod that left the watch
// counts on its node until the agent lists it or the grace ends, and is
// forgotten then.
func TestAStartedPodCountsUntilListedOrGraceEnds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewStarted(45 * time.Second)
	s.Add("n1", "web/a", t0)
	s.Add("n1", "web/b", t0.Add(30*time.Second))
	s.Add("n2", "web/c", t0)
	none := func(string) bool { return false }
	if n := s.Count("n1", t0.Add(40*time.Second), none); n != 2 {
		t.Errorf("within the grace: %d, want 2", n)
	}
	if n := s.Count("n1", t0.Add(50*time.Second), none); n != 1 {
		t.Errorf("a past its grace: %d, want 1", n)
	}
	if n := s.Count("n1", t0.Add(50*time.Second), func(o string) bool { return o == "web/b" }); n != 0 {
		t.Errorf("b listed: %d, want 0", n)
	}
	s.Sweep(t0.Add(50 * time.Second))
	if s.Len() != 0 {
		t.Errorf("after the sweep: %d kept", s.Len())
	}
}
