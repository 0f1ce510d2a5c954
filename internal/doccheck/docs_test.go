package doccheck

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The project's own documentation: README.md and everything under docs/.
const repoRoot = "../.."

// readDocs parses README.md and every Markdown file under docs/, keyed by path from the root.
func readDocs(t *testing.T) map[string]*Doc {
	t.Helper()
	docs := map[string]*Doc{}
	add := func(rel string) {
		b, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		docs[rel] = Parse(string(b))
	}
	add("README.md")
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(repoRoot, p)
			add(filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// resolve gives the file a relative link points at (from the root) and its anchor, or ok=false
// for a link that leaves the repository's files (a URL).
func resolve(from, target string) (file, anchor string, ok bool) {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return "", "", false
	}
	file, anchor, _ = strings.Cut(target, "#")
	if file == "" {
		return from, anchor, true
	}
	return filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), file))), anchor, true
}

// TestLinks fails on a relative link to a file that does not exist, or to an anchor that no
// heading (as GitHub makes anchors) or id of the target page gives.
func TestLinks(t *testing.T) {
	docs := readDocs(t)
	for from, d := range docs {
		for _, l := range d.Links {
			file, anchor, ok := resolve(from, l.Target)
			if !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, file)); err != nil {
				t.Errorf("%s:%d: link %q: no file %s", from, l.Line, l.Target, file)
				continue
			}
			if anchor == "" {
				continue
			}
			target := docs[file]
			if target == nil {
				t.Errorf("%s:%d: link %q: an anchor into %s, which is not a page the checker reads", from, l.Line, l.Target, file)
			} else if !target.Anchors[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading or id giving #%s", from, l.Line, l.Target, file, anchor)
			}
		}
	}
}

// TestEveryPageReachable follows links from README.md: every page under docs/ must be reached.
func TestEveryPageReachable(t *testing.T) {
	docs := readDocs(t)
	seen := map[string]bool{"README.md": true}
	for queue := []string{"README.md"}; len(queue) > 0; queue = queue[1:] {
		for _, l := range docs[queue[0]].Links {
			file, _, ok := resolve(queue[0], l.Target)
			if ok && docs[file] != nil && !seen[file] {
				seen[file] = true
				queue = append(queue, file)
			}
		}
	}
	var lost []string
	for p := range docs {
		if !seen[p] {
			lost = append(lost, p)
		}
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		t.Errorf("no chain of links from README.md reaches: %s", strings.Join(lost, ", "))
	}
}

// TestNothingSaidTwice fails when a paragraph of some length appears twice in README.md and the
// pages written by hand (the generated reference repeats its parents' flags by design).
func TestNothingSaidTwice(t *testing.T) {
	first := map[string]string{}
	for p, d := range readDocs(t) {
		if strings.HasPrefix(p, "docs/reference/") {
			continue
		}
		for _, para := range d.Paras {
			if len(para.Text) < 100 {
				continue
			}
			where := p + ":" + itoa(para.Line)
			if prev, dup := first[para.Text]; dup {
				t.Errorf("%s repeats %s: %.80q...", where, prev, para.Text)
			}
			first[para.Text] = where
		}
	}
}

// TestShellBlocksMarked makes every sh block of the hand-written pages say whether it runs as a
// test: <!-- doctest --> (tests/docs_examples_test.go runs it) or <!-- not tested: REASON -->.
func TestShellBlocksMarked(t *testing.T) {
	for p, d := range readDocs(t) {
		for _, b := range d.Blocks {
			if b.Lang != "sh" || b.Marker == "doctest" || strings.HasPrefix(b.Marker, "not tested: ") {
				continue
			}
			t.Errorf("%s:%d: a sh block without <!-- doctest --> or <!-- not tested: REASON --> before it", p, b.Line)
		}
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0 || s == ""; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
