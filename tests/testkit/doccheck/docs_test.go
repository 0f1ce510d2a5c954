package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The project's own documentation: README.md and everything under docs/.
const repoRoot = "../../.."

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
// test: <!-- doctest --> (tests/docs_examples_test.go runs it), <!-- doctest remote: STEP --> (the
// remote walkthrough, which tests/remote_farconfig_test.go runs against a real sshd) or
// <!-- not tested: REASON -->.
func TestShellBlocksMarked(t *testing.T) {
	for p, d := range readDocs(t) {
		for _, b := range d.Blocks {
			if b.Lang != "sh" || b.Marker == "doctest" || strings.HasPrefix(b.Marker, "not tested: ") || strings.HasPrefix(b.Marker, "doctest remote: ") {
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

// maxWordsPerSentence is the most words a user page may average per sentence (gh's manual
// averages about 15).
const maxWordsPerSentence = 20

// notUserPages are the pages under docs/ the sentence-length and no-internals tests leave out,
// each for a reason: they are read by contributors and integrators, or are specifications and
// measurements where precision comes before brevity.
var notUserPages = map[string]string{
	"docs/architecture.md":   "for contributors: the implementation, by package",
	"docs/development.md":    "for contributors: the layout, tests and scripts, by file",
	"docs/stdio-protocol.md": "a protocol specification",
	"docs/format.md":         "a format specification: the registry's bytes, by media type",
	"docs/performance.md":    "measurements: tables of figures and how each was taken",
}

// userPages gives the user pages: docs/*.md (not docs/reference, which the CLI's help generates,
// nor notUserPages), sorted.
func userPages(t *testing.T) []string {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		rel := "docs/" + filepath.Base(m)
		if notUserPages[rel] == "" {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// TestUserPagesShortSentences holds every user page to at most maxWordsPerSentence words per
// sentence on average (sentenceLength says what counts), so pages stay easy to read.
func TestUserPagesShortSentences(t *testing.T) {
	for _, p := range userPages(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		words, sentences := sentenceLength(string(b))
		if sentences == 0 {
			continue
		}
		avg := float64(words) / float64(sentences)
		if avg > maxWordsPerSentence {
			t.Errorf("%s averages %.1f words a sentence (%d words, %d sentences); the most for a user page is %d: split long sentences, and move implementation detail to docs/architecture.md",
				p, avg, words, sentences, maxWordsPerSentence)
		}
	}
}

// internalsRE finds what a user page should not need: oprov's own packages and source files.
var internalsRE = regexp.MustCompile("(^|[\\s(`])((pkg|loader|cmd|internal|manifest|tests)/[a-z]\\w*|[\\w/.-]*\\w\\.go\\b)")

// jargonRE finds words of the implementation that user pages once used unexplained: say what
// happens instead ("hands the provider to tofu", "a signed envelope", "the kernel's version").
var jargonRE = regexp.MustCompile(`(?i)\breattach|\bDSSE\b|Landlock ABI|\bthe loader\b`)

// TestUserPagesNameNoInternals: a user page names no package or source file of oprov's own
// (those are for docs/architecture.md and docs/development.md), and none of the implementation's
// jargon.
func TestUserPagesNameNoInternals(t *testing.T) {
	for _, p := range userPages(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := internalsRE.FindStringSubmatch(line); m != nil {
				t.Errorf("%s:%d: names %q, an internal of oprov: say what it does for the reader, and put the name in docs/architecture.md", p, i+1, m[2])
			}
			if m := jargonRE.FindString(line); m != "" {
				t.Errorf("%s:%d: says %q, the implementation's word: say what happens for the reader, and leave the term to docs/architecture.md", p, i+1, m)
			}
		}
	}
}
