package tofufiles

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// ModuleLockEntry is one module block of a module lock, in the format of OpenTofu's draft RFC
// "Module Version Locking" (rfc/20251202-module-version-locking.md): the block's label is the
// module call's path (vpc, vpc.nested), its attributes the full source address, the version
// (registry version, git commit or OCI digest), the call's constraints and the hashes.
type ModuleLockEntry struct {
	Call        string
	Source      string
	Version     string
	Constraints string
	Hashes      []string
}

// Has reports whether the entry records a hash.
func (e *ModuleLockEntry) Has(hash string) bool {
	for _, h := range e.Hashes {
		if h == hash {
			return true
		}
	}
	return false
}

// ModuleLock is a module lock file: module blocks only, rendered whole with hclwrite.
type ModuleLock struct {
	Entries map[string]*ModuleLockEntry
}

// ParseModuleLock reads a module lock's text; filename is for diagnostics. Blocks of other types
// are refused: the file is oprov's own.
func ParseModuleLock(filename string, src []byte) (*ModuleLock, hcl.Diagnostics) {
	l := &ModuleLock{Entries: map[string]*ModuleLockEntry{}}
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	body := f.Body.(*hclsyntax.Body)
	for name, attr := range body.Attributes {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unexpected attribute",
			Detail: fmt.Sprintf("A module lock holds module blocks only, not %q.", name), Subject: attr.SrcRange.Ptr()}}
	}
	for _, b := range body.Blocks {
		if b.Type != "module" || len(b.Labels) != 1 {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unexpected block",
				Detail: `A module lock holds module "CALL" { ... } blocks only.`, Subject: b.DefRange().Ptr()}}
		}
		e := &ModuleLockEntry{Call: b.Labels[0]}
		if l.Entries[e.Call] != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Duplicate module block",
				Detail: fmt.Sprintf("Module %q is locked twice.", e.Call), Subject: b.DefRange().Ptr()}}
		}
		for name, attr := range b.Body.Attributes {
			v, d := attr.Expr.Value(nil)
			if d.HasErrors() {
				return nil, d
			}
			if err := e.set(name, v); err != nil {
				return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid module lock entry",
					Detail: err.Error(), Subject: attr.SrcRange.Ptr()}}
			}
		}
		l.Entries[e.Call] = e
	}
	return l, nil
}

func (e *ModuleLockEntry) set(name string, v cty.Value) error {
	str := func() (string, error) {
		if v.Type() != cty.String || v.IsNull() {
			return "", fmt.Errorf("%s must be a string", name)
		}
		return v.AsString(), nil
	}
	var err error
	switch name {
	case "source":
		e.Source, err = str()
	case "version":
		e.Version, err = str()
	case "constraints":
		e.Constraints, err = str()
	case "hashes":
		if !v.CanIterateElements() {
			return fmt.Errorf("hashes must be a list of strings")
		}
		for it := v.ElementIterator(); it.Next(); {
			_, h := it.Element()
			if h.Type() != cty.String || h.IsNull() {
				return fmt.Errorf("hashes must be a list of strings")
			}
			e.Hashes = append(e.Hashes, h.AsString())
		}
	}
	return err
}

// moduleLockHeader says what the file is and why it is not .terraform.lock.hcl.
const moduleLockHeader = `# This file is maintained automatically by "oprov lock" and "oprov init".
# It locks remote modules (OpenTofu's draft RFC "Module Version Locking" format). It is kept
# apart from .terraform.lock.hcl until OpenTofu reads module blocks there: today tofu warns on
# them and drops them when it rewrites that file.
`

// Bytes renders the whole lock, entries in call order, each as hclwrite writes it.
func (l *ModuleLock) Bytes() []byte {
	var out bytes.Buffer
	out.WriteString(moduleLockHeader)
	calls := make([]string, 0, len(l.Entries))
	for c := range l.Entries {
		calls = append(calls, c)
	}
	sort.Strings(calls)
	for _, c := range calls {
		out.WriteByte('\n')
		out.Write(moduleBlock(l.Entries[c]))
	}
	return out.Bytes()
}

func moduleBlock(e *ModuleLockEntry) []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body().AppendNewBlock("module", []string{e.Call}).Body()
	body.SetAttributeValue("source", cty.StringVal(e.Source))
	if e.Version != "" {
		body.SetAttributeValue("version", cty.StringVal(e.Version))
	}
	if e.Constraints != "" {
		body.SetAttributeValue("constraints", cty.StringVal(e.Constraints))
	}
	hs := append([]string(nil), e.Hashes...)
	sort.Strings(hs)
	toks := hclwrite.Tokens{{Type: hclsyntax.TokenOBrack, Bytes: []byte("[")}, newline()}
	for _, h := range hs {
		toks = append(toks, hclwrite.TokensForValue(cty.StringVal(h))...)
		toks = append(toks, &hclwrite.Token{Type: hclsyntax.TokenComma, Bytes: []byte(",")}, newline())
	}
	body.SetAttributeRaw("hashes", append(toks, &hclwrite.Token{Type: hclsyntax.TokenCBrack, Bytes: []byte("]")}))
	return f.Bytes()
}
