// Package stack runs enipam's real binaries for end-to-end tests, the
// benchmarks and the demo: it builds them from this repository, starts
// ec2sim on a free port and enipam-operator against a kubeconfig, keeps
// their output in files, and reads their CPU time and peak memory from
// /proc.
package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/enipam/enipam/nodeagent/metadata"
	"github.com/enipam/enipam/test/ec2sim"
)

// Binaries are the built commands.
type Binaries struct {
	Operator string
	Agent    string
	EC2Sim   string
	// CLI is the enipam command (enipam max-pods).
	CLI string
}

// Build compiles enipam-operator, enipam-agent, the enipam command and
// ec2sim from the repository at root into dir (the Go build cache makes a
// rebuild cheap).
func Build(ctx context.Context, root, dir string) (Binaries, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator),
		"./operator/cmd/enipam-operator", "./nodeagent/cmd/enipam-agent", "./operator/cmd/enipam", "./test/ec2sim/cmd/ec2sim")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("building binaries: %v\n%s", err, out)
	}
	return Binaries{
		Operator: filepath.Join(dir, "enipam-operator"),
		Agent:    filepath.Join(dir, "enipam-agent"),
		EC2Sim:   filepath.Join(dir, "ec2sim"),
		CLI:      filepath.Join(dir, "enipam"),
	}, nil
}

// Process is a started binary.
type Process struct {
	Name string
	// LogPath holds its stdout and stderr.
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Start runs bin with args and extra environment, its output in
// logDir/<name>.log. The process ends with ctx or Stop.
func Start(ctx context.Context, name, logDir, bin string, env []string, args ...string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig kills the child when the *thread* that started it ends, so
	// the start and the wait happen on one locked thread that lives as long
	// as the child: a crashed test leaves no process behind, and a test
	// that retires threads (network namespaces do) kills none early.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s, %w", name, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			p.Stop(10 * time.Second)
		case <-p.done:
		}
	}()
	return p, nil
}

// PID is the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has ended, whatever ended it.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to grace, then kills; it returns the exit
// error unless the process ended by the signal.
func (p *Process) Stop(grace time.Duration) error {
	if p.Exited() {
		return p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() {
		return nil
	}
	return p.err
}

// Kill ends the process at once, as a crash would.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Tail returns the last lines of the process's output.
func (p *Process) Tail(lines int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// Usage is what a process consumed so far.
type Usage struct {
	CPUSeconds float64
	// PeakRSSBytes is the high-water mark of its resident memory.
	PeakRSSBytes int64
	RSSBytes     int64
	// FileRSSBytes is the part of RSSBytes that maps files: the binary's
	// pages, whatever the process holds.
	FileRSSBytes int64
	// AnonRSSBytes is the part of RSSBytes that maps no file: the Go
	// heap, stacks and the runtime's own memory.
	AnonRSSBytes int64
}

// Usage reads /proc/<pid>/stat and status.
func (p *Process) Usage() (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID()))
	if err != nil {
		return u, err
	}
	// Fields after the command name (which may hold spaces) start at ')'.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return u, fmt.Errorf("short /proc stat")
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	u.CPUSeconds = (utime + stime) / 100 // USER_HZ is 100 on Linux
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch key {
		case "VmHWM":
			u.PeakRSSBytes = kb << 10
		case "VmRSS":
			u.RSSBytes = kb << 10
		case "RssFile":
			u.FileRSSBytes = kb << 10
		case "RssAnon":
			u.AnonRSSBytes = kb << 10
		}
	}
	return u, nil
}

// EC2Sim is a running ec2sim.
type EC2Sim struct {
	*Process
	Endpoints ec2sim.Endpoints
	Admin     *ec2sim.AdminClient

	// imds are the metadata readers of the instances, by ID.
	imdsMu sync.Mutex
	imds   map[string]*metadata.Reader
}

// LocalIPv4s reads the instance metadata's local-ipv4s of the ENI with
// mac on instanceID, as enipam-agent does to confirm a remap (the
// confirmation AWS documents for a reassigned address), through the
// instance's own IMDS endpoint. It answers agentsim's remap queries
// (agentsim.RoutingOptions.Metadata).
func (s *EC2Sim) LocalIPv4s(ctx context.Context, instanceID, mac string) ([]string, error) {
	s.imdsMu.Lock()
	r, ok := s.imds[instanceID]
	s.imdsMu.Unlock()
	if !ok {
		endpoint, err := s.Admin.IMDSEndpoint(ctx, instanceID)
		if err != nil {
			return nil, err
		}
		r = metadata.New(endpoint)
		s.imdsMu.Lock()
		if s.imds == nil {
			s.imds = map[string]*metadata.Reader{}
		}
		s.imds[instanceID] = r
		s.imdsMu.Unlock()
	}
	return r.LocalIPv4s(ctx, mac)
}

// StartEC2Sim runs ec2sim with a scenario file (or "demo") on a free port
// and waits until it serves.
func StartEC2Sim(ctx context.Context, bin, logDir, scenario string, args ...string) (*EC2Sim, error) {
	ready := filepath.Join(logDir, "ec2sim.ready.json")
	_ = os.Remove(ready)
	p, err := Start(ctx, "ec2sim", logDir, bin, nil,
		append([]string{"--scenario", scenario, "--listen", "127.0.0.1:0", "--ready-file", ready}, args...)...)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(ready)
		if err == nil {
			var ep ec2sim.Endpoints
			if err := json.Unmarshal(data, &ep); err != nil {
				return nil, fmt.Errorf("ec2sim ready file: %w", err)
			}
			return &EC2Sim{Process: p, Endpoints: ep, Admin: ec2sim.NewAdminClient(ep.Admin, nil)}, nil
		}
		if p.Exited() || time.Now().After(deadline) {
			p.Stop(time.Second)
			return nil, fmt.Errorf("ec2sim did not start:\n%s", p.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// OperatorEnv is the environment of an operator talking to ec2sim: the
// default principal's credentials (a scenario's, unless it names others;
// its clusterName must be cluster for the IAM policy to let the operator
// allocate and release Elastic IPs), a region, no instance metadata.
func OperatorEnv(cluster string) []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + ec2sim.DefaultAccessKeyID, "AWS_SECRET_ACCESS_KEY=" + ec2sim.DefaultSecretAccessKey, "AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "CLUSTER_NAME=" + cluster,
	}
}

// StartOperator runs enipam-operator against kubeconfig and an EC2
// endpoint, without leader election or listeners unless args say so.
func StartOperator(ctx context.Context, bin, logDir, name, kubeconfig, ec2Endpoint, cluster string, args ...string) (*Process, error) {
	base := []string{
		"--kubeconfig", kubeconfig, "--ec2-endpoint", ec2Endpoint,
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
	}
	return Start(ctx, name, logDir, bin, OperatorEnv(cluster), append(base, args...)...)
}

// StartControllerManager runs kube-controller-manager (built by `make
// tools` into binDir) against kubeconfig with only the StatefulSet and
// garbage-collector controllers, no leader election and no serving port:
// StatefulSets create and recreate their pods, and objects owned by a
// deleted one go.
func StartControllerManager(ctx context.Context, binDir, logDir, kubeconfig string) (*Process, error) {
	return Start(ctx, "kube-controller-manager", logDir, filepath.Join(binDir, "kube-controller-manager"), nil,
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers=statefulset-controller,garbage-collector-controller",
		"--concurrent-statefulset-syncs=5", "--v=2")
}
