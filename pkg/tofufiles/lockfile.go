package tofufiles

import (
	"bytes"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// LockEntry is one provider block of a dependency lock file.
type LockEntry struct {
	Addr        string
	Version     string
	Constraints string
	Hashes      []string
}

// Has reports whether the entry records a hash.
func (e *LockEntry) Has(hash string) bool {
	for _, h := range e.Hashes {
		if h == hash {
			return true
		}
	}
	return false
}

// HasScheme reports whether the entry records any hash of a scheme ("zh:" or "h1:").
func (e *LockEntry) HasScheme(prefix string) bool {
	for _, h := range e.Hashes {
		if strings.HasPrefix(h, prefix) {
			return true
		}
	}
	return false
}

// Lock is a dependency lock file (.terraform.lock.hcl, HCL 2). Blocks that were set are written
// with hclwrite as tofu init writes them; everything else (other providers' blocks, blocks of
// other types, comments) is written back byte for byte.
type Lock struct {
	src     []byte
	spans   map[string][2]int // address -> byte range of its block in src
	Entries map[string]*LockEntry
	changed map[string]bool
}

// NewLock is an empty lock, for a file that is not there yet.
func NewLock() *Lock {
	return &Lock{spans: map[string][2]int{}, Entries: map[string]*LockEntry{}, changed: map[string]bool{}}
}

// ParseLock reads a lock file's text; filename is for diagnostics.
func ParseLock(filename string, src []byte) (*Lock, hcl.Diagnostics) {
	l := NewLock()
	l.src = src
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "provider" || len(b.Labels) != 1 {
			continue
		}
		e := &LockEntry{Addr: b.Labels[0]}
		for name, attr := range b.Body.Attributes {
			v, d := attr.Expr.Value(nil)
			if d.HasErrors() {
				return nil, d
			}
			e.set(name, v)
		}
		r := b.Range()
		l.spans[e.Addr] = [2]int{r.Start.Byte, r.End.Byte}
		l.Entries[e.Addr] = e
	}
	return l, nil
}

// set takes one attribute of a provider block; others are left to the block's bytes.
func (e *LockEntry) set(name string, v cty.Value) {
	switch {
	case name == "version" && v.Type() == cty.String:
		e.Version = v.AsString()
	case name == "constraints" && v.Type() == cty.String:
		e.Constraints = v.AsString()
	case name == "hashes" && v.CanIterateElements():
		for it := v.ElementIterator(); it.Next(); {
			_, h := it.Element()
			if h.Type() == cty.String {
				e.Hashes = append(e.Hashes, h.AsString())
			}
		}
	}
}

// Set replaces or adds a provider's entry. Hashes are sorted and de-duplicated.
func (l *Lock) Set(e *LockEntry) {
	seen := map[string]bool{}
	var hs []string
	for _, h := range e.Hashes {
		if !seen[h] {
			seen[h] = true
			hs = append(hs, h)
		}
	}
	sort.Strings(hs)
	e.Hashes = hs
	l.Entries[e.Addr] = e
	l.changed[e.Addr] = true
}

// Changed reports whether Set was called since the lock was read.
func (l *Lock) Changed() bool { return len(l.changed) > 0 }

// lockHeader is what tofu init writes at the top of a new lock file.
const lockHeader = "# This file is maintained automatically by \"tofu init\".\n# Manual edits may be lost in future updates.\n"

// Bytes renders the lock: blocks that were set replace their old text in place (or are added at
// the end, in address order); everything else is the file's original bytes.
func (l *Lock) Bytes() []byte {
	var out bytes.Buffer
	if l.src == nil {
		out.WriteString(lockHeader)
	}
	type splice struct {
		start, end int
		addr       string
	}
	var inPlace []splice
	var added []string
	for addr := range l.changed {
		if span, ok := l.spans[addr]; ok {
			inPlace = append(inPlace, splice{span[0], span[1], addr})
		} else {
			added = append(added, addr)
		}
	}
	sort.Slice(inPlace, func(i, j int) bool { return inPlace[i].start < inPlace[j].start })
	sort.Strings(added)
	pos := 0
	for _, s := range inPlace {
		out.Write(l.src[pos:s.start])
		out.Write(lockBlock(l.Entries[s.addr]))
		pos = s.end
	}
	out.Write(l.src[pos:])
	for _, addr := range added {
		if b := out.Bytes(); len(b) > 0 && !bytes.HasSuffix(b, []byte("\n\n")) {
			if !bytes.HasSuffix(b, []byte("\n")) {
				out.WriteByte('\n')
			}
			out.WriteByte('\n')
		}
		out.Write(lockBlock(l.Entries[addr]))
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// lockBlock writes one provider block as tofu init does (hclwrite, hashes one a line), without
// the final newline.
func lockBlock(e *LockEntry) []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body().AppendNewBlock("provider", []string{e.Addr}).Body()
	body.SetAttributeValue("version", cty.StringVal(e.Version))
	if e.Constraints != "" {
		body.SetAttributeValue("constraints", cty.StringVal(NormalizeConstraints(e.Constraints)))
	}
	toks := hclwrite.Tokens{{Type: hclsyntax.TokenOBrack, Bytes: []byte("[")}, newline()}
	for _, h := range e.Hashes {
		toks = append(toks, hclwrite.TokensForValue(cty.StringVal(h))...)
		toks = append(toks, &hclwrite.Token{Type: hclsyntax.TokenComma, Bytes: []byte(",")}, newline())
	}
	body.SetAttributeRaw("hashes", append(toks, &hclwrite.Token{Type: hclsyntax.TokenCBrack, Bytes: []byte("]")}))
	return bytes.TrimSuffix(f.Bytes(), []byte("\n"))
}

// NormalizeConstraints writes version constraints in the normalized form Terraform requires of
// a lock file (it refuses ">= 1.0", wanting ">= 1.0.0"): every version but a "~>" one's gets
// all three parts; "~>" keeps the precision it was given, which is its meaning. Anything it does
// not understand is kept as written.
func NormalizeConstraints(s string) string {
	parts := strings.Split(s, ",")
	for i, c := range parts {
		c = strings.TrimSpace(c)
		op := ""
		for _, o := range []string{"~>", ">=", "<=", "!=", ">", "<", "="} {
			if strings.HasPrefix(c, o) {
				op = o
				break
			}
		}
		v := strings.TrimSpace(strings.TrimPrefix(c, op))
		if op != "~>" {
			core, rest := v, ""
			if j := strings.IndexAny(v, "-+"); j >= 0 {
				core, rest = v[:j], v[j:]
			}
			n := strings.Count(core, ".") + 1
			if core != "" && n < 3 && strings.Trim(core, "0123456789.") == "" {
				v = core + strings.Repeat(".0", 3-n) + rest
			}
		}
		if op != "" {
			c = op + " " + v
		} else {
			c = v
		}
		parts[i] = c
	}
	return strings.Join(parts, ", ")
}
