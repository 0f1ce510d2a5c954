package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/internal/hcldiag"
	"github.com/oprov/oprov/pkg/scratch"
)

// LockFileName is the dependency lock file OpenTofu and Terraform keep beside the configuration.
const LockFileName = ".terraform.lock.hcl"

// LockEntry is one provider block of a lock file.
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

// Lock is a lock file. Entries oprov does not set are written back byte for byte.
type Lock struct {
	Path    string
	src     []byte
	spans   map[string][2]int // address -> byte range of its block in src
	Entries map[string]*LockEntry
	changed map[string]bool
}

// ReadLock reads dir/.terraform.lock.hcl; a missing file is an empty lock.
func ReadLock(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFileName)
	l := &Lock{Path: path, spans: map[string][2]int{}, Entries: map[string]*LockEntry{}, changed: map[string]bool{}}
	src, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	l.src = src
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%w (fix or delete the lock file)", hcldiag.Error(diags))
	}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "provider" || len(b.Labels) != 1 {
			continue
		}
		e := &LockEntry{Addr: b.Labels[0]}
		for name, attr := range b.Body.Attributes {
			v, d := attr.Expr.Value(nil)
			if d.HasErrors() {
				return nil, hcldiag.Error(d)
			}
			switch name {
			case "version":
				if v.Type() == cty.String {
					e.Version = v.AsString()
				}
			case "constraints":
				if v.Type() == cty.String {
					e.Constraints = v.AsString()
				}
			case "hashes":
				if v.CanIterateElements() {
					for it := v.ElementIterator(); it.Next(); {
						_, h := it.Element()
						if h.Type() == cty.String {
							e.Hashes = append(e.Hashes, h.AsString())
						}
					}
				}
			}
		}
		r := b.Range()
		l.spans[e.Addr] = [2]int{r.Start.Byte, r.End.Byte}
		l.Entries[e.Addr] = e
	}
	return l, nil
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

// Bytes renders the lock: blocks that were set replace their old text in place (or are added at
// the end, in address order); everything else is the file's original bytes.
func (l *Lock) Bytes() []byte {
	var out bytes.Buffer
	if l.src == nil {
		out.WriteString("# This file is maintained automatically by \"tofu init\".\n# Manual edits may be lost in future updates.\n")
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
		out.WriteString(renderBlock(l.Entries[s.addr]))
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
		out.WriteString(renderBlock(l.Entries[addr]))
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// renderBlock writes one provider block the way tofu init does.
func renderBlock(e *LockEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "provider %q {\n", e.Addr)
	fmt.Fprintf(&b, "  version     = %q\n", e.Version)
	if e.Constraints != "" {
		fmt.Fprintf(&b, "  constraints = %q\n", NormalizeConstraints(e.Constraints))
	}
	b.WriteString("  hashes = [\n")
	for _, h := range e.Hashes {
		fmt.Fprintf(&b, "    %q,\n", h)
	}
	b.WriteString("  ]\n}")
	return b.String()
}

// Write saves the lock atomically, if anything was set.
func (l *Lock) Write() error {
	if !l.Changed() {
		return nil
	}
	return scratch.WriteFileAtomic(l.Path, func(w io.Writer) error { _, err := w.Write(l.Bytes()); return err })
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
