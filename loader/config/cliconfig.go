package config

import (
	"github.com/oprov/oprov/pkg/tofufiles"
)

// MirrorInstallation is the plain oci_mirror CLI configuration of oprov.hcl's blocks, for
// OpenTofu >= 1.10 users who want OpenTofu to install from the registries itself: one oci_mirror
// method a block, and everything else directly.
func (c *Config) MirrorInstallation() *tofufiles.CLIConfig {
	in := &tofufiles.Installation{}
	includes := []string{}
	for _, m := range c.Mirrors {
		inc := []string{}
		var exc []string
		for _, p := range m.Include {
			inc = append(inc, p.String())
		}
		for _, p := range m.Exclude {
			exc = append(exc, p.String())
		}
		includes = append(includes, inc...)
		in.Methods = append(in.Methods, tofufiles.Method{Kind: tofufiles.OCIMirror, RepositoryTemplate: m.RepositoryTemplate, Include: inc, Exclude: exc})
	}
	in.Methods = append(in.Methods, tofufiles.Method{Kind: tofufiles.Direct, Exclude: includes})
	return &tofufiles.CLIConfig{Installation: in}
}
