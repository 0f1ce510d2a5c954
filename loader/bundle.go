package loader

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/bundle"
)

// BundleWants reads what a configuration requires for a bundle (oprov save --config): every
// provider of its required_providers (root and local modules), with the lock file's entry and the
// oci_mirror block of oprov.hcl that maps it, if any (without oprov.hcl, every provider comes from
// its origin). Providers kept as source are refused: they have no package to carry.
func BundleWants(dir string) ([]bundle.Want, error) { return BundleWantsWith(dir, nil) }

// BundleWantsWith is BundleWants with more requirements: those of remote modules, which a
// module walk fetched (module.Tree.Requirements), each provider's constraints joined.
func BundleWantsWith(dir string, more map[string]*config.Requirement) ([]bundle.Want, error) {
	cfg := &config.Config{}
	if _, err := os.Stat(filepath.Join(dir, config.FileName)); err == nil {
		if cfg, err = config.LoadConfig(dir); err != nil {
			return nil, err
		}
	}
	reqs, addrs, lock, err := readRequiredAndLock(dir)
	if err != nil {
		return nil, err
	}
	reqs, addrs = mergeRequirements(reqs, more)
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

// mergeRequirements adds more's requirements to reqs (a copy where both name a provider), and
// gives the addresses, sorted.
func mergeRequirements(reqs, more map[string]*config.Requirement) (map[string]*config.Requirement, []string) {
	out := map[string]*config.Requirement{}
	for a, r := range reqs {
		out[a] = r
	}
	for a, r := range more {
		if have := out[a]; have != nil {
			joined := *have
			joined.Constraints = append(append([]string(nil), have.Constraints...), r.Constraints...)
			joined.Where = append(append(joined.Where[:0:0], have.Where...), r.Where...)
			out[a] = &joined
			continue
		}
		out[a] = r
	}
	addrs := make([]string, 0, len(out))
	for a := range out {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	return out, addrs
}
