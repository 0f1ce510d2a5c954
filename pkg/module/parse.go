package module

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/internal/hcldiag"
	"github.com/oprov/oprov/manifest"
)

// call is one module block of a module.
type call struct {
	Name    string
	Source  string // as written
	Version string // the version argument, as written
	Range   hcl.Range
	// Unreadable says why source or version is not a literal string (OpenTofu's static
	// expressions, var.x): a walk cannot resolve the call.
	Unreadable error
}

// parsed is what oprov reads of one module directory: its module calls, in file order, and its
// required_providers.
type parsed struct {
	Calls    []call
	Requires map[string]*Requirement
}

var (
	rootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "terraform"},
		{Type: "module", LabelNames: []string{"name"}},
	}}
	terraformSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "required_providers"}}}
	moduleSchema    = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "source"}, {Name: "version"}}}
)

// errCallName marks a module call whose name is no identifier, as OpenTofu refuses it too.
var errCallName = errors.New("a module name must be an identifier (letters, digits, '_' and '-', not starting with a digit or '-'), as OpenTofu requires; rename the module block")

// checkKey refuses a call key (vpc, vpc.subnets: the names of the calls from the root, joined by
// dots) that is not made of identifiers. Keys name directories under .terraform/modules, and come
// back from files a module or another machine could have written: the module lock and
// modules.json.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("an empty module key: %w", errCallName)
	}
	for _, name := range strings.Split(key, ".") {
		if !hclsyntax.ValidIdentifier(name) {
			return fmt.Errorf("module key %q: %w", key, errCallName)
		}
	}
	return nil
}

// maxModuleFile bounds one configuration file oprov parses (a remote module's files are not ours).
const maxModuleFile = 8 << 20

// parseDir reads a module directory's .tf, .tofu and their .json files. Messages name the files
// under shown: the directory as the user knows it (a remote module's is where it is installed,
// .terraform/modules/KEY, as OpenTofu names it).
func parseDir(dir, shown string) (*parsed, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading module %s: %w", dir, err)
	}
	parser := hclparse.NewParser()
	p := &parsed{Requires: map[string]*Requirement{}}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") {
			continue
		}
		path, display := filepath.Join(dir, name), filepath.Join(shown, name)
		var f *hcl.File
		var d hcl.Diagnostics
		switch {
		case strings.HasSuffix(name, ".tf"), strings.HasSuffix(name, ".tofu"):
			src, err := readBounded(path)
			if err != nil {
				return nil, err
			}
			f, d = parser.ParseHCL(src, display)
		case strings.HasSuffix(name, ".tf.json"), strings.HasSuffix(name, ".tofu.json"):
			src, err := readBounded(path)
			if err != nil {
				return nil, err
			}
			f, d = parser.ParseJSON(src, display)
		default:
			continue
		}
		if d.HasErrors() {
			return nil, hcldiag.Error(d)
		}
		if err := p.readFile(f); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func readBounded(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxModuleFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a configuration file oprov reads", path, maxModuleFile)
	}
	return os.ReadFile(path)
}

// readFile adds one file's module calls and required_providers.
func (p *parsed) readFile(f *hcl.File) error {
	content, _, d := f.Body.PartialContent(rootSchema)
	if d.HasErrors() {
		return hcldiag.Error(d)
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "terraform":
			tc, _, d := b.Body.PartialContent(terraformSchema)
			if d.HasErrors() {
				return hcldiag.Error(d)
			}
			for _, rp := range tc.Blocks {
				if err := readRequiredProviders(rp, p.Requires); err != nil {
					return err
				}
			}
		case "module":
			c, err := readCall(b)
			if err != nil {
				return err
			}
			p.Calls = append(p.Calls, c)
		}
	}
	return nil
}

func readCall(b *hcl.Block) (call, error) {
	c := call{Name: b.Labels[0], Range: b.DefRange}
	if !hclsyntax.ValidIdentifier(c.Name) {
		// The name becomes a directory under .terraform/modules: "../x" would be a path.
		return c, fmt.Errorf("%s: module %q: %w", where(c.Range), c.Name, errCallName)
	}
	mc, _, d := b.Body.PartialContent(moduleSchema)
	if d.HasErrors() {
		return c, hcldiag.Error(d)
	}
	var err error
	if c.Source, err = literal(mc.Attributes["source"]); err != nil {
		c.Unreadable = fmt.Errorf("%s: module %q: source %w", where(c.Range), c.Name, err)
		return c, nil
	}
	if c.Source == "" {
		return c, fmt.Errorf("%s: module %q has no source", where(c.Range), c.Name)
	}
	if c.Version, err = literal(mc.Attributes["version"]); err != nil {
		c.Unreadable = fmt.Errorf("%s: module %q: version %w", where(c.Range), c.Name, err)
	}
	return c, nil
}

// literal is an attribute's value when it is a literal string ("" when absent).
func literal(attr *hcl.Attribute) (string, error) {
	if attr == nil {
		return "", nil
	}
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.Type() != cty.String || !v.IsKnown() || v.IsNull() {
		return "", fmt.Errorf("is not a literal string (oprov resolves literal module sources and versions only)")
	}
	return v.AsString(), nil
}

// readRequiredProviders adds a required_providers block's entries to reqs.
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
		source, version, err := requiredProvider(name, attr)
		if err != nil {
			return err
		}
		if source == "" {
			source = "hashicorp/" + name
		}
		addr, err := manifest.ParseProviderAddress(source)
		if err != nil {
			return fmt.Errorf("%s: required_providers %s: %w", where(attr.Range), name, err)
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

// requiredProvider reads one required_providers entry: { source = "...", version = "...",
// configuration_aliases = [...] } (only the literal strings matter; aliases are references and
// are left alone), or the legacy form name = "version constraint".
func requiredProvider(name string, attr *hcl.Attribute) (source, version string, err error) {
	at := where(attr.Range)
	pairs, d := hcl.ExprMap(attr.Expr)
	if d.HasErrors() {
		v, d := attr.Expr.Value(nil)
		if d.HasErrors() || v.Type() != cty.String {
			return "", "", fmt.Errorf("%s: required_providers %s: want { source = \"...\", version = \"...\" }", at, name)
		}
		return "", v.AsString(), nil
	}
	for _, kv := range pairs {
		k, d := kv.Key.Value(nil)
		if d.HasErrors() || k.Type() != cty.String {
			continue
		}
		switch k.AsString() {
		case "source", "version":
			v, d := kv.Value.Value(nil)
			if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
				return "", "", fmt.Errorf("%s: required_providers %s: %s must be a literal string", at, name, k.AsString())
			}
			if k.AsString() == "source" {
				source = v.AsString()
			} else {
				version = v.AsString()
			}
		}
	}
	return source, version, nil
}

// merge adds from's requirements to into.
func merge(into, from map[string]*Requirement) {
	for k, r := range from {
		have := into[k]
		if have == nil {
			have = &Requirement{Addr: r.Addr}
			into[k] = have
		}
		have.Constraints = append(have.Constraints, r.Constraints...)
		have.Where = append(have.Where, r.Where...)
	}
}
