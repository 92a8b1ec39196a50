package kernel_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/routing"
)

// TestSysctlsThroughAMountOfProcSysNet: the DaemonSet's case. A container
// that is not privileged sees /proc/sys read-only, so the chart mounts the
// host's /proc/sys/net elsewhere (a hostPath volume) and passes
// --proc-sys-net. Here /proc/sys/net is bind-mounted into a temporary
// directory and the Kernel is pointed at it: a converge sets eth1's and
// eth2's rp_filter to 2, as the namespace's own /proc/sys shows, because
// the mount, like /proc/sys/net itself, shows the namespace of the thread
// that reads it.
func TestSysctlsThroughAMountOfProcSysNet(t *testing.T) {
	tn := newTestNode(t)
	dir := t.TempDir()
	if err := unix.Mount("/proc/sys/net", dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting /proc/sys/net: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})

	k := kernel.New(tn.ns.Handle, tn.ns.NS, kernel.WithProcSysNet(dir))
	if _, err := routing.NewConverger(k, routing.DefaultConfig()).Converge(context.Background(), tn.node); err != nil {
		t.Fatalf("converge through %s: %v", dir, err)
	}
	for _, name := range []string{"eth1", "eth2"} {
		if got := tn.ns.Sysctl(t, "net/ipv4/conf/"+name+"/rp_filter"); got != "2" {
			t.Errorf("%s rp_filter = %s, want 2", name, got)
		}
	}
	got, err := k.RPFilter([]string{"eth1"})
	if err != nil || got["eth1"] != 2 {
		t.Errorf("RPFilter through the mount = %v, %v; want eth1: 2", got, err)
	}
}

// TestSysctlsGoWhereTheOptionPoints: a Kernel pointed at a directory that
// does not show the sysctls reads nothing and fails to write, so the
// option is what decides where rp_filter goes.
func TestSysctlsGoWhereTheOptionPoints(t *testing.T) {
	tn := newTestNode(t)
	k := kernel.New(tn.ns.Handle, tn.ns.NS, kernel.WithProcSysNet(t.TempDir()))
	got, err := k.RPFilter([]string{"eth1"})
	if err != nil || len(got) != 0 {
		t.Errorf("RPFilter from an empty directory = %v, %v; want nothing", got, err)
	}
	links, err := k.Links()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Name != "eth1" {
			continue
		}
		if err := k.SetRPFilter(l, 2); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("SetRPFilter into an empty directory = %v, want not exist", err)
		}
	}
	if got := tn.ns.Sysctl(t, "net/ipv4/conf/eth1/rp_filter"); got == "2" {
		t.Error("eth1 rp_filter changed although the Kernel points elsewhere")
	}
}
