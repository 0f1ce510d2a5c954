package pybuild

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// markerVariables are the names an environment marker may compare (PEP 508, with the dotted
// spellings packaging still reads, and PEP 751's extras and dependency_groups, which a lock
// file's markers use).
var markerVariables = map[string]bool{
	"python_version": true, "python_full_version": true, "os_name": true, "sys_platform": true,
	"platform_release": true, "platform_system": true, "platform_version": true,
	"platform_machine": true, "platform_python_implementation": true, "implementation_name": true,
	"implementation_version": true, "extra": true, "extras": true, "dependency_groups": true,
	"os.name": true, "sys.platform": true, "platform.version": true, "platform.machine": true,
	"platform.python_implementation": true, "python_implementation": true,
}

// markerOperators are PEP 508's comparison operators, longest first.
var markerOperators = []string{"===", "<=", ">=", "!=", "==", "~=", "<", ">"}

// markerStringChars are the characters PEP 508 allows inside a quoted string (python_str_c),
// besides ASCII letters and digits and the other quote.
const markerStringChars = " \t().{}-_*#:;,/?[]!~`@$%^&=+|<>"

// maxMarkerDepth bounds the nesting of parentheses in a marker.
const maxMarkerDepth = 32

// checkMarker reports whether s is a PEP 508 environment marker:
//
//	marker = and ("or" and)*      and  = expr ("and" expr)*
//	expr   = "(" marker ")" | value op value
//	value  = a marker variable | a quoted string of PEP 508's characters
//	op     = < <= != == >= > ~= === | in | not in
//
// with spaces and tabs between tokens. Anything else (a line break of any kind, a control
// character, a backslash, a character outside ASCII) is refused, saying where.
func checkMarker(s string) error {
	p := &markerParser{s: s}
	if err := p.or(0); err != nil {
		return err
	}
	if p.skip(); p.i != len(s) {
		return p.errorf("want and, or or the end")
	}
	return nil
}

type markerParser struct {
	s string
	i int
}

func (p *markerParser) errorf(format string, args ...any) error {
	rest := p.s[p.i:]
	if rest == "" {
		return fmt.Errorf("at its end: "+format, args...)
	}
	if n := 24; len(rest) > n {
		for k := 0; k < utf8.UTFMax-1 && !utf8.RuneStart(rest[n]); k++ {
			n-- // not inside a character, when the bytes are UTF-8
		}
		rest = rest[:n] + "..."
	}
	return fmt.Errorf("at byte %d (%q): "+format, append([]any{p.i, rest}, args...)...)
}

func (p *markerParser) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// word is the run of name characters at the position (after white space), not consumed.
func (p *markerParser) word() string {
	p.skip()
	j := p.i
	for j < len(p.s) && (isAlnum(p.s[j]) || p.s[j] == '_' || p.s[j] == '.') {
		j++
	}
	return p.s[p.i:j]
}

// keyword consumes w when it is the next word.
func (p *markerParser) keyword(w string) bool {
	if p.word() == w {
		p.i += len(w)
		return true
	}
	return false
}

func (p *markerParser) or(depth int) error {
	for {
		if err := p.and(depth); err != nil {
			return err
		}
		if !p.keyword("or") {
			return nil
		}
	}
}

func (p *markerParser) and(depth int) error {
	for {
		if err := p.expr(depth); err != nil {
			return err
		}
		if !p.keyword("and") {
			return nil
		}
	}
}

func (p *markerParser) expr(depth int) error {
	p.skip()
	if p.i < len(p.s) && p.s[p.i] == '(' {
		if depth == maxMarkerDepth {
			return p.errorf("parentheses nested more than %d deep", maxMarkerDepth)
		}
		p.i++
		if err := p.or(depth + 1); err != nil {
			return err
		}
		if p.skip(); p.i == len(p.s) || p.s[p.i] != ')' {
			return p.errorf("want )")
		}
		p.i++
		return nil
	}
	if err := p.value(); err != nil {
		return err
	}
	if err := p.op(); err != nil {
		return err
	}
	return p.value()
}

func (p *markerParser) op() error {
	p.skip()
	for _, op := range markerOperators {
		if strings.HasPrefix(p.s[p.i:], op) {
			p.i += len(op)
			return nil
		}
	}
	if p.keyword("in") {
		return nil
	}
	if p.keyword("not") {
		if p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') && p.keyword("in") {
			return nil
		}
		return p.errorf("want in after not")
	}
	return p.errorf("want a comparison (< <= != == >= > ~= === in, not in)")
}

// value is a marker variable or a quoted string.
func (p *markerParser) value() error {
	p.skip()
	if p.i == len(p.s) {
		return p.errorf("want a marker variable or a quoted string")
	}
	if q := p.s[p.i]; q == '"' || q == '\'' {
		for j := p.i + 1; j < len(p.s); j++ {
			c := p.s[j]
			if c == q {
				p.i = j + 1
				return nil
			}
			if !isAlnum(c) && c != '"' && c != '\'' && !strings.ContainsRune(markerStringChars, rune(c)) {
				p.i = j
				r, _ := utf8.DecodeRuneInString(p.s[j:])
				return p.errorf("a quoted string holds %q (%U), which PEP 508 does not allow in one", r, r)
			}
		}
		return p.errorf("a quoted string that does not end")
	}
	if w := p.word(); markerVariables[w] {
		p.i += len(w)
		return nil
	}
	return p.errorf("want a marker variable (python_version, sys_platform, extra, ...) or a quoted string")
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
