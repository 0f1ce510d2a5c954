// Package doccheck reads the project's Markdown the way its checks need: links and the anchors
// GitHub makes for headings (for the link checker), fenced blocks with their markers (for the
// test that runs the documentation's examples), and paragraphs (for the check that nothing is
// said twice).
package doccheck

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Block is a fenced code block.
type Block struct {
	Lang   string // the info string's first word: sh, hcl, ...
	Marker string // the HTML comment on the line just before the fence, without <!-- -->; or ""
	Line   int    // 1-based line of the opening fence
	Text   string // the lines between the fences, each ending in "\n"
}

// Link is a Markdown inline link or image outside code.
type Link struct {
	Target string // as written: path, path#anchor or #anchor
	Line   int
}

// Doc is one Markdown file, split into what the checks read.
type Doc struct {
	Blocks  []Block
	Links   []Link
	Anchors map[string]bool // GitHub's heading anchors, and id= / name= of HTML tags
	Paras   []Para          // paragraphs and list items outside code blocks
}

// Para is a paragraph of prose, whitespace folded.
type Para struct {
	Text string
	Line int
}

var (
	fenceRE   = regexp.MustCompile("^ {0,3}(```+|~~~+)\\s*([^`\\s]*)")
	markerRE  = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkRE    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	codeRE    = regexp.MustCompile("`+[^`]*`+")
	idRE      = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:id|name)="([^"]+)"`)
	listRE    = regexp.MustCompile(`^\s*([-*+]|\d+\.)\s+`)
)

// Parse splits Markdown text.
func Parse(text string) *Doc {
	d := &Doc{Anchors: map[string]bool{}}
	slugs := map[string]int{}
	lines := strings.Split(text, "\n")
	var para []string
	paraLine := 0
	flush := func() {
		if len(para) > 0 {
			d.Paras = append(d.Paras, Para{Text: strings.Join(strings.Fields(strings.Join(para, " ")), " "), Line: paraLine})
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			flush()
			b := Block{Lang: m[2], Line: i + 1, Marker: markerBefore(lines, i)}
			for i++; i < len(lines) && !closesFence(lines[i], m[1]); i++ {
				b.Text += lines[i] + "\n"
			}
			d.Blocks = append(d.Blocks, b)
			continue
		}
		for _, id := range idRE.FindAllStringSubmatch(line, -1) {
			d.Anchors[id[1]] = true
		}
		if h := headingRE.FindStringSubmatch(line); h != nil {
			flush()
			d.Anchors[uniqueSlug(slugs, slug(h[2]))] = true
		}
		outside := codeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(outside, -1) {
			d.Links = append(d.Links, Link{Target: m[1], Line: i + 1})
		}
		switch {
		case strings.TrimSpace(line) == "" || headingRE.MatchString(line) || markerRE.MatchString(line) ||
			strings.HasPrefix(line, "    "):
			flush()
		case listRE.MatchString(line):
			flush()
			para, paraLine = []string{listRE.ReplaceAllString(line, "")}, i+1
		default:
			if len(para) == 0 {
				paraLine = i + 1
			}
			para = append(para, line)
		}
	}
	flush()
	return d
}

func closesFence(line, open string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, open[:3]) && strings.Trim(t, open[:1]) == "" && len(t) >= len(open)
}

// markerBefore gives the HTML comment on the line before a fence (blank lines between allowed).
func markerBefore(lines []string, i int) string {
	for j := i - 1; j >= 0; j-- {
		if strings.TrimSpace(lines[j]) == "" {
			continue
		}
		if m := markerRE.FindStringSubmatch(lines[j]); m != nil {
			return m[1]
		}
		return ""
	}
	return ""
}

func uniqueSlug(seen map[string]int, s string) string {
	n := seen[s]
	seen[s] = n + 1
	if n == 0 {
		return s
	}
	return fmt.Sprintf("%s-%d", s, n)
}

// slug is the anchor GitHub gives a heading: its text without Markdown (code spans keep their
// content, links their text), lowercased, every character but letters, digits, spaces, hyphens
// and underscores dropped, and spaces turned into hyphens.
func slug(heading string) string {
	heading = linkRE.ReplaceAllStringFunc(heading, func(l string) string {
		return l[strings.Index(l, "[")+1 : strings.LastIndex(l, "](")]
	})
	heading = strings.NewReplacer("`", "", "*", "").Replace(heading)
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
