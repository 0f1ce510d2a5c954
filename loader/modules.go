package loader

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/bundle"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// ModuleChange is one remote module as locked or installed.
type ModuleChange struct {
	Call     string `json:"call"` // module.vpc.module.net
	Key      string `json:"key"`  // its directory under .terraform/modules
	Source   string `json:"source"`
	Version  string `json:"version,omitempty"` // registry version, git commit or OCI digest
	Previous string `json:"previous_version,omitempty"`
	H1       string `json:"h1"`
	ZH       string `json:"zh"`
	Dir      string `json:"dir,omitempty"` // where it was installed
	Auth     string `json:"authentication,omitempty"`
	// FromInstalled: its installed copy matched the module lock, so nothing was fetched.
	FromInstalled bool `json:"from_installed"`
}

// moduleOptions are the walk's options for this project: the module lock, TLS and registry
// access as for providers, and the trust policies of oprov.hcl's oci_mirror blocks for oci://
// modules.
func (p *Project) moduleOptions(opts *Options, upgrade bool) module.Options {
	var pols []*sign.Policy
	for _, m := range p.Config.Mirrors {
		if m.Policy != nil {
			pols = append(pols, m.Policy)
		}
	}
	if opts.Registry == nil {
		opts.Registry = oci.NewClient(oci.Options{})
	}
	mirror := opts.ModuleMirror
	if mirror == nil && p.Config.ModuleMirror != nil {
		mirror = loadedModules(p.Config.ModuleMirror.Prefix, opts.Registry)
	}
	return module.Options{Lock: p.Modules, Upgrade: upgrade, CAFile: opts.Registry.CAFile,
		Registry: opts.Registry, Policies: pols, Log: opts.Log, Mirror: mirror,
		Services: p.moduleServices(), Progress: opts.Progress, Limits: opts.ModuleLimits}
}

// resolveModules walks every module call (remote modules fetched and checked against the module
// lock, or resolved afresh when upgrading; when installing, those already installed that the
// lock vouches for are kept without a request; locking asks the origins), records them in the module lock (not yet written),
// and adds the required_providers of remote modules to the project's providers.
func (p *Project) resolveModules(ctx context.Context, opts *Options, upgrade, locking bool) (*module.Tree, []ModuleChange, error) {
	if !p.remoteModules {
		return &module.Tree{}, nil, nil
	}
	prev := map[string]string{}
	for k, e := range p.Modules.Entries {
		prev[k] = e.Version
	}
	mo := p.moduleOptions(opts, upgrade)
	if !upgrade && !locking {
		mo.Installed = p.Dir // what .terraform/modules holds and the lock vouches for is kept
	}
	tree, err := module.Walk(ctx, p.Dir, mo)
	if err != nil {
		return nil, nil, err
	}
	p.Modules.Record(tree)
	if err := p.classify(tree.Requirements); err != nil {
		return nil, nil, err
	}
	var changes []ModuleChange
	for _, r := range tree.Modules {
		c := ModuleChange{Call: r.Call, Key: r.Key, Source: r.Source, Version: r.Version, H1: r.H1, ZH: r.ZH, Auth: r.Auth, FromInstalled: r.FromInstalled}
		if v, ok := prev[r.Key]; ok && v != r.Version {
			c.Previous = v
		}
		changes = append(changes, c)
	}
	return tree, changes, nil
}

// classify sorts the providers a configuration requires into those oprov manages (an oci_mirror
// block selects them), those it keeps as source, and those OpenTofu installs itself.
func (p *Project) classify(reqs map[string]*config.Requirement) error {
	addrs := make([]string, 0, len(reqs))
	for a := range reqs {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	p.Managed, p.Local, p.Unmanaged = nil, nil, nil
	for _, a := range addrs {
		r := reqs[a]
		switch sp, m := p.Config.SourceFor(r.Addr), p.Config.MirrorFor(r.Addr); {
		case sp != nil:
			p.Local = append(p.Local, &Provider{Req: r, Kept: sp})
		case m != nil:
			if _, err := m.RepositoryRef(r.Addr); err != nil {
				return err
			}
			p.Managed = append(p.Managed, &Provider{Req: r, Mirror: m})
		default:
			p.Unmanaged = append(p.Unmanaged, r)
		}
	}
	return nil
}

// installModules writes the resolved modules into .terraform/modules with modules.json.
func (p *Project) installModules(ctx context.Context, tree *module.Tree, changes []ModuleChange) error {
	if len(tree.Modules) == 0 {
		return nil
	}
	if err := module.Install(ctx, p.Dir, tree); err != nil {
		return err
	}
	for i, r := range tree.Modules {
		changes[i].Dir = filepath.Join(p.Dir, filepath.FromSlash(module.ModulesDir), r.Key, filepath.FromSlash(r.Subdir))
	}
	return nil
}

// moduleServices reads the host blocks of the user's CLI configuration (as tofu reads it) that
// point modules.v1 somewhere: OpenTofu and Terraform use them instead of service discovery, and so
// does the walk. A configuration that cannot be read gives none (install reports it).
func (p *Project) moduleServices() map[string]string {
	cfg, err := readUserCLIConfig(UserCLIFiles(tofuProgramName(), filepath.Join(p.Dir, cliConfigPath)))
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, it := range cfg.Settings {
		if len(it.Keys) != 2 || it.Keys[0] != "host" || !it.IsBlock() {
			continue
		}
		for _, sub := range it.Value.Object {
			if len(sub.Keys) != 1 || sub.Keys[0] != "services" || !sub.IsBlock() {
				continue
			}
			for _, svc := range sub.Value.Object {
				if len(svc.Keys) == 1 && svc.Keys[0] == "modules.v1" && svc.Value.Kind == tofufiles.String {
					out[strings.ToLower(it.Keys[1])] = svc.Value.Text
				}
			}
		}
	}
	return out
}

// tofuProgramName is the program whose CLI configuration files count: OPROV_TOFU's, else tofu's.
func tofuProgramName() string {
	if p := os.Getenv("OPROV_TOFU"); p != "" {
		return filepath.Base(p)
	}
	return "tofu"
}

// loadedModules supplies remote modules from where 'oprov load --to PREFIX' put a bundle's
// modules (a module_mirror block): each locked module at the repository and tag its source
// address and locked version give (bundle.ModuleRef). A module the lock does not record has no
// place there, and comes from its origin.
func loadedModules(prefix string, reg *oci.Client) func(context.Context, *module.Resolved, *module.LockEntry) (oci.ReadOnly, oci.Ref, bool, error) {
	return func(ctx context.Context, r *module.Resolved, e *module.LockEntry) (oci.ReadOnly, oci.Ref, bool, error) {
		if e == nil {
			return nil, oci.Ref{}, false, nil
		}
		zh := ""
		for _, h := range e.Hashes {
			if strings.HasPrefix(h, "zh:") {
				zh = h
			}
		}
		ref, err := bundle.ModuleRef(prefix, e.Source, e.Version, zh)
		if err != nil {
			return nil, oci.Ref{}, false, err
		}
		t, err := reg.Open(ctx, ref.WithReference(""), false)
		if err != nil {
			return nil, oci.Ref{}, false, oci.Explain("open", ref, err)
		}
		return t, ref, true, nil
	}
}
