package chart

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/cluster"
)

// rbacNamespace is the release namespace of the RBAC tests.
const rbacNamespace = "enipam-rbac"

// installRBAC renders the chart into rbacNamespace and creates only its
// ServiceAccounts, Roles, ClusterRoles and bindings, as an admin; they are
// deleted when the test ends. It returns the whole manifest.
func installRBAC(t *testing.T, extra ...string) manifest {
	t.Helper()
	createNamespace(t, rbacNamespace)
	m := render(t, "enipam", rbacNamespace, append([]string{"--set", "clusterName=rbac", "--set", "fullnameOverride=rbac"}, extra...)...)
	for _, u := range m {
		switch u.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		obj := u.DeepCopy()
		if err := env.Client.Create(bg, obj); err != nil {
			t.Fatalf("creating %s/%s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(bg, obj) })
	}
	return m
}

// as returns a client config that impersonates the chart's ServiceAccount
// name, as the apiserver sees a pod running under it (with the groups
// system:serviceaccounts and system:serviceaccounts:<namespace>), once the
// authorizer has caught up with the new bindings.
func as(t *testing.T, name string, probe authorizationv1.ResourceAttributes) *rest.Config {
	t.Helper()
	return asIn(t, rbacNamespace, name, probe)
}

// asIn is as for a ServiceAccount of another namespace.
func asIn(t *testing.T, namespace, name string, probe authorizationv1.ResourceAttributes) *rest.Config {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name}
	cs := kubernetes.NewForConfigOrDie(cfg)
	err := wait.PollUntilContextTimeout(bg, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &probe},
		}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("%s never allowed to %+v", name, probe)
	}
	return cfg
}

func asClient(t *testing.T, cfg *rest.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// allowed and denied assert the outcome of one call made as the
// ServiceAccount.
func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want allowed", what, err)
	}
}

func denied(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
	}
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockedBuffer collects a running component's logs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logTo sends a component's logs to b, and to the test's output too when
// it runs with -v.
func logTo(b *lockedBuffer) io.Writer {
	if testing.Verbose() {
		return io.MultiWriter(b, os.Stderr)
	}
	return b
}

func httpStatus(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// freeAddr returns a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := cluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
