// Package tofufiles models OpenTofu's own files that oprov reads and writes, the CLI
// configuration and the dependency lock file, and renders both with hclwrite, so that whatever
// paths, URLs and addresses go in, OpenTofu reads back the same values.
//
// The two files are read by different parsers, and quoting follows the reader:
//
//   - the lock file is HCL 2 (hclsyntax): strings are escaped as hclwrite escapes them, "${" and
//     "%{" doubled into "$${" and "%%{";
//   - the CLI configuration is HCL 1 (github.com/hashicorp/hcl, as OpenTofu and Terraform read
//     it), which knows no "$${" escape: HCL 1 copies "${...}" as it stands, so "$${" would read
//     back as "$${". A "${" or "%{" that is not a plain "${NAME}" is written "\u0024{" or
//     "\u0025{" instead, an escape both HCL 1 and HCL 2 read as the one character.
package tofufiles

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// hcl1Literal is s escaped for the inside of a quoted string that HCL 1 reads back as s. An
// interpolation-like "${NAME}" (a repository_template's ${namespace}, a path's ${HOME}) is kept as
// it stands, which HCL 1 reads literally and HCL 2 parses as a template; any other "${" and every
// "%{" is escaped. Strings that are not UTF-8 cannot be written (HCL 1 reads them as U+FFFD).
func hcl1Literal(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%q is not UTF-8 text, which an OpenTofu CLI configuration cannot hold", s)
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		next := s[i+size:]
		switch {
		case r == '$' && strings.HasPrefix(next, "${"):
			b.WriteString(`\u0024`) // HCL 2 would read $${ as an escaped ${
		case r == '$' && strings.HasPrefix(next, "{"):
			if n := plainInterpolation(s[i:]); n > 0 {
				b.WriteString(s[i : i+n])
				i += n
				continue
			}
			b.WriteString(`\u0024`)
		case r == '%' && strings.HasPrefix(next, "{"):
			b.WriteString(`\u0025`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		default:
			escapeRune(&b, r)
		}
		i += size
	}
	return b.String(), nil
}

// escapeRune writes r as the inside of a quoted string that HCL 1 and HCL 2 both read back as r:
// a quote, a backslash, a newline and any character that is not printable escaped.
func escapeRune(b *strings.Builder, r rune) {
	switch {
	case r == '"':
		b.WriteString(`\"`)
	case r == '\\':
		b.WriteString(`\\`)
	case r == '\n':
		b.WriteString(`\n`)
	case !unicode.IsPrint(r) && r < 0x10000:
		fmt.Fprintf(b, `\u%04x`, r)
	case !unicode.IsPrint(r):
		fmt.Fprintf(b, `\U%08x`, r)
	default:
		b.WriteRune(r)
	}
}

// plainInterpolation gives the length of a "${NAME}" at the start of s (NAME an HCL identifier),
// or 0.
func plainInterpolation(s string) int {
	end := strings.IndexByte(s, '}')
	if end < 3 || !hclsyntax.ValidIdentifier(s[2:end]) {
		return 0
	}
	return end + 1
}

// hcl1String renders s as a quoted string for a CLI configuration.
func hcl1String(s string) (hclwrite.Tokens, error) {
	lit, err := hcl1Literal(s)
	if err != nil {
		return nil, err
	}
	toks := hclwrite.Tokens{{Type: hclsyntax.TokenOQuote, Bytes: []byte(`"`)}}
	if lit != "" {
		toks = append(toks, &hclwrite.Token{Type: hclsyntax.TokenQuotedLit, Bytes: []byte(lit)})
	}
	return append(toks, &hclwrite.Token{Type: hclsyntax.TokenCQuote, Bytes: []byte(`"`)}), nil
}

// TemplateLiteral escapes s for the literal part of an HCL 2 template (a repository_template):
// "${" and "%{" doubled, so that s is not taken for an interpolation or a directive.
func TemplateLiteral(s string) string {
	return strings.NewReplacer("${", "$${", "%{", "%%{").Replace(s)
}

// hcl2Template renders src, an HCL 2 template's source (its "${namespace}" kept), as a quoted
// template for an HCL 2 file such as oprov.hcl: quotes, backslashes and control characters
// escaped, template sequences left as they are.
func hcl2Template(src string) hclwrite.Tokens {
	var b strings.Builder
	for _, r := range src {
		escapeRune(&b, r)
	}
	return hclwrite.Tokens{
		{Type: hclsyntax.TokenOQuote, Bytes: []byte(`"`)},
		{Type: hclsyntax.TokenQuotedLit, Bytes: []byte(b.String())},
		{Type: hclsyntax.TokenCQuote, Bytes: []byte(`"`)},
	}
}

// HCLString renders s as a quoted HCL 2 string, as hclwrite writes one ("${" and "%{" doubled):
// for advice that quotes a line of oprov.hcl.
func HCLString(s string) string {
	return string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes())
}

// CLIString renders s as a quoted string of a CLI configuration (HCL 1), or reports why it
// cannot be one: for advice that quotes a line of the user's CLI configuration.
func CLIString(s string) (string, error) {
	toks, err := hcl1String(s)
	if err != nil {
		return "", err
	}
	return string(toks.Bytes()), nil
}
