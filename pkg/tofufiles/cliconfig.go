package tofufiles

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// CLIConfig is an OpenTofu (or Terraform) CLI configuration: its provider_installation block,
// modelled, and every other setting (credentials and host blocks, oci_default_credentials,
// plugin_cache_dir, ...) kept as a generic item, in the order read.
type CLIConfig struct {
	// Comment is written first, one "# " line each.
	Comment []string
	// Settings are the top-level items other than provider_installation, written after it,
	// SettingsComment above them.
	Settings        []Item
	SettingsComment []string
	// Installation is the provider_installation block; nil for none.
	Installation *Installation
}

// Installation is a provider_installation block.
type Installation struct {
	// From and Line say where it was read ("" for oprov's own).
	From string
	Line int
	// Comment is written above the block.
	Comment []string
	Methods []Method
}

// Method kinds of a provider_installation block.
const (
	Direct           = "direct"
	FilesystemMirror = "filesystem_mirror"
	NetworkMirror    = "network_mirror"
	OCIMirror        = "oci_mirror"
	DevOverrides     = "dev_overrides"
)

// Method is one installation method.
type Method struct {
	Kind string
	// Path is a filesystem_mirror's directory, URL a network_mirror's base URL and
	// RepositoryTemplate an oci_mirror's template (as OpenTofu parses it: an HCL 2 template, its
	// ${namespace} and ${type} kept; see TemplateLiteral for a literal part).
	Path, URL, RepositoryTemplate string
	Include, Exclude              []string
	// Overrides are a dev_overrides block's entries, in order.
	Overrides []Override
	// Other holds the arguments oprov does not set (download_retry_count, trust_all_hashes, ...).
	Other []Item
}

// Override is one dev_overrides entry: a provider's source address and its directory.
type Override struct{ Provider, Dir string }

// Item is a generic setting: an attribute (one key, a value that is not an object) or a block
// (keys: its type and labels; value: an object).
type Item struct {
	Keys  []string
	Value Value
	// From and Line say where it was read, for messages.
	From string
	Line int
	// Assign writes an object value as an attribute (services = { ... }), not as a block.
	Assign bool
}

// Kinds of Value.
const (
	String Kind = iota
	kindNumber
	kindBool
	kindList
	kindObject
)

// Kind is a Value's kind.
type Kind int

// Value is a setting's value as HCL 1 holds it.
type Value struct {
	Kind Kind
	// Text is a string's value, or a number's or bool's literal text.
	Text   string
	List   []Value
	Object []Item
}

// str is a string value.
func str(s string) Value { return Value{Kind: String, Text: s} }

// block is a block item.
func block(keys []string, body ...Item) Item {
	return Item{Keys: keys, Value: Value{Kind: kindObject, Object: body}}
}

// attr is an attribute item.
func attr(name string, v Value) Item { return Item{Keys: []string{name}, Value: v} }

// strList is a list of strings.
func strList(items []string) Value {
	v := Value{Kind: kindList}
	for _, s := range items {
		v.List = append(v.List, str(s))
	}
	return v
}

// Strings gives a list value's strings, and whether it is a list of strings.
func (v Value) Strings() ([]string, bool) {
	if v.Kind != kindList {
		return nil, false
	}
	out := make([]string, 0, len(v.List))
	for _, e := range v.List {
		if e.Kind != String {
			return nil, false
		}
		out = append(out, e.Text)
	}
	return out, true
}

// Name is an item's keys as written: type and quoted labels.
func (it Item) Name() string {
	if len(it.Keys) < 2 {
		return strings.Join(it.Keys, "")
	}
	return fmt.Sprintf("%s %q", it.Keys[0], strings.Join(it.Keys[1:], " "))
}

// IsBlock reports whether the item is a block.
func (it Item) IsBlock() bool { return it.Value.Kind == kindObject }

// OCIDefaultCredentials is the oci_default_credentials block that points OpenTofu at Docker-style
// credential files.
func OCIDefaultCredentials(files []string) Item {
	return block([]string{"oci_default_credentials"}, attr("docker_style_config_files", strList(files)))
}

// Bytes renders the configuration as HCL 1 reads it (see the package comment).
func (c *CLIConfig) Bytes() ([]byte, error) {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	appendComment(body, c.Comment)
	if in := c.Installation; in != nil {
		appendComment(body, in.Comment)
		inst := body.AppendNewBlock("provider_installation", nil).Body()
		for _, m := range in.Methods {
			if err := appendItem(inst, m.item()); err != nil {
				return nil, fmt.Errorf("provider_installation %s: %w", m.Kind, err)
			}
		}
	}
	if len(c.Settings) > 0 && len(c.SettingsComment) > 0 {
		body.AppendNewline()
		appendComment(body, c.SettingsComment)
	}
	for _, it := range c.Settings {
		if err := appendItem(body, it); err != nil {
			return nil, fmt.Errorf("%s: %w", it.Name(), err)
		}
	}
	return f.Bytes(), nil
}

// String renders the configuration, or says why it cannot be.
func (c *CLIConfig) String() string {
	b, err := c.Bytes()
	if err != nil {
		return "# " + err.Error() + "\n"
	}
	return string(b)
}

func appendComment(body *hclwrite.Body, lines []string) {
	for _, l := range lines {
		l = strings.ReplaceAll(strings.ReplaceAll(l, "\r", " "), "\n", " ")
		body.AppendUnstructuredTokens(hclwrite.Tokens{{Type: hclsyntax.TokenComment, Bytes: []byte("# " + l + "\n")}})
	}
}

// item is the method as a generic block: the arguments oprov knows first, then the others.
func (m Method) item() Item {
	var body []Item
	if m.Kind == DevOverrides {
		for _, o := range m.Overrides {
			body = append(body, attr(o.Provider, str(o.Dir)))
		}
		return block([]string{m.Kind}, append(body, m.Other...)...)
	}
	for _, a := range []struct{ name, v string }{{"path", m.Path}, {"url", m.URL}, {"repository_template", m.RepositoryTemplate}} {
		if a.v != "" {
			body = append(body, attr(a.name, str(a.v)))
		}
	}
	if m.Include != nil {
		body = append(body, attr("include", strList(m.Include)))
	}
	if m.Exclude != nil {
		body = append(body, attr("exclude", strList(m.Exclude)))
	}
	return block([]string{m.Kind}, append(body, m.Other...)...)
}

// appendItem writes an item into body: a block through hclwrite's blocks when its type is an
// identifier and its labels need no template escape (which hclwrite would write HCL 2's way),
// otherwise as tokens; an attribute as tokens, its name quoted when it is not an identifier
// (dev_overrides' "hashicorp/null" = ...).
func appendItem(body *hclwrite.Body, it Item) error {
	if len(it.Keys) == 0 {
		return fmt.Errorf("an item without a name")
	}
	if !it.IsBlock() || it.Assign {
		if len(it.Keys) > 1 { // HCL 1 reads a b = v as a { b = v }
			return appendItem(body, block(it.Keys[:1], Item{Keys: it.Keys[1:], Value: it.Value}))
		}
		toks, err := keyTokens(it.Keys[0])
		if err != nil {
			return err
		}
		v, err := valueTokens(it.Value)
		if err != nil {
			return err
		}
		toks = append(toks, &hclwrite.Token{Type: hclsyntax.TokenEqual, Bytes: []byte("=")})
		body.AppendUnstructuredTokens(append(append(toks, v...), newline()))
		return nil
	}
	if !hclsyntax.ValidIdentifier(it.Keys[0]) || !labelsSafe(it.Keys[1:]) {
		toks, err := blockTokens(it)
		if err != nil {
			return err
		}
		body.AppendUnstructuredTokens(toks)
		return nil
	}
	blk := body.AppendNewBlock(it.Keys[0], it.Keys[1:]).Body()
	for _, sub := range it.Value.Object {
		if err := appendItem(blk, sub); err != nil {
			return err
		}
	}
	return nil
}

// labelsSafe reports whether hclwrite's label quoting (HCL 2's) reads back the same in HCL 1.
func labelsSafe(labels []string) bool {
	for _, l := range labels {
		if strings.Contains(l, "${") || strings.Contains(l, "%{") {
			return false
		}
	}
	return true
}

func newline() *hclwrite.Token {
	return &hclwrite.Token{Type: hclsyntax.TokenNewline, Bytes: []byte("\n")}
}

// keyTokens writes a key: bare when it is an identifier, quoted otherwise.
func keyTokens(k string) (hclwrite.Tokens, error) {
	if hclsyntax.ValidIdentifier(k) {
		return hclwrite.Tokens{{Type: hclsyntax.TokenIdent, Bytes: []byte(k)}}, nil
	}
	return hcl1String(k)
}

// blockTokens writes a block as tokens: keys, then the body in braces.
func blockTokens(it Item) (hclwrite.Tokens, error) {
	var toks hclwrite.Tokens
	for i, k := range it.Keys {
		var t hclwrite.Tokens
		var err error
		if i == 0 {
			t, err = keyTokens(k)
		} else {
			t, err = hcl1String(k)
		}
		if err != nil {
			return nil, err
		}
		toks = append(toks, t...)
	}
	inner, err := objectTokens(it.Value.Object)
	if err != nil {
		return nil, err
	}
	return append(append(toks, inner...), newline()), nil
}

// objectTokens writes { ... } with one item a line.
func objectTokens(items []Item) (hclwrite.Tokens, error) {
	toks := hclwrite.Tokens{{Type: hclsyntax.TokenOBrace, Bytes: []byte("{")}, newline()}
	for _, sub := range items {
		f := hclwrite.NewEmptyFile()
		if err := appendItem(f.Body(), sub); err != nil {
			return nil, err
		}
		toks = append(toks, f.Body().BuildTokens(nil)...)
	}
	return append(toks, &hclwrite.Token{Type: hclsyntax.TokenCBrace, Bytes: []byte("}")}), nil
}

// valueTokens writes an attribute's value.
func valueTokens(v Value) (hclwrite.Tokens, error) {
	switch v.Kind {
	case String:
		return hcl1String(v.Text)
	case kindNumber:
		return hclwrite.Tokens{{Type: hclsyntax.TokenNumberLit, Bytes: []byte(v.Text)}}, nil
	case kindBool:
		return hclwrite.Tokens{{Type: hclsyntax.TokenIdent, Bytes: []byte(v.Text)}}, nil
	case kindList:
		elems := make([]hclwrite.Tokens, len(v.List))
		for i, e := range v.List {
			t, err := valueTokens(e)
			if err != nil {
				return nil, err
			}
			elems[i] = t
		}
		return hclwrite.TokensForTuple(elems), nil
	case kindObject:
		return objectTokens(v.Object)
	}
	return nil, fmt.Errorf("a value of unknown kind %d", v.Kind)
}
