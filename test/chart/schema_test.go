package chart

import (
	"strings"
	"testing"
)

// TestBadValuesAreRefusedWithTheirPathAndReason: each bad value stops
// `helm template` (and so install and upgrade) before anything renders,
// with a message naming the value and what is wrong. Type, range, pattern
// and unknown-key errors come from values.schema.json; rules across values
// (min above max, reserved tag keys, rule priorities, replicas without
// leader election, the scheduler's names and ports) from the chart's
// checks.
func TestBadValuesAreRefusedWithTheirPathAndReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"misspelled top-level key", []string{"--set", "clustername=prod"},
			[]string{"additional properties 'clustername' not allowed"}},
		{"misspelled nested key", []string{"--set", "pool.preallocate=4"},
			[]string{"at '/pool'", "additional properties 'preallocate' not allowed"}},
		{"cluster name with characters EC2 tags refuse", []string{"--set", "clusterName=prod#1"},
			[]string{"at '/clusterName'", "does not match pattern"}},
		{"negative pre-allocation", []string{"--set", "pool.preAllocate=-1"},
			[]string{"at '/pool/preAllocate'", "minimum: got -1, want 0"}},
		{"first interface index beyond an instance's ENIs", []string{"--set", "pool.firstInterfaceIndex=16"},
			[]string{"at '/pool/firstInterfaceIndex'", "maximum: got 16, want 15"}},
		{"duration in words", []string{"--set", "pool.excessIPReleaseDelay=3 minutes"},
			[]string{"at '/pool/excessIPReleaseDelay'", "'3 minutes' does not match pattern"}},
		{"headroom in lower case", []string{"--set", "pool.headroom=adaptive"},
			[]string{"at '/pool/headroom'", "value must be one of 'Fixed', 'Adaptive'"}},
		{"duration as a bare number", []string{"--set", "operator.resyncInterval=60"},
			[]string{"at '/operator/resyncInterval'", "got number, want string"}},
		{"no operator replica", []string{"--set", "operator.replicas=0"},
			[]string{"at '/operator/replicas'", "minimum: got 0, want 1"}},
		{"unknown log level", []string{"--set", "agent.logLevel=verbose"},
			[]string{"at '/agent/logLevel'", "value must be one of 'debug', 'info', 'warn', 'error'"}},
		{"MTU too small for AWS", []string{"--set", "agent.mtu=100"},
			[]string{"at '/agent/mtu'", "minimum: got 100, want 576"}},
		{"unknown egress mode", []string{"--set", "agent.egress=internet"},
			[]string{"at '/agent/egress'", "value must be one of 'all', 'vpc'"}},
		{"taint key with a space", []string{"--set", "agent.startupTaintKey=not ready"},
			[]string{"at '/agent/startupTaintKey'", "does not match pattern"}},
		{"malformed subnet ID", []string{"--set", "defaultPolicy.subnetIDs[0]=subnet-xyz"},
			[]string{"at '/defaultPolicy/subnetIDs/0'", "'subnet-xyz' does not match pattern"}},
		{"malformed security group ID", []string{"--set", "defaultPolicy.securityGroupIDs[0]=default"},
			[]string{"at '/defaultPolicy/securityGroupIDs/0'", "'default' does not match pattern"}},
		{"IP family in lower case", []string{"--set", "defaultPolicy.ipFamilies[0]=ipv6"},
			[]string{"at '/defaultPolicy/ipFamilies/0'", "value must be one of 'IPv4', 'IPv6'"}},
		{"IP family twice", []string{"--set", "defaultPolicy.ipFamilies={IPv4,IPv4}"},
			[]string{"at '/defaultPolicy/ipFamilies'", "items at 0 and 1 are equal"}},
		{"node selector written as plain labels", []string{"--set", "defaultPolicy.nodeSelector.role=web"},
			[]string{"at '/defaultPolicy/nodeSelector'", "additional properties 'role' not allowed"}},
		{"image pull policy", []string{"--set", "operator.image.pullPolicy=sometimes"},
			[]string{"at '/operator/image/pullPolicy'", "value must be one of 'Always', 'IfNotPresent', 'Never'"}},
		{"extra argument that is not a flag", []string{"--set", "operator.extraArgs[0]=debug"},
			[]string{"at '/operator/extraArgs/0'", "does not match pattern '^--'"}},
		{"uninstall timeout in words", []string{"--set", "agent.uninstallCleanup.timeout=two minutes"},
			[]string{"at '/agent/uninstallCleanup/timeout'", "does not match pattern"}},
		{"extender weight of zero", []string{"--set", "scheduler.extender.weight=0"},
			[]string{"at '/scheduler/extender/weight'", "minimum: got 0, want 1"}},
		{"settle timeout in words", []string{"--set", "scheduler.extender.settleTimeout=a second"},
			[]string{"at '/scheduler/extender/settleTimeout'", "does not match pattern"}},

		{"cluster name missing", []string{"--set", "clusterName="},
			[]string{"clusterName is required", "--set clusterName=<name>"}},
		{"min-allocate above max-allocate", []string{"--set", "pool.minAllocate=20", "--set", "pool.maxAllocate=10"},
			[]string{"pool.minAllocate (20) exceeds pool.maxAllocate (10)"}},
		{"pre-allocate above max-allocate", []string{"--set", "pool.preAllocate=20", "--set", "pool.maxAllocate=10"},
			[]string{"pool.preAllocate (20) exceeds pool.maxAllocate (10)"}},
		{"adaptive headroom without the pod watch", []string{"--set", "pool.headroom=Adaptive", "--set", "operator.podDemand=false"},
			[]string{"pool.headroom Adaptive learns from the pod watch: it needs operator.podDemand true"}},
		{"reserved ENI tag key", []string{"--set", "defaultPolicy.tags.enipam\\.io/cluster=other"},
			[]string{`defaultPolicy.tags: the key "enipam.io/cluster" is reserved`}},
		{"ingress rule after the egress rule", []string{"--set", "agent.ingressRulePriority=200"},
			[]string{"agent.ingressRulePriority (200) must be lower than agent.egressRulePriority (111)"}},
		{"two replicas without leader election", []string{"--set", "operator.leaderElection.enabled=false"},
			[]string{"operator.replicas is 2 but operator.leaderElection.enabled is false"}},
		{"operator and agent on one host port", []string{"--set", "operator.metricsPort=9882"},
			[]string{"the operator's and the agent's ports must differ"}},
		{"a second scheduler named like the default one", []string{"--set", "scheduler.schedulerName=default-scheduler"},
			[]string{"scheduler.schedulerName must not be default-scheduler"}},
		{"the default scheduler's Lease", []string{"--set", "scheduler.leaderElection.leaseName=kube-scheduler"},
			[]string{"scheduler.leaderElection.leaseName must not be kube-scheduler"}},
		{"two schedulers without leader election", []string{"--set", "scheduler.leaderElection.enabled=false"},
			[]string{"scheduler.replicas is 2 but scheduler.leaderElection.enabled is false"}},
		{"extender on kube-scheduler's port", []string{"--set", "scheduler.extender.port=10259"},
			[]string{"scheduler.kubeScheduler.port and scheduler.extender's port, healthPort and metricsPort must differ"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--set", "clusterName=prod"}, tc.args...)
			msg := renderError(t, args...)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}
