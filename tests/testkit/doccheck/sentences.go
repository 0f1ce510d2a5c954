package doccheck

import (
	"regexp"
	"strings"
	"unicode"
)

var (
	sentenceEndRE = regexp.MustCompile(`[.!?]["')\]]*(\s+|$)`)
	emphasisRE    = regexp.MustCompile(`[*_]{1,3}`)
	commentRE     = regexp.MustCompile(`<!--.*?-->`)
	tagRE         = regexp.MustCompile(`<[^>]+>`)
)

// prose is the running text of a page for measuring: each paragraph, list item and table cell
// outside code, with code spans as one word each, links as their text and no Markdown marks.
func prose(text string) []string {
	var out []string
	var para []string
	flush := func() {
		if len(para) > 0 {
			out = append(out, strings.Join(para, " "))
		}
		para = nil
	}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			flush()
			for i++; i < len(lines) && !closesFence(lines[i], m[1]); i++ {
			}
			continue
		}
		t := strings.TrimSpace(line)
		switch {
		case t == "" || headingRE.MatchString(line) || markerRE.MatchString(line) || strings.HasPrefix(line, "    "):
			flush()
		case strings.HasPrefix(t, "|"):
			flush()
			if strings.Trim(t, "|-: ") == "" {
				continue // the line under a table's header
			}
			for _, cell := range strings.Split(strings.Trim(t, "|"), "|") {
				if c := strings.TrimSpace(cell); c != "" {
					out = append(out, c)
				}
			}
		case listRE.MatchString(line):
			flush()
			para = []string{listRE.ReplaceAllString(line, "")}
		default:
			para = append(para, t)
		}
	}
	flush()
	for i, p := range out {
		p = commentRE.ReplaceAllString(p, "")
		p = codeRE.ReplaceAllString(p, "CODE")
		p = linkRE.ReplaceAllStringFunc(p, func(l string) string {
			return l[strings.Index(l, "[")+1 : strings.LastIndex(l, "](")]
		})
		p = tagRE.ReplaceAllString(p, "")
		out[i] = emphasisRE.ReplaceAllString(p, "")
	}
	return out
}

// sentenceLength gives a page's words and sentences: a sentence ends at '.', '!' or '?' before a
// space, and at the end of a paragraph, list item or table cell. A word is a run of non-spaces
// holding a letter or digit. Fragments of one or two words (table cells such as "none", labels)
// are not sentences and are not counted.
func sentenceLength(text string) (words, sentences int) {
	for _, p := range prose(text) {
		for _, s := range sentenceEndRE.Split(p, -1) {
			n := 0
			for _, w := range strings.Fields(s) {
				if strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
					n++
				}
			}
			if n >= 3 { // shorter is a label ("none", a table header), not a sentence
				words += n
				sentences++
			}
		}
	}
	return words, sentences
}
