package pool

import "testing"

// TestNeeded: Cilium's needed-IP arithmetic, case by case, including the
// caps of MinAllocate and MaxAllocate.
func TestNeeded(t *testing.T) {
	for _, tc := range []struct {
		name            string
		available, used int
		k               Knobs
		want            int
	}{
		{"empty node gets pre-allocate", 0, 0, Knobs{PreAllocate: 8}, 8},
		{"full pre-allocation needs nothing", 8, 0, Knobs{PreAllocate: 8}, 0},
		{"use eats into the free IPs", 8, 3, Knobs{PreAllocate: 8}, 3},
		{"more than enough needs nothing", 20, 3, Knobs{PreAllocate: 8}, 0},
		{"min-allocate dominates at start", 0, 0, Knobs{PreAllocate: 4, MinAllocate: 10}, 10},
		{"min-allocate reached, pre-allocate rules", 10, 8, Knobs{PreAllocate: 4, MinAllocate: 10}, 2},
		{"max-allocate caps", 10, 9, Knobs{PreAllocate: 8, MaxAllocate: 12}, 2},
		{"at max-allocate needs nothing", 12, 12, Knobs{PreAllocate: 8, MaxAllocate: 12}, 0},
		{"above max-allocate never negative", 15, 15, Knobs{PreAllocate: 8, MaxAllocate: 12}, 0},
		{"no knobs needs nothing", 0, 0, Knobs{}, 0},
		{"used beyond pool (agent lag)", 4, 6, Knobs{PreAllocate: 2}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Needed(tc.available, tc.used, tc.k); got != tc.want {
				t.Errorf("Needed(%d, %d, %+v) = %d, want %d", tc.available, tc.used, tc.k, got, tc.want)
			}
		})
	}
}

// TestToAllocate: the watermark is added to a real need, never allocated
// on its own, and stays within MaxAllocate.
func TestToAllocate(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		available, used, needed int
		k                       Knobs
		want                    int
	}{
		{"nothing needed", 8, 0, 0, Knobs{PreAllocate: 8, MaxAboveWatermark: 8}, 0},
		{"need only", 0, 2, 8, Knobs{PreAllocate: 8}, 8},
		{"need plus watermark", 0, 2, 8, Knobs{PreAllocate: 8, MaxAboveWatermark: 4}, 12},
		{"watermark cut by max-allocate", 4, 4, 4, Knobs{PreAllocate: 8, MaxAboveWatermark: 4, MaxAllocate: 10}, 6},
		{"need kept even if max says less", 10, 10, 2, Knobs{MaxAllocate: 10, MaxAboveWatermark: 4}, 2},
		{"fresh node includes the agent's endpoints", 0, 0, 8, Knobs{PreAllocate: 8, AgentEndpoints: 2}, 10},
		{"a node in use does not", 4, 2, 6, Knobs{PreAllocate: 8, AgentEndpoints: 2}, 6},
		{"endpoints within max-allocate", 0, 0, 8, Knobs{PreAllocate: 8, AgentEndpoints: 2, MaxAllocate: 9}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToAllocate(tc.available, tc.used, tc.needed, tc.k); got != tc.want {
				t.Errorf("ToAllocate(%d, %d, %d, %+v) = %d, want %d", tc.available, tc.used, tc.needed, tc.k, got, tc.want)
			}
		})
	}
}

// TestExcess: Cilium's excess arithmetic, including the bootstrap
// allowance of MinAllocate + MaxAboveWatermark.
func TestExcess(t *testing.T) {
	for _, tc := range []struct {
		name            string
		available, used int
		k               Knobs
		want            int
	}{
		{"exactly pre-allocated", 8, 0, Knobs{PreAllocate: 8}, 0},
		{"pods left", 20, 2, Knobs{PreAllocate: 8}, 10},
		{"watermark kept", 20, 2, Knobs{PreAllocate: 8, MaxAboveWatermark: 4}, 6},
		{"bootstrap allocation kept", 14, 0, Knobs{PreAllocate: 4, MinAllocate: 10, MaxAboveWatermark: 4}, 0},
		{"beyond bootstrap allowance", 20, 0, Knobs{PreAllocate: 4, MinAllocate: 10, MaxAboveWatermark: 4}, 6},
		{"busy node", 30, 25, Knobs{PreAllocate: 4, MinAllocate: 10, MaxAboveWatermark: 1}, 0},
		{"never negative", 5, 5, Knobs{PreAllocate: 8}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Excess(tc.available, tc.used, tc.k); got != tc.want {
				t.Errorf("Excess(%d, %d, %+v) = %d, want %d", tc.available, tc.used, tc.k, got, tc.want)
			}
		})
	}
}
