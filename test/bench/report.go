// Package bench measures enipam at scale with its real binaries: the
// operator and ec2sim (with EC2's default throttling and realistic
// latencies) against a real kube-apiserver, and thousands of simulated
// cilium-agents. Each scenario returns a Report: the parameters it ran
// with, its figures, and the targets it is held to. `make bench` runs
// them through cmd/enipam-bench.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one scenario's outcome.
type Report struct {
	Scenario string         `json:"scenario"`
	Started  time.Time      `json:"started"`
	Ran      Seconds        `json:"ranSeconds"`
	Params   map[string]any `json:"params"`
	Figures  []Figure       `json:"figures"`
	// Table, when set, compares configurations side by side.
	Table   *Table   `json:"table,omitempty"`
	Targets []Target `json:"targets"`
}

// Table is a comparison: a header and one row per configuration.
type Table struct {
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

// Figure is one measured value.
type Figure struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
	Unit  string `json:"unit,omitempty"`
}

// Target is a goal the scenario reports on (never asserted as a test).
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// Seconds marshals a duration as seconds.
type Seconds time.Duration

// MarshalJSON implements json.Marshaler.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(s).Seconds())), nil
}

func (r *Report) add(name string, value any, unit string) {
	if d, ok := value.(time.Duration); ok {
		value = round(d.Seconds(), 3)
		if unit == "" {
			unit = "s"
		}
	}
	if f, ok := value.(float64); ok {
		value = round(f, 3)
	}
	r.Figures = append(r.Figures, Figure{Name: name, Value: value, Unit: unit})
}

func (r *Report) target(name, want, got string, met bool) {
	r.Targets = append(r.Targets, Target{Name: name, Want: want, Got: got, Met: met})
}

func round(f float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(f*p+0.5)) / p
}

// Print writes the report as a table.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n== %s (ran %s)\n", r.Scenario, time.Duration(r.Ran).Round(time.Second))
	var params []string
	for k, v := range r.Params {
		params = append(params, fmt.Sprintf("%s=%v", k, v))
	}
	slices.Sort(params)
	fmt.Fprintf(w, "parameters: %s\n", strings.Join(params, " "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range r.Figures {
		fmt.Fprintf(tw, "  %s\t%v %s\n", f.Name, f.Value, f.Unit)
	}
	tw.Flush()
	if t := r.Table; t != nil {
		fmt.Fprintln(w, "comparison:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  %s\n", strings.Join(t.Header, "\t"))
		for _, row := range t.Rows {
			fmt.Fprintf(tw, "  %s\n", strings.Join(row, "\t"))
		}
		tw.Flush()
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "targets:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range r.Targets {
			mark := "MET"
			if !t.Met {
				mark = "MISSED"
			}
			fmt.Fprintf(tw, "  %s\t%s\twant %s\tgot %s\n", mark, t.Name, t.Want, t.Got)
		}
		tw.Flush()
	}
}

// Write stores the report as <dir>/<scenario>.json and returns the path.
func (r *Report) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.Scenario+".json")
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(data, '\n'), 0o644)
}
