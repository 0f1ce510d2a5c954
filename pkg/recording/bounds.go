package recording

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/oprov/oprov/pkg/oci"
)

// A recording arrives from whoever wrote it (a pull request, a colleague): what it can make
// oprov do is bounded, each bound checked before the work it guards, and the error names the
// bound (docs/recording-format.md, "Bounds").

// Limits bound what a recording can make Read and replay hold: its size, its calls and one line.
// A recording over one of them is refused with an oci.LimitError naming the setting that raises
// it. A zero field takes its default.
type Limits struct {
	// MaxBytes bounds the whole file.
	MaxBytes int64
	// MaxCalls bounds the calls of all its providers together.
	MaxCalls int
	// MaxLine bounds one line (a provider's schema is the largest).
	MaxLine int
}

// The settings of Limits, named so that the program that set them can say how to raise them.
const (
	SettingMaxRecordingBytes oci.Setting = "maximum recording size"
	SettingMaxRecordingCalls oci.Setting = "maximum recorded calls"
	SettingMaxRecordingLine  oci.Setting = "maximum recording line"
)

// defaultLimits are far above what a recorded run needs: a 200-resource apply is some 2,000
// calls and a few MiB, and the largest provider schemas some tens of MiB.
func defaultLimits() Limits {
	return Limits{MaxBytes: 1 << 30, MaxCalls: 1_000_000, MaxLine: 256 << 20}
}

// withDefaults gives l with the default in place of every limit left at zero.
func (l Limits) withDefaults() Limits {
	d := defaultLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxCalls <= 0 {
		l.MaxCalls = d.MaxCalls
	}
	if l.MaxLine <= 0 {
		l.MaxLine = d.MaxLine
	}
	return l
}

// The fixed bounds: no recording oprov writes comes near them, and what lies past them is a
// hostile file, not a larger run.
const (
	// maxDepth bounds how deeply a line's JSON nests; every walk of a recorded value is at most
	// this deep (plus a path's steps), so no walk's recursion is the file's to choose.
	maxDepth = 512
	// maxPathSteps bounds the steps of a path (unknown, redacted, requires_replace, a
	// diagnostic's attribute): a path longer than any value is deep addresses nothing.
	maxPathSteps = maxDepth
	// maxNumberDigits bounds the digits of a number as written: cty's numbers hold 512 bits,
	// some 155 digits.
	maxNumberDigits = 1000
	// maxExponent bounds a number's written exponent (float64 reaches 1e308): a number is
	// written out in full where no float64 holds it, so 1e600000000 would be 600 million digits.
	maxExponent = 1000
)

// errTooBig is what a bounded reader gives past its limit.
var errTooBig = errors.New("too big")

// boundedReader reads at most max bytes from r, then fails with errTooBig.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a file of exactly max bytes from a larger one.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, errTooBig
		}
		return b.r.Read(p[:0])
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// checkJSONBounds scans one line's JSON, without building anything, for nesting deeper than
// maxDepth and numbers past maxNumberDigits or maxExponent. What is not JSON is left for the
// decoder to refuse.
func checkJSONBounds(b []byte) error {
	depth := 0
	// Each open object's keys so far, and whether the next string in it is a key: a key twice in
	// one object is refused (a decoder keeps the last, a reader may see the first).
	var objs []*objectKeys
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			start := i
			escaped := false
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					escaped = true
					i++
				}
			}
			if n := len(objs); n > 0 && objs[n-1] != nil && objs[n-1].expectKey && i < len(b) {
				o := objs[n-1]
				o.expectKey = false
				key := string(b[start+1 : i])
				if escaped {
					var k string
					if json.Unmarshal(b[start:i+1], &k) == nil {
						key = k
					}
				}
				if o.seen(key) {
					return fmt.Errorf("the key %s twice in one object (at byte %d): a line holds each field once", quoted(key), start+1)
				}
			}
		case c == ',':
			if n := len(objs); n > 0 && objs[n-1] != nil {
				objs[n-1].expectKey = true
			}
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return fmt.Errorf("JSON nested more than %d deep (at byte %d); a recording nests at most %d deep", maxDepth, i+1, maxDepth)
			}
			if c == '{' {
				objs = append(objs, &objectKeys{expectKey: true})
			} else {
				objs = append(objs, nil)
			}
		case c == '}' || c == ']':
			depth--
			if len(objs) > 0 {
				objs = objs[:len(objs)-1]
			}
		case c == '-' || c >= '0' && c <= '9':
			start := i
			for i < len(b) && strings.IndexByte("+-.0123456789eE", b[i]) >= 0 {
				i++
			}
			if err := checkNumber(b[start:i]); err != nil {
				return fmt.Errorf("the number at byte %d: %v", start+1, err)
			}
			i--
		}
	}
	return nil
}

// objectKeys are one JSON object's keys as the scan meets them: a slice while few, a set after.
type objectKeys struct {
	expectKey bool
	keys      []string
	set       map[string]bool
}

// seen adds key, and reports whether the object had it already.
func (o *objectKeys) seen(key string) bool {
	if o.set != nil {
		if o.set[key] {
			return true
		}
		o.set[key] = true
		return false
	}
	for _, k := range o.keys {
		if k == key {
			return true
		}
	}
	if o.keys = append(o.keys, key); len(o.keys) > 16 {
		o.set = map[string]bool{}
		for _, k := range o.keys {
			o.set[k] = true
		}
		o.keys = nil
	}
	return false
}

// checkNumber bounds a number's digits and exponent as written, before it is parsed.
func checkNumber(n []byte) error {
	mant, exp := n, []byte(nil)
	if k := strings.IndexAny(string(n), "eE"); k >= 0 {
		mant, exp = n[:k], n[k+1:]
	}
	digits := 0
	for _, c := range mant {
		if c >= '0' && c <= '9' {
			digits++
		}
	}
	if digits > maxNumberDigits {
		return fmt.Errorf("%d digits; a recording holds numbers of at most %d digits", digits, maxNumberDigits)
	}
	if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	for len(exp) > 1 && exp[0] == '0' {
		exp = exp[1:]
	}
	if len(exp) == 0 {
		return nil
	}
	e, err := strconv.Atoi(string(exp))
	if err != nil || len(exp) > 9 || e > maxExponent {
		shown := string(exp)
		if len(shown) > 20 {
			shown = shown[:20] + "..."
		}
		return fmt.Errorf("an exponent of %s; a recording holds exponents of at most %d either way", shown, maxExponent)
	}
	return nil
}

// checkPathLen bounds a path's steps.
func checkPathLen(n int) error {
	if n > maxPathSteps {
		return fmt.Errorf("a path of %d steps; a recording holds paths of at most %d", n, maxPathSteps)
	}
	return nil
}

// checkName makes sure a name from a recording (a provider's address, a call, a type) is one
// line of printable text, so that it can be named in a message as it is.
func checkName(what, s string) error {
	if len(s) > 1024 {
		return fmt.Errorf("a %s of %d bytes; a recording holds names of at most 1024", what, len(s))
	}
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("the %s %s is not a name (it holds a space, a control character or invalid UTF-8)", what, quoted(s))
		}
	}
	return nil
}

// quoted is s as it may reach a terminal in a one-line message: itself when every character is
// printable, else quoted with Go's escapes, so that a recording cannot send control sequences.
func quoted(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// escapeControls is text from a recording (a diagnostic, an error message) as it may reach a
// terminal: lines and tabs kept, every other control or unprintable character and invalid UTF-8
// written as its Go escape (\x1b, \u202e).
func escapeControls(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || r != '\n' && r != '\t' && !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// quoteTexts gives a recorded answer with its texts (diagnostics' summary and detail, a
// function's error, a stop's error) passed through escapeControls: tofu prints them. The
// recording is left as it is; a message without control characters is the same message.
func quoteTexts(m Msg) Msg {
	var out Msg
	set := func(k string, v any) {
		if out == nil {
			out = make(Msg, len(m))
			for k, v := range m {
				out[k] = v
			}
		}
		out[k] = v
	}
	if s, ok := m["error"].(string); ok && escapeControls(s) != s {
		set("error", escapeControls(s))
	}
	if fe, ok := m["error"].(map[string]any); ok {
		if q := quoteFields(fe, "text"); q != nil {
			set("error", q)
		}
	}
	if l, ok := m["diagnostics"].([]any); ok {
		var nl []any
		for i, d := range l {
			dm, ok := d.(map[string]any)
			if !ok {
				continue
			}
			if q := quoteFields(dm, "summary", "detail"); q != nil {
				if nl == nil {
					nl = append([]any(nil), l...)
				}
				nl[i] = q
			}
		}
		if nl != nil {
			set("diagnostics", nl)
		}
	}
	if out == nil {
		return m
	}
	return out
}

// quoteFields gives a copy of m with its string fields names escaped, or nil when none changes.
func quoteFields(m map[string]any, names ...string) map[string]any {
	var out map[string]any
	for _, n := range names {
		s, ok := m[n].(string)
		if !ok || escapeControls(s) == s {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(m))
			for k, v := range m {
				out[k] = v
			}
		}
		out[n] = escapeControls(s)
	}
	return out
}
