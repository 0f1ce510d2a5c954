package loader

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/bundle"
	"github.com/oprov/oprov/pkg/module"
)

// BundleWantsModules reads what a configuration requires for a bundle (oprov save --config):
// every provider of its required_providers, in the root, its local modules and its remote modules
// (resolved by module.Walk under the module lock, which judges each one; the trust policies of
// oprov.hcl verify oci:// modules), with the lock file's entry and the oci_mirror block of
// oprov.hcl that maps it, if any (without oprov.hcl, every provider comes from its origin); and
// the modules, for the bundle to carry. Providers kept as source are refused: they have no package
// to carry.
func BundleWantsModules(ctx context.Context, dir string, opts Options) ([]bundle.Want, *module.Tree, error) {
	cfg, err := bundleConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	mods, err := module.ReadLock(dir)
	if err != nil {
		return nil, nil, err
	}
	p := &Project{Dir: dir, Config: cfg, Modules: mods}
	tree, err := module.Walk(ctx, dir, p.moduleOptions(&opts, false))
	if err != nil {
		return nil, nil, err
	}
	lock, err := config.ReadLock(dir)
	if err != nil {
		return nil, nil, err
	}
	wants, err := wantsOf(cfg, tree.Requirements, lock)
	return wants, tree, err
}

// bundleConfig is dir's oprov.hcl, or an empty one when there is none.
func bundleConfig(dir string) (*config.Config, error) {
	if _, err := os.Stat(filepath.Join(dir, config.FileName)); err == nil {
		return config.LoadConfig(dir)
	}
	return &config.Config{}, nil
}

func wantsOf(cfg *config.Config, reqs map[string]*config.Requirement, lock *config.Lock) ([]bundle.Want, error) {
	addrs := make([]string, 0, len(reqs))
	for a := range reqs {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	from := map[*config.Mirror]*bundle.OCIFrom{}
	var wants []bundle.Want
	for _, a := range addrs {
		r := reqs[a]
		if sp := cfg.SourceFor(r.Addr); sp != nil {
			return nil, fmt.Errorf("%s is kept as source (%s:%d): it has no package to carry; build and push it, then bundle", r.Addr, sp.Range.Filename, sp.Range.Start.Line)
		}
		w := bundle.Want{Addr: r.Addr, Constraints: r.ConstraintString()}
		if e := lock.Entries[a]; e != nil {
			w.LockedVersion, w.LockedHashes = e.Version, e.Hashes
		}
		if m := cfg.MirrorFor(r.Addr); m != nil {
			if from[m] == nil {
				from[m] = &bundle.OCIFrom{Policy: m.Policy, RepoFor: m.RepositoryRef}
			}
			w.OCI = from[m]
		}
		wants = append(wants, w)
	}
	return wants, nil
}
