package main

import (
	"strings"
	"testing"
)

// TestMemoryLimitFollowsTheContainerLimit: the chart's MEMORY_LIMIT (the
// container's limit in bytes) sets the runtime's soft limit to 90 % of
// it; GOMEMLIMIT, when set, wins; nothing set leaves the runtime alone;
// a value that is not a positive byte count is refused with its name.
func TestMemoryLimitFollowsTheContainerLimit(t *testing.T) {
	for _, tc := range []struct {
		name, gomemlimit, limit string
		want                    int64 // 0: not set
		err                     string
	}{
		{name: "512Mi container limit", limit: "536870912", want: 483183810},
		{name: "GOMEMLIMIT wins", gomemlimit: "300MiB", limit: "536870912"},
		{name: "no limit"},
		{name: "a quantity, not bytes", limit: "512Mi", err: `MEMORY_LIMIT="512Mi"`},
		{name: "zero", limit: "0", err: "positive integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got int64
			err := setMemoryLimit(tc.gomemlimit, tc.limit, func(n int64) int64 { got = n; return 0 })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("soft limit %d (error %v), want %d", got, err, tc.want)
			}
		})
	}
}
