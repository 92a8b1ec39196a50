package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/enipam/enipam/internal/version"
	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

// TestBinaryServesTheVerbsProbesAndMetrics: the composition root,
// in-process, against the real apiserver through a kubeconfig file, with
// one CiliumNode holding a free address. /healthz answers 200, /readyz
// 200 once the caches are synced; POST /filter passes that node and
// refuses one without a CiliumNode; /metrics exports the extender's
// series; cancelling the context stops it cleanly.
func TestBinaryServesTheVerbsProbesAndMetrics(t *testing.T) {
	ctx := context.Background()
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-7-7.ec2.internal"}}
	if err := env.Client.Create(ctx, cn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cn) })
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.7.20": {Resource: "eni-1"}}
	if err := env.Client.Update(ctx, cn); err != nil {
		t.Fatal(err)
	}

	kubeconfig, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	api, health, metrics := freeAddr(t), freeAddr(t), freeAddr(t)
	runCtx, cancel := context.WithCancel(ctx)
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"--kubeconfig", path, "--address", api, "--health-address", health, "--metrics-address", metrics}, io.Discard, &logs)
	}()

	answers := func(url string, code int, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		var last string
		for {
			resp, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = fmt.Sprintf("%d %s", resp.StatusCode, b)
				if resp.StatusCode == code && strings.Contains(string(b), want) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s never answered %d with %q (last: %v %s)\nlogs:\n%s", url, code, want, err, last, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	answers("http://"+health+"/healthz", 200, "ok")
	answers("http://"+health+"/readyz", 200, "ok")

	body, _ := json.Marshal(extenderv1.ExtenderArgs{
		Pod:       &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", UID: "uid-web-1"}},
		NodeNames: &[]string{cn.Name, "no-cilium"},
	})
	resp, err := http.Post("http://"+api+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var res extenderv1.ExtenderFilterResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if res.NodeNames == nil || len(*res.NodeNames) != 1 || (*res.NodeNames)[0] != cn.Name || !strings.HasPrefix(res.FailedAndUnresolvableNodes["no-cilium"], "no CiliumNode") {
		t.Errorf("filter answered %+v", res)
	}
	answers("http://"+metrics+"/metrics", 200, `enipam_scheduler_requests_total{result="ok",verb="filter"} 1`)
	answers("http://"+metrics+"/metrics", 200, "enipam_scheduler_holds 1")

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run returned %v after cancel", err)
	}
}

// TestBinaryRefusesInvalidFlags: bad settings stop the program before it
// touches anything, with the reason.
func TestBinaryRefusesInvalidFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--settle-timeout", "1m", "--hold-ttl", "30s"}, "must be shorter than --hold-ttl"},
		{[]string{"--address", ""}, "--address is required"},
		{[]string{"--health-address", ":9887"}, "cannot share the address :9887"},
		{[]string{"--log-level", "loud"}, `log level "loud"`},
	} {
		err := run(context.Background(), tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %v = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// syncBuffer collects the program's logs while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := cluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestVersionFlag: --version prints the version on stdout and returns
// before reaching the apiserver (no kubeconfig here).
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out, io.Discard); err != nil {
		t.Fatalf("--version: %v", err)
	}
	if want := "enipam-scheduler " + version.Get() + " "; !strings.HasPrefix(out.String(), want) {
		t.Errorf("--version printed %q, want %q…", out.String(), want)
	}
}
