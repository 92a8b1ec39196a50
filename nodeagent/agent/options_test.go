package agent_test

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/routing"
)

// TestOptionsFlagsOverrideDefaults: every flag reaches its field, and
// untouched flags keep the defaults (MTU 9001, priorities 111 and 20,
// egress all, connmark on, no start-up taint).
func TestOptionsFlagsOverrideDefaults(t *testing.T) {
	o := agent.NewOptions("from-downward-api")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--ingress-rule-priority=0", "--resync-interval=30s", "--link-wait-timeout=5m", "--metrics-address=:9999", "--log-level=debug", "--proc-sys-net=/host/proc/sys/net"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if o.NodeName != "from-downward-api" || o.Routing.MTU != 9001 || o.Routing.EgressPriority != 111 ||
		o.Routing.Egress != routing.EgressAll || !o.Routing.Connmark || o.StartupTaintKey != "" {
		t.Errorf("defaults lost: %+v", o)
	}
	if o.Routing.IngressPriority != 0 || o.ResyncInterval != 30*time.Second || o.LinkWaitTimeout != 5*time.Minute || o.MetricsAddress != ":9999" || o.LogLevel != "debug" || o.ProcSysNet != "/host/proc/sys/net" {
		t.Errorf("flags not applied: %+v", o)
	}
	o = agent.NewOptions("n")
	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--egress=vpc", "--nodeport-connmark=false", "--startup-taint-key=enipam.io/agent-not-ready"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if o.Routing.Egress != routing.EgressVPC || o.Routing.Connmark || o.StartupTaintKey != "enipam.io/agent-not-ready" {
		t.Errorf("egress, connmark and taint flags not applied: %+v", o)
	}
}

// TestOptionsValidateRejectsBadSettings: a missing node name, an ingress
// priority after egress, a zero resync, an unknown log level, a shared
// listen address, a tiny MTU, a relative sysctl directory, an unknown
// egress mode and a malformed taint key are each refused.
func TestOptionsValidateRejectsBadSettings(t *testing.T) {
	for name, args := range map[string][]string{
		"no node name":         {"--node-name="},
		"ingress after egress": {"--ingress-rule-priority=200"},
		"zero resync":          {"--resync-interval=0"},
		"bad log level":        {"--log-level=loud"},
		"shared address":       {"--health-address=:9000", "--metrics-address=:9000"},
		"MTU too small":        {"--mtu=20"},
		"relative sysctl dir":  {"--proc-sys-net=proc/sys/net"},
		"unknown egress mode":  {"--egress=internet"},
		"invalid taint key":    {"--startup-taint-key=not a key"},
	} {
		o := agent.NewOptions("node-1")
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := o.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %v", name, args)
		}
	}
}

// TestOptionsSysctlsDefaultToProcSysNet: without --proc-sys-net the agent
// uses the kernel's own /proc/sys/net, as on a privileged host process.
func TestOptionsSysctlsDefaultToProcSysNet(t *testing.T) {
	o := agent.NewOptions("node-1")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.ProcSysNet != "/proc/sys/net" {
		t.Errorf("ProcSysNet = %q, want /proc/sys/net", o.ProcSysNet)
	}
}
