package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/enipam/enipam/test/cluster"
)

// docFiles are the documents these tests hold to the code: the README
// and docs/*.md, in that order.
func docFiles(t *testing.T) []string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

// readme returns the text of the README and of every docs/*.md after it:
// a section the tests read may live in any of them.
func readme(t *testing.T) string {
	t.Helper()
	var all []string
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, string(b))
	}
	return strings.Join(all, "\n")
}

// section returns the README's text under the heading (a whole line, such
// as "### Metrics") up to the next heading of the same or a higher level.
func section(t *testing.T, text, heading string) string {
	t.Helper()
	level := strings.Index(heading, " ")
	lines := strings.Split(text, "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		t.Fatalf("neither the README nor docs/ has %q", heading)
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if l := lines[i]; strings.HasPrefix(l, "#") && strings.Index(l, " ") <= level && strings.Trim(l[:max(strings.Index(l, " "), 0)], "#") == "" {
			end = i
			break
		}
	}
	return strings.Join(lines[start:end], "\n")
}

// tableRows returns the cells of every table row of text whose first cell
// starts with a backticked name (header and rule rows are not).
func tableRows(text string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cells := strings.Split(strings.TrimSpace(strings.Trim(strings.TrimSpace(l), "|")), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

var backticked = regexp.MustCompile("`([^`]+)`")

func names(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestREADMEMetricsAreTheRegisteredOnes: the README's metric tables
// (Operations, Metrics) list exactly the metrics enipam-operator,
// enipam-agent and enipam-scheduler register, each with exactly its
// labels. A metric added to a binary without a row, a row left for a
// metric removed, or a label missing from either side fails here.
func TestREADMEMetricsAreTheRegisteredOnes(t *testing.T) {
	registered := map[string][]string{}
	for _, r := range []recorder{operatorMetrics(t), agentMetrics(t), schedulerMetrics(t)} {
		maps.Copy(registered, r)
	}
	documented := map[string][]string{}
	for _, row := range tableRows(section(t, readme(t), "### Metrics")) {
		if len(row) != 3 {
			t.Errorf("metrics row %q: want 3 cells (metric, labels, what)", row)
			continue
		}
		labels := names(row[1])
		slices.Sort(labels)
		for _, n := range names(row[0]) {
			if _, dup := documented[n]; dup {
				t.Errorf("%s listed twice", n)
			}
			documented[n] = labels
		}
	}
	if len(documented) == 0 {
		t.Fatal("no metric rows found in the README's Metrics section")
	}
	norm := func(m map[string][]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = strings.Join(v, ",")
		}
		return out
	}
	if diff := cmp.Diff(norm(registered), norm(documented)); diff != "" {
		t.Errorf("README metrics (name → labels) differ from what the binaries register (-registered +README):\n%s", diff)
	}
}

// TestREADMEEventsAreTheRecordedOnes: the README's events table lists
// exactly the reasons the binaries record: every Reason* constant of
// operator/, nodeagent/ and scheduler/ that names an event (a CamelCase
// word; the scheduler's refusal reasons are sentences, not events), and
// every literal passed as the reason of an Event or Eventf call (the
// argument after the event type). A reason passed as a variable must come
// from such a constant.
func TestREADMEEventsAreTheRecordedOnes(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	event := regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)
	for _, dir := range []string{"operator", "nodeagent", "scheduler"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					for i, id := range n.Names {
						if !strings.HasPrefix(id.Name, "Reason") || i >= len(n.Values) {
							continue
						}
						if v, ok := stringLit(n.Values[i]); ok && event.MatchString(v) {
							recorded[v] = true
						}
					}
				case *ast.CallExpr:
					if reason, ok := eventReason(n); ok {
						recorded[reason] = true
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(recorded) < 10 {
		t.Fatalf("found only %v: the scan is broken", recorded)
	}
	documented := map[string]bool{}
	for _, row := range tableRows(section(t, readme(t), "### Events")) {
		for _, reason := range names(row[0]) {
			documented[reason] = true
		}
	}
	if diff := cmp.Diff(recorded, documented); diff != "" {
		t.Errorf("README event reasons differ from those the code records (-code +README):\n%s", diff)
	}
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// eventReason returns the literal reason of an Event/Eventf call: the
// argument after the event type ("Normal", "Warning" or corev1's
// constants), in both client-go recorders' signatures.
func eventReason(call *ast.CallExpr) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Event" && sel.Sel.Name != "Eventf") {
		return "", false
	}
	for i, a := range call.Args[:max(len(call.Args)-1, 0)] {
		isType := false
		if s, ok := stringLit(a); ok && (s == "Normal" || s == "Warning") {
			isType = true
		}
		if s, ok := a.(*ast.SelectorExpr); ok && (s.Sel.Name == "EventTypeNormal" || s.Sel.Name == "EventTypeWarning") {
			isType = true
		}
		if isType {
			return stringLit(call.Args[i+1])
		}
	}
	return "", false
}
