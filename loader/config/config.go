// Package config reads what a project and a far side declare for the loader: oprov.hcl beside the
// .tf files (oci_mirror, module_mirror, source, audit, sandbox and remote blocks, each checked and
// placed at FILE:LINE), a far side's host configuration, and the .terraform.lock.hcl pins. It
// answers which block applies to a provider address; it fetches, verifies and runs nothing.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/internal/hcldiag"
	"github.com/oprov/oprov/manifest"

	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/middleware"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
)

// FileName is the loader's file beside the configuration.
const FileName = "oprov.hcl"

// Config is a parsed oprov.hcl.
type Config struct {
	Path    string
	Mirrors []*Mirror
	Sources []*SourceProvider
	// Audit and Rules are the middleware oprov run puts between tofu and every provider.
	Audit *AuditConfig
	Rules []*middleware.Rule
	// Sandboxes confine the providers oprov launches (sandbox blocks).
	Sandboxes []*Sandbox
	// Remotes run the providers they select on another machine (remote blocks).
	Remotes []*Remote
	// ModuleMirror, from a module_mirror block, is the registry prefix a bundle's modules were
	// loaded below ('oprov load --to'): remote modules are taken from there, not their origins.
	ModuleMirror *ModuleMirror
}

// ModuleMirror is a module_mirror block: where a loaded bundle keeps the configuration's modules.
type ModuleMirror struct {
	Prefix string // HOST[:PORT][/PATH], as load's --to
	Range  hcl.Range
}

// SourceProvider is a provider kept as Go source beside the configuration: oprov run builds and
// launches it, and nothing is published or installed.
type SourceProvider struct {
	Addr  manifest.ProviderAddress
	Dir   string // absolute path of the Go module
	Range hcl.Range
}

// Mirror is one oci_mirror block: where a set of providers lives, and who may sign them.
type Mirror struct {
	RepositoryTemplate string // the template as written, for messages and for `oprov tofurc`
	template           hcl.Expression
	Include, Exclude   []Pattern
	// Policy is the trust policy that applies, from policy = "FILE" or public_keys = [...]; nil
	// when the block asks for no signatures.
	Policy *sign.Policy
	Range  hcl.Range
}

type configFile struct {
	Mirrors   []mirrorFile      `hcl:"oci_mirror,block"`
	Providers []providerFile    `hcl:"provider,block"`
	Audit     *auditFile        `hcl:"audit,block"`
	Rules     []ruleFile        `hcl:"rule,block"`
	Sandboxes []sandboxFile     `hcl:"sandbox,block"`
	Remotes   []remoteFile      `hcl:"remote,block"`
	Modules   *moduleMirrorFile `hcl:"module_mirror,block"`
}

type moduleMirrorFile struct {
	Prefix    string    `hcl:"repository_prefix"`
	DeclRange hcl.Range `hcl:",def_range"`
}

type providerFile struct {
	Address   string    `hcl:"address,label"`
	Source    string    `hcl:"source"`
	DeclRange hcl.Range `hcl:",def_range"`
}

type mirrorFile struct {
	RepositoryTemplate hcl.Expression `hcl:"repository_template"`
	Include            []string       `hcl:"include"`
	Exclude            []string       `hcl:"exclude,optional"`
	Policy             *hcl.Attribute `hcl:"policy,optional"`
	PublicKeys         []string       `hcl:"public_keys,optional"`
	// Keyless signers trusted beside public_keys, checked against trusted_root.
	Identities  []sign.IdentityBlock `hcl:"identity,block"`
	TrustedRoot *string              `hcl:"trusted_root,optional"`
	DeclRange   hcl.Range            `hcl:",def_range"`
}

// LoadConfig reads dir/oprov.hcl.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, FileName)
	src, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("no %s in %s: write one beside the .tf files (see 'oprov install --help')", FileName, dir)
		}
		return nil, err
	}
	return parseConfig(path, src)
}

// parseConfig parses oprov.hcl's content. Errors point at file:line.
func parseConfig(path string, src []byte) (*Config, error) {
	var cf configFile
	if err := hcldiag.Decode(path, src, &cf); err != nil {
		return nil, err
	}
	cfg := &Config{Path: path}
	if m := cf.Modules; m != nil {
		if _, err := oci.ParseRef(strings.TrimSuffix(m.Prefix, "/") + "/x"); err != nil || m.Prefix == "" {
			return nil, fmt.Errorf("%s: module_mirror: repository_prefix %q is not a registry prefix (write HOST[:PORT][/PATH], as 'oprov load --to' took it)", hcldiag.At(m.DeclRange), m.Prefix)
		}
		cfg.ModuleMirror = &ModuleMirror{Prefix: strings.TrimSuffix(m.Prefix, "/"), Range: m.DeclRange}
	}
	for _, mf := range cf.Mirrors {
		m, err := parseMirror(path, src, mf)
		if err != nil {
			return nil, err
		}
		cfg.Mirrors = append(cfg.Mirrors, m)
	}
	seen := map[string]bool{}
	for _, pf := range cf.Providers {
		at := fmt.Sprintf("%s:%d", pf.DeclRange.Filename, pf.DeclRange.Start.Line)
		addr, err := manifest.ParseProviderAddress(pf.Address)
		if err != nil {
			return nil, fmt.Errorf("%s: provider: %w", at, err)
		}
		if seen[addr.String()] {
			return nil, fmt.Errorf("%s: provider %q is declared twice", at, addr)
		}
		seen[addr.String()] = true
		if !strings.HasPrefix(pf.Source, "./") && !strings.HasPrefix(pf.Source, "../") {
			return nil, fmt.Errorf("%s: provider %q: source %q must be a relative path (./... or ../...) to a Go module, a stdio provider or a Python project", at, addr, pf.Source)
		}
		dir, err := filepath.Abs(filepath.Join(filepath.Dir(path), filepath.FromSlash(pf.Source)))
		if err != nil {
			return nil, err
		}
		cfg.Sources = append(cfg.Sources, &SourceProvider{Addr: addr, Dir: dir, Range: pf.DeclRange})
	}
	if err := cfg.parseMiddleware(&cf); err != nil {
		return nil, err
	}
	if err := cfg.parseSandboxes(cf.Sandboxes); err != nil {
		return nil, err
	}
	if err := cfg.parseRemotes(cf.Remotes); err != nil {
		return nil, err
	}
	if len(cfg.Mirrors) == 0 && len(cfg.Sources) == 0 {
		return nil, fmt.Errorf("%s: no oci_mirror or provider blocks: nothing for oprov to manage", path)
	}
	return cfg, nil
}

// parseMirror checks one oci_mirror block: its template, patterns, and trust settings.
func parseMirror(path string, src []byte, mf mirrorFile) (*Mirror, error) {
	at := fmt.Sprintf("%s:%d", mf.DeclRange.Filename, mf.DeclRange.Start.Line)
	m := &Mirror{template: mf.RepositoryTemplate, Range: mf.DeclRange}
	r := mf.RepositoryTemplate.Range()
	m.RepositoryTemplate = strings.Trim(string(r.SliceBytes(src)), `"`)
	if len(mf.Include) == 0 {
		return nil, fmt.Errorf("%s: oci_mirror: include is empty, so the block matches no provider", at)
	}
	var err error
	if m.Include, err = parsePatterns(mf.Include); err != nil {
		return nil, fmt.Errorf("%s: oci_mirror include: %w", at, err)
	}
	if err := checkTemplate(m.RepositoryTemplate, mf.RepositoryTemplate, m.Include); err != nil {
		return nil, fmt.Errorf("%s:%d: oci_mirror: %w", r.Filename, r.Start.Line, err)
	}
	if m.Exclude, err = parsePatterns(mf.Exclude); err != nil {
		return nil, fmt.Errorf("%s: oci_mirror exclude: %w", at, err)
	}
	if m.Policy, err = mirrorPolicy(path, at, mf); err != nil {
		return nil, err
	}
	return m, nil
}

func parsePatterns(list []string) ([]Pattern, error) {
	var out []Pattern
	for _, s := range list {
		p, err := parsePattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// mirrorPolicy gives the trust policy an oci_mirror block asks for: a policy file, or public_keys
// as shorthand for a policy that enforces those keys for the block; nil for neither. Paths are
// relative to oprov.hcl.
func mirrorPolicy(path, at string, mf mirrorFile) (*sign.Policy, error) {
	from := sign.PolicyFrom{Keys: mf.PublicKeys, Base: path, Rule: fmt.Sprintf("oci_mirror at %s", at), KeysName: "public_keys"}
	for _, b := range mf.Identities {
		id, err := b.Identity()
		if err != nil {
			return nil, fmt.Errorf("%s: oci_mirror identity: %w", hcldiag.At(b.DeclRange), err)
		}
		from.Identities = append(from.Identities, id)
	}
	if mf.TrustedRoot != nil {
		from.TrustedRoot = *mf.TrustedRoot
	}
	if mf.Policy == nil {
		pol, err := sign.NewPolicy(from)
		if errors.Is(err, sign.ErrNoTrustedRoot) {
			return nil, fmt.Errorf("%s: oci_mirror identity: set trusted_root (sigstore's trusted_root.json, relative to %s) in the block", at, FileName)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: oci_mirror public_keys: %w", at, err)
		}
		return pol, nil
	}
	if len(mf.PublicKeys) > 0 || len(mf.Identities) > 0 {
		return nil, fmt.Errorf("%s: oci_mirror: give policy, or public_keys and identity blocks, not both", at)
	}
	attr := mf.Policy
	name, err := hcldiag.String(attr)
	if err != nil {
		return nil, err
	}
	from.File = name
	pol, err := sign.NewPolicy(from)
	if errors.Is(err, fs.ErrNotExist) {
		pp := name
		if !filepath.IsAbs(pp) {
			pp = filepath.Join(filepath.Dir(path), pp)
		}
		abs, _ := filepath.Abs(pp)
		return nil, fmt.Errorf("%s: oci_mirror policy %q: there is no file %s (the path is relative to %s; write the policy there, or fix the path)", hcldiag.At(attr.Range), name, abs, FileName)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: oci_mirror policy: %w", hcldiag.At(attr.Range), err)
	}
	return pol, nil
}

// checkTemplate checks a repository_template as OpenTofu does: known symbols only, and each of
// ${hostname}, ${namespace} and ${type} used unless include selects exactly one value for it.
func checkTemplate(t string, expr hcl.Expression, include []Pattern) error {
	used := map[string]bool{}
	for _, tr := range expr.Variables() {
		switch v := tr.RootName(); v {
		case "hostname", "namespace", "type":
			used[v] = true
		default:
			return fmt.Errorf("repository_template %q uses ${%s}; only ${hostname}, ${namespace} and ${type} are known", t, v)
		}
	}
	for _, sym := range []string{"hostname", "namespace", "type"} {
		if !used[sym] && !selectsOne(include, sym) {
			return fmt.Errorf("repository_template %q has no ${%s}, but include selects more than one %s, so they would share one repository (add ${%s}, as in %q; OpenTofu refuses it too)",
				t, sym, map[string]string{"hostname": "registry host", "namespace": "namespace", "type": "provider"}[sym], sym, "HOST/providers/${namespace}/${type}")
		}
	}
	v, err := evalTemplate(expr, manifest.ProviderAddress{Hostname: "h", Namespace: "n", Type: "t"})
	if err != nil {
		return err
	}
	if !strings.Contains(v, "/") {
		return fmt.Errorf("repository_template %q: want HOST/PATH", t)
	}
	return nil
}

// selectsOne reports whether include patterns all name one and the same value for a symbol
// (hostname, namespace or type) and everything before it, with no wildcard.
func selectsOne(include []Pattern, sym string) bool {
	key := func(p Pattern) []string {
		switch sym {
		case "hostname":
			return []string{p.Hostname}
		case "namespace":
			return []string{p.Hostname, p.Namespace}
		}
		return []string{p.Hostname, p.Namespace, p.Type}
	}
	first := strings.Join(key(include[0]), "/")
	for _, p := range include {
		k := key(p)
		if strings.Join(k, "/") != first || slices.Contains(k, "*") {
			return false
		}
	}
	return true
}

func evalTemplate(expr hcl.Expression, addr manifest.ProviderAddress) (string, error) {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"hostname": cty.StringVal(addr.Hostname.String()), "namespace": cty.StringVal(addr.Namespace), "type": cty.StringVal(addr.Type),
	}}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		return "", hcldiag.Error(diags)
	}
	if v.Type() != cty.String || v.IsNull() {
		return "", fmt.Errorf("repository_template must be a string")
	}
	return v.AsString(), nil
}

// RepositoryRef fills the template in for a provider and parses it as a repository reference.
func (m *Mirror) RepositoryRef(addr manifest.ProviderAddress) (oci.Ref, error) {
	repo := m.Repository(addr)
	ref, err := oci.ParseRef(repo)
	if err != nil {
		return oci.Ref{}, fmt.Errorf("%s:%d: repository_template gives %q for %s: %w", m.Range.Filename, m.Range.Start.Line, repo, addr, err)
	}
	if ref.IsLayout() && !filepath.IsAbs(ref.Layout) {
		// oci-layout:DIR, as every path in oprov.hcl, is relative to the file's directory.
		ref.Layout = filepath.Join(filepath.Dir(m.Range.Filename), ref.Layout)
	}
	return ref, nil
}

// LocalDir is the provider block as a source directory.
func (sp *SourceProvider) LocalDir() source.LocalDir {
	return source.LocalDir{Addr: sp.Addr, Dir: sp.Dir, At: fmt.Sprintf("%s:%d", sp.Range.Filename, sp.Range.Start.Line)}
}

// Repository fills the template in for a provider.
func (m *Mirror) Repository(addr manifest.ProviderAddress) string {
	v, err := evalTemplate(m.template, addr)
	if err != nil { // checked when parsed: cannot fail for a valid address
		panic(err)
	}
	return v
}

// Matches reports whether the block's include and exclude patterns select addr.
func (m *Mirror) Matches(addr manifest.ProviderAddress) bool {
	in := false
	for _, p := range m.Include {
		if p.Match(addr) {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, p := range m.Exclude {
		if p.Match(addr) {
			return false
		}
	}
	return true
}

// SourceFor gives the provider block that keeps addr as source, or nil.
func (c *Config) SourceFor(addr manifest.ProviderAddress) *SourceProvider {
	for _, s := range c.Sources {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// MirrorFor gives the first oci_mirror block that selects addr, or nil.
func (c *Config) MirrorFor(addr manifest.ProviderAddress) *Mirror {
	for _, m := range c.Mirrors {
		if m.Matches(addr) {
			return m
		}
	}
	return nil
}

// Pattern is an include/exclude pattern of an oci_mirror block (artifact.Pattern).
type Pattern = artifact.Pattern

// parsePattern parses a provider address pattern (artifact.ParsePattern).
func parsePattern(s string) (Pattern, error) { return artifact.ParsePattern(s) }
