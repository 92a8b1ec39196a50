package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/stack"
)

// schedulerConfig is kube-scheduler's configuration for the bench: the
// default profile (no extender: every configuration compared is placed by
// the same scheduler), no leader election.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
`

// startPlainScheduling makes the named nodes schedulable, as their kubelets
// would report them (Ready, room for maxPods pods, the apiserver's
// not-ready taint lifted: no node lifecycle controller runs here), starts
// the real kube-scheduler (bin/k8s/<version>/kube-scheduler) on the
// world's apiserver, and simulated kubelets that give each pod it binds
// its CNI call cniDelay after they see it bound.
func (w *world) startPlainScheduling(ctx context.Context, names []string, maxPods int, cniDelay time.Duration) (*agentsim.Kubelet, error) {
	if err := w.schedulable(ctx, names, maxPods); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(w.dir, "kubeconfig")
	cfgPath := filepath.Join(w.dir, "kube-scheduler.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, schedulerConfig, kubeconfig), 0o600); err != nil {
		return nil, err
	}
	addr, err := cluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	port := addr[strings.LastIndex(addr, ":")+1:]
	w.sched, err = stack.Start(ctx, "kube-scheduler", w.dir, filepath.Join(w.cluster.BinDir, "kube-scheduler"), nil,
		"--config="+cfgPath, "--bind-address=127.0.0.1", "--secure-port="+port)
	if err != nil {
		return nil, err
	}
	k := agentsim.NewKubelet(w.agents, agentsim.KubeletOptions{CNIDelay: cniDelay})
	if err := k.Start(w.agentsCtx); err != nil {
		return nil, err
	}
	return k, nil
}

// schedulable writes each node's status as its kubelet would.
func (w *world) schedulable(ctx context.Context, names []string, maxPods int) error {
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	c := w.cluster.Client
	sem := make(chan struct{}, 16)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				n := &corev1.Node{}
				if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
					return false, nil
				}
				if len(n.Spec.Taints) > 0 {
					n.Spec.Taints = nil
					if err := c.Update(ctx, n); err != nil {
						return false, nil
					}
				}
				n.Status.Capacity, n.Status.Allocatable = room, room
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
				return c.Status().Update(ctx, n) == nil, nil
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %s never became schedulable: %w", name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
