package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/internal/hcldiag"
	"github.com/oprov/oprov/manifest"
)

// Requirement is what a configuration asks of one provider: all the version constraints given
// for it across the root module and its local modules.
type Requirement struct {
	Addr        manifest.ProviderAddress
	Constraints []string    // each as written; all must hold
	Where       []hcl.Range // where each was declared
}

// ConstraintString joins the constraints as the lock file records them.
func (r *Requirement) ConstraintString() string {
	seen := map[string]bool{}
	var out []string
	for _, c := range r.Constraints {
		if c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return strings.Join(out, ", ")
}

var (
	rootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "terraform"},
		{Type: "module", LabelNames: []string{"name"}},
	}}
	terraformSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "required_providers"}}}
	moduleSchema    = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "source"}}}
)

// ReadRequirements reads the required_providers of the module in dir and of every module it calls
// by a local path (./ or ../), keyed by provider address. Nothing is declared twice: this is the
// configuration's own declaration.
func ReadRequirements(dir string) (map[string]*Requirement, error) {
	reqs := map[string]*Requirement{}
	seen := map[string]bool{}
	if err := readModule(dir, reqs, seen); err != nil {
		return nil, err
	}
	return reqs, nil
}

func readModule(dir string, reqs map[string]*Requirement, seen map[string]bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if seen[abs] {
		return nil
	}
	seen[abs] = true
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading module %s: %w", dir, err)
	}
	files, err := parseModuleFiles(dir, entries)
	if err != nil {
		return err
	}
	var calls []string
	for _, f := range files {
		c, err := readModuleFile(dir, f, reqs)
		if err != nil {
			return err
		}
		calls = append(calls, c...)
	}
	sort.Strings(calls)
	for _, c := range calls {
		if err := readModule(c, reqs, seen); err != nil {
			return err
		}
	}
	return nil
}

// parseModuleFiles parses a module directory's .tf, .tofu and their .json files.
func parseModuleFiles(dir string, entries []os.DirEntry) ([]*hcl.File, error) {
	parser := hclparse.NewParser()
	var files []*hcl.File
	var diags hcl.Diagnostics
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, ".tf"), strings.HasSuffix(name, ".tofu"):
			f, d := parser.ParseHCLFile(path)
			diags = append(diags, d...)
			files = append(files, f)
		case strings.HasSuffix(name, ".tf.json"), strings.HasSuffix(name, ".tofu.json"):
			f, d := parser.ParseJSONFile(path)
			diags = append(diags, d...)
			files = append(files, f)
		}
	}
	if diags.HasErrors() {
		return nil, hcldiag.Error(diags)
	}
	return files, nil
}

// readModuleFile adds one file's required_providers to reqs and gives the local module calls it
// makes (./ or ../ sources), as directories.
func readModuleFile(dir string, f *hcl.File, reqs map[string]*Requirement) ([]string, error) {
	if f == nil {
		return nil, nil
	}
	content, _, d := f.Body.PartialContent(rootSchema)
	if d.HasErrors() {
		return nil, hcldiag.Error(d)
	}
	var calls []string
	for _, b := range content.Blocks {
		switch b.Type {
		case "terraform":
			tc, _, d := b.Body.PartialContent(terraformSchema)
			if d.HasErrors() {
				return nil, hcldiag.Error(d)
			}
			for _, rp := range tc.Blocks {
				if err := readRequiredProviders(rp, reqs); err != nil {
					return nil, err
				}
			}
		case "module":
			mc, _, d := b.Body.PartialContent(moduleSchema)
			if d.HasErrors() {
				return nil, hcldiag.Error(d)
			}
			if src, ok := localModuleSource(mc.Attributes["source"]); ok {
				calls = append(calls, filepath.Join(dir, filepath.FromSlash(src)))
			}
		}
	}
	return calls, nil
}

// localModuleSource gives a module call's source when it is a literal local path.
func localModuleSource(attr *hcl.Attribute) (string, bool) {
	if attr == nil {
		return "", false
	}
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.Type() != cty.String || !v.IsKnown() || v.IsNull() {
		return "", false
	}
	src := v.AsString()
	return src, strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../")
}

func readRequiredProviders(b *hcl.Block, reqs map[string]*Requirement) error {
	attrs, d := b.Body.JustAttributes()
	if d.HasErrors() {
		return hcldiag.Error(d)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		attr := attrs[name]
		at := fmt.Sprintf("%s:%d", attr.Range.Filename, attr.Range.Start.Line)
		source, version := "", ""
		if pairs, d := hcl.ExprMap(attr.Expr); !d.HasErrors() {
			// { source = "...", version = "...", configuration_aliases = [...] }: only the
			// literal strings matter here; aliases are references and are left alone.
			for _, kv := range pairs {
				k, d := kv.Key.Value(nil)
				if d.HasErrors() || k.Type() != cty.String {
					continue
				}
				switch k.AsString() {
				case "source", "version":
					v, d := kv.Value.Value(nil)
					if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
						return fmt.Errorf("%s: required_providers %s: %s must be a literal string", at, name, k.AsString())
					}
					if k.AsString() == "source" {
						source = v.AsString()
					} else {
						version = v.AsString()
					}
				}
			}
		} else {
			// The legacy form: name = "version constraint".
			v, d := attr.Expr.Value(nil)
			if d.HasErrors() || v.Type() != cty.String {
				return fmt.Errorf("%s: required_providers %s: want { source = \"...\", version = \"...\" }", at, name)
			}
			version = v.AsString()
		}
		if source == "" {
			source = "hashicorp/" + name
		}
		addr, err := manifest.ParseProviderAddress(source)
		if err != nil {
			return fmt.Errorf("%s: required_providers %s: %w", at, name, err)
		}
		key := addr.String()
		r := reqs[key]
		if r == nil {
			r = &Requirement{Addr: addr}
			reqs[key] = r
		}
		if version != "" {
			r.Constraints = append(r.Constraints, version)
		}
		r.Where = append(r.Where, attr.Range)
	}
	return nil
}
