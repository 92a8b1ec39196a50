package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/enipam/enipam/test/stack"
)

// supervisor keeps one enipam-operator running, as a Deployment's
// kubelet would: it SIGKILLs it on demand and starts a new one at once,
// and restarts one that exits on its own after a second (a replica that
// loses its Lease stands by, but one whose term cannot stop in time
// exits). Each process logs to enipam-operator-<n>.log.
type supervisor struct {
	bin, dir, kubeconfig, ec2 string
	args                      []string
	say                       func(string, ...any)

	mu      sync.Mutex
	ctx     context.Context
	cur     *stack.Process
	starts  int
	kills   int
	exits   int
	stopped bool
	// lastExit is the tail of the last process that exited on its own.
	lastExit string
}

// maxExits stops the restarts of an operator that cannot run at all.
const maxExits = 30

func newSupervisor(bin, dir, kubeconfig, ec2 string, args []string, say func(string, ...any)) *supervisor {
	return &supervisor{bin: bin, dir: dir, kubeconfig: kubeconfig, ec2: ec2, args: args, say: say}
}

// start runs the first process; the supervisor stops with ctx.
func (s *supervisor) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx = ctx
	return s.startLocked()
}

func (s *supervisor) startLocked() error {
	s.starts++
	p, err := stack.StartOperator(s.ctx, s.bin, s.dir, fmt.Sprintf("enipam-operator-%d", s.starts), s.kubeconfig, s.ec2, clusterName, s.args...)
	if err != nil {
		return err
	}
	s.cur = p
	go s.watch(p)
	return nil
}

// watch restarts p's successor if p exits without being killed.
func (s *supervisor) watch(p *stack.Process) {
	<-p.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.cur != p || s.ctx.Err() != nil {
		return
	}
	s.exits++
	s.lastExit = p.Tail(5)
	s.say("enipam-operator-%d exited on its own (%d so far); restarting in 1s", s.starts, s.exits)
	if s.exits > maxExits {
		s.say("enipam-operator exited %d times; no more restarts", s.exits)
		return
	}
	s.cur = nil
	time.AfterFunc(time.Second, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stopped || s.cur != nil || s.ctx.Err() != nil {
			return
		}
		if err := s.startLocked(); err != nil {
			s.say("restarting enipam-operator: %v", err)
		}
	})
}

// kill SIGKILLs the running operator and starts a new one at once.
func (s *supervisor) kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("supervisor stopped")
	}
	if p := s.cur; p != nil {
		s.cur = nil
		p.Kill()
		s.kills++
	}
	return s.startLocked()
}

// running is the current process, nil between an exit and its restart.
func (s *supervisor) running() *stack.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// counts returns the starts, kills and exits on its own so far.
func (s *supervisor) counts() (starts, kills, exits int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts, s.kills, s.exits
}

// stop ends the running operator and every restart.
func (s *supervisor) stop() {
	s.mu.Lock()
	s.stopped = true
	p := s.cur
	s.mu.Unlock()
	if p != nil {
		_ = p.Stop(10 * time.Second)
	}
}
