package agent_test

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/enipam/enipam/nodeagent/agent"
)

// TestOptionsFlagsOverrideDefaults: every flag reaches its field, and
// untouched flags keep the defaults (MTU 9001, priorities 111 and 20).
func TestOptionsFlagsOverrideDefaults(t *testing.T) {
	o := agent.NewOptions("from-downward-api")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--ingress-rule-priority=0", "--resync-interval=30s", "--link-wait-timeout=5m", "--metrics-address=:9999", "--log-level=debug"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if o.NodeName != "from-downward-api" || o.Routing.MTU != 9001 || o.Routing.EgressPriority != 111 {
		t.Errorf("defaults lost: %+v", o)
	}
	if o.Routing.IngressPriority != 0 || o.ResyncInterval != 30*time.Second || o.LinkWaitTimeout != 5*time.Minute || o.MetricsAddress != ":9999" || o.LogLevel != "debug" {
		t.Errorf("flags not applied: %+v", o)
	}
}

// TestOptionsValidateRejectsBadSettings: a missing node name, an ingress
// priority after egress, a zero resync, an unknown log level and a shared
// listen address are each refused.
func TestOptionsValidateRejectsBadSettings(t *testing.T) {
	for name, args := range map[string][]string{
		"no node name":         {"--node-name="},
		"ingress after egress": {"--ingress-rule-priority=200"},
		"zero resync":          {"--resync-interval=0"},
		"bad log level":        {"--log-level=loud"},
		"shared address":       {"--health-address=:9000", "--metrics-address=:9000"},
		"MTU too small":        {"--mtu=20"},
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
