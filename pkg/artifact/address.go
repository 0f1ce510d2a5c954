package artifact

import (
	"strings"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// GuessProviderAddress guesses a provider's address from the repository it lives in: the last
// two path elements are NAMESPACE/TYPE on OpenTofu's default registry host.
func GuessProviderAddress(ref oci.Ref) manifest.ProviderAddress {
	parts := strings.Split(ref.Repository, "/")
	a := manifest.ProviderAddress{Hostname: manifest.DefaultProviderHost, Namespace: "local", Type: typeFromRepository(ref)}
	if len(parts) >= 2 {
		a.Namespace = parts[len(parts)-2]
	}
	return a
}

// repositoryTemplate gives an oci_mirror repository_template that maps addr to ref's repository,
// using ${namespace} and ${type} where the repository path ends in them, so that the same block
// serves sibling providers.
func repositoryTemplate(ref oci.Ref, addr manifest.ProviderAddress) string {
	repo := ref.Repository
	switch {
	case strings.HasSuffix(repo, "/"+addr.Namespace+"/"+addr.Type):
		repo = strings.TrimSuffix(repo, addr.Namespace+"/"+addr.Type) + "${namespace}/${type}"
	case strings.HasSuffix(repo, "/"+addr.Type) || repo == addr.Type:
		repo = strings.TrimSuffix(repo, addr.Type) + "${type}"
	}
	return ref.Registry + "/" + repo
}

// MirrorInstallation is the CLI configuration with which OpenTofu (>= 1.10) installs addr from
// ref's repository and everything else directly.
func MirrorInstallation(ref oci.Ref, addr manifest.ProviderAddress) *tofufiles.CLIConfig {
	return &tofufiles.CLIConfig{Installation: &tofufiles.Installation{Methods: []tofufiles.Method{
		{Kind: tofufiles.OCIMirror, RepositoryTemplate: repositoryTemplate(ref, addr), Include: []string{addr.String()}},
		{Kind: tofufiles.Direct, Exclude: []string{addr.String()}},
	}}}
}
