package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/enipam/enipam/test/cluster"
)

// githubAnchors are the anchors GitHub gives the headings of a Markdown
// text: lower case, every character but letters, digits, spaces, hyphens
// and underscores dropped, spaces made hyphens; a repeated anchor gets
// -1, -2, ... Headings inside code blocks are none.
func githubAnchors(text string) map[string]bool {
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	out := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !regexp.MustCompile(`^#{1,6} `).MatchString(l) {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#"))), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestDocsLinksResolve: every relative link of the README and of
// docs/*.md names a file of the repository, and its #anchor, if any, a
// heading of that file (of the same file for a bare #anchor), by GitHub's
// anchor rules. Moving a section between documents without its links
// fails here.
func TestDocsLinksResolve(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		anchors[path] = githubAnchors(string(b))
		return anchors[path]
	}
	checked := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		inCode := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "```") {
				inCode = !inCode
			}
			if inCode {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				full := f
				if path != "" {
					full = filepath.Join(filepath.Dir(f), path)
				}
				checked++
				if _, err := os.Stat(full); err != nil {
					t.Errorf("%s: link %s: no such file", rel, target)
					continue
				}
				if anchor != "" && !anchorsOf(full)[anchor] {
					t.Errorf("%s: link %s: no heading with that anchor", rel, target)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d links checked: the scan is broken", checked)
	}
}
