package bench

import (
	"testing"
	"time"
)

// TestLowerBound: 500 nodes each needing Create + Attach + Modify are
// bounded by Attach (burst 50, 5/s): 90 s — EC2's own figure for the
// comparison with Cilium's operator; within the bursts the bound is 0.
func TestLowerBound(t *testing.T) {
	d, by := LowerBound(map[string]int{"CreateNetworkInterface": 500, "AttachNetworkInterface": 500, "ModifyNetworkInterfaceAttribute": 500})
	if d != 90*time.Second || by != "AttachNetworkInterface" {
		t.Errorf("bound %s by %s, want 90s by AttachNetworkInterface", d, by)
	}
	if d, _ := LowerBound(map[string]int{"AssignPrivateIpAddresses": 100}); d != 0 {
		t.Errorf("bound %s within the burst, want 0", d)
	}
	if d, _ := LowerBound(map[string]int{"AssignPrivateIpAddresses": 1000}); d != 180*time.Second {
		t.Errorf("bound %s for 1000 Assigns, want 180s", d)
	}
}
