package main

import (
	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
)

// loaderFlags are shared by the commands that work on a configuration directory.
type loaderFlags struct {
	Dir      string
	CacheDir string
	registry registryFlags
}

func (f *loaderFlags) register(c *cobra.Command) {
	c.Flags().StringVarP(&f.Dir, "chdir", "C", ".", "the configuration directory (where oprov.hcl and the .tf files are)")
	c.Flags().StringVar(&f.CacheDir, "cache-dir", "", "the cache (default $OPROV_CACHE_DIR, else $XDG_CACHE_HOME/oprov)")
	f.registry.register(c)
}

// open reads the configuration directory and opens the cache.
func (f *loaderFlags) open(ios *IOStreams) (*loader.Project, loader.Options, error) {
	if err := checkDir("-C", f.Dir, configDirPurpose); err != nil {
		return nil, loader.Options{}, err
	}
	p, err := loader.Open(f.Dir)
	if err != nil {
		return nil, loader.Options{}, err
	}
	cache, err := ios.Factory.openCache(f.CacheDir)
	if err != nil {
		return nil, loader.Options{}, err
	}
	return p, loader.Options{Cache: cache, Registry: ios.Factory.registry(f.registry), Log: ios.ErrOut, ModuleLimits: ios.Factory.ModuleLimits}, nil
}

func (s *IOStreams) streams() loader.Streams {
	return loader.Streams{In: s.In, Out: s.Out, Err: s.ErrOut}
}

// configDirPurpose says what -C names, for its errors.
const configDirPurpose = "give the directory that holds oprov.hcl and the .tf files"

const loaderHelp = `oprov.hcl sits beside the .tf files and uses the vocabulary of OpenTofu's CLI configuration:

    oci_mirror {
      repository_template = "registry.example.com/providers/${namespace}/${type}"
      include             = ["example.com/acme/*"]
      exclude             = ["example.com/acme/legacy"]   # optional
      policy              = "oprov-policy.hcl"            # optional: verify signatures
      # or: public_keys   = ["keys/acme.pub"]
    }

Several blocks are allowed; the first that selects a provider manages it. Which providers are
needed, and at what versions, comes from the configuration's own required_providers: the root
module's, and every module call's, local and remote alike. Every block and attribute:
'oprov help oprov.hcl', and ` + docPage + `oprov-hcl.md.`
