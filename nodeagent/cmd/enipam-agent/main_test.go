package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

// TestBinaryServesProbesAndMetrics: the composition root, in-process,
// against the real apiserver through a kubeconfig file, for a node whose
// NodeRouting and CiliumNode do not exist (so nothing on this host is ever
// converged). /healthz answers 200, /readyz 503 naming the missing
// NodeRouting, /metrics
// exports the agent's series; cancelling the context stops it cleanly.
func TestBinaryServesProbesAndMetrics(t *testing.T) {
	kubeconfig, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	health, metrics := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", path, "--health-address", health, "--metrics-address", metrics}, "no-such-node", &logs)
	}()

	// answers polls url until it answers code with a body containing want.
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
	answers("http://"+health+"/readyz", 503, "NodeRouting no-such-node not found")
	answers("http://"+metrics+"/metrics", 200, "enipam_agent_ready 0")

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run returned %v after cancel", err)
	}
}

// TestBinaryRefusesInvalidFlags: bad settings stop the program before it
// touches anything, with the reason.
func TestBinaryRefusesInvalidFlags(t *testing.T) {
	err := run(context.Background(), []string{"--ingress-rule-priority", "500"}, "node-1", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ingress rule priority") {
		t.Errorf("run = %v, want the ingress priority refused", err)
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

// freeAddr returns a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := cluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
