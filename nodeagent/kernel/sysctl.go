package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/enipam/enipam/nodeagent/routing"
)

// DefaultProcSysNet is where the kernel shows the network sysctls.
// /proc/sys/net shows the network namespace of the thread that looks it
// up, which is why inNamespace exists; a bind mount of it elsewhere (a
// hostPath volume) behaves the same.
const DefaultProcSysNet = "/proc/sys/net"

// Option configures a Kernel.
type Option func(*Kernel)

// WithProcSysNet reads and writes the network sysctls under dir instead of
// /proc/sys/net. A container that is not privileged sees /proc/sys read-only
// even on the host network; mounting the host's /proc/sys/net as a
// hostPath volume and pointing dir at it lets the agent write rp_filter
// with only CAP_NET_ADMIN.
func WithProcSysNet(dir string) Option {
	return func(k *Kernel) { k.procSysNet = dir }
}

// confDir is where the per-link IPv4 sysctls live.
func (k *Kernel) confDir() string {
	return filepath.Join(k.procSysNet, "ipv4", "conf")
}

// RPFilter implements routing.Host.
func (k *Kernel) RPFilter(names []string) (map[string]int, error) {
	out := make(map[string]int, len(names))
	err := k.inNamespace(func() error {
		for _, name := range names {
			if err := checkLinkName(name); err != nil {
				return err
			}
			data, err := os.ReadFile(filepath.Join(k.confDir(), name, "rp_filter"))
			if err != nil {
				// The link may have gone between the dump and now; leave it
				// out and let the next converge see.
				continue
			}
			v, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				return fmt.Errorf("parsing rp_filter of %s, %w", name, err)
			}
			out[name] = v
		}
		return nil
	})
	return out, err
}

// SetRPFilter implements routing.Host. With a state directory
// (WithStateDir), the link's value from before enipam's first change is
// recorded first, for RestoreRPFilter.
func (k *Kernel) SetRPFilter(l routing.Link, value int) error {
	if err := checkLinkName(l.Name); err != nil {
		return err
	}
	if err := k.recordRPFilter(l, value); err != nil {
		return err
	}
	return k.writeRPFilter(l.Name, value)
}

func (k *Kernel) writeRPFilter(name string, value int) error {
	return k.inNamespace(func() error {
		path := filepath.Join(k.confDir(), name, "rp_filter")
		return classify(os.WriteFile(path, []byte(strconv.Itoa(value)), 0o644))
	})
}

// checkLinkName refuses names that would escape the link's sysctl folder.
func checkLinkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("invalid link name %q", name)
	}
	return nil
}

// inNamespace runs fn inside k's namespace, or right here when k acts on
// the process's own namespace.
func (k *Kernel) inNamespace(fn func() error) error {
	if !k.ns.IsOpen() {
		return fn()
	}
	return InNamespace(k.ns, fn)
}

// InNamespace runs fn on an OS thread that has entered ns. The thread is
// locked and never unlocked, so the Go runtime destroys it when fn
// returns: no goroutine can ever run on a thread left in the wrong
// namespace, and the caller's thread never moves.
func InNamespace(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("entering network namespace, %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
