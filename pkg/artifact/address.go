package artifact

import (
	tfaddr "github.com/opentofu/registry-address"

	"fmt"
	"strings"

	"github.com/oprov/oprov/pkg/oci"
)

// DefaultProviderHost is the host a short provider address (NAMESPACE/TYPE) means to OpenTofu.
const DefaultProviderHost = tfaddr.DefaultProviderRegistryHost

// ProviderAddress is a provider source address, HOSTNAME/NAMESPACE/TYPE, as OpenTofu's own
// registry-address library parses and normalises it.
type ProviderAddress = tfaddr.Provider

// ParseProviderAddress parses [HOSTNAME/]NAMESPACE/TYPE with OpenTofu's parser (so it accepts and
// normalises exactly what OpenTofu does), rewording its error to say what is wanted.
func ParseProviderAddress(s string) (a ProviderAddress, err error) {
	// The library accepts a few strings (invalid UTF-8, hostnames IDNA then rejects) that it cannot
	// print again: such an address is refused, never carried on to panic later.
	defer func() {
		if r := recover(); r != nil {
			a, err = ProviderAddress{}, fmt.Errorf("provider address %q: want [HOSTNAME/]NAMESPACE/TYPE (not a valid host name)", s)
		}
	}()
	a, err = tfaddr.ParseProviderSource(s)
	if err != nil {
		return ProviderAddress{}, fmt.Errorf("provider address %q: want [HOSTNAME/]NAMESPACE/TYPE (%v)", s, err)
	}
	if a.Namespace == tfaddr.UnknownProviderNamespace { // a bare TYPE: OpenTofu guesses its namespace; oprov does not
		return ProviderAddress{}, fmt.Errorf("provider address %q: want [HOSTNAME/]NAMESPACE/TYPE (a namespace is needed)", s)
	}
	if again, err := tfaddr.ParseProviderSource(a.String()); err != nil || again != a {
		return ProviderAddress{}, fmt.Errorf("provider address %q: want [HOSTNAME/]NAMESPACE/TYPE (it does not read back as itself)", s)
	}
	return a, nil
}

// GuessProviderAddress guesses a provider's address from the repository it lives in: the last
// two path elements are NAMESPACE/TYPE on OpenTofu's default registry host.
func GuessProviderAddress(ref oci.Ref) ProviderAddress {
	parts := strings.Split(ref.Repository, "/")
	a := ProviderAddress{Hostname: DefaultProviderHost, Namespace: "local", Type: TypeFromRepository(ref)}
	if len(parts) >= 2 {
		a.Namespace = parts[len(parts)-2]
	}
	return a
}

// RepositoryTemplate gives an oci_mirror repository_template that maps addr to ref's repository,
// using ${namespace} and ${type} where the repository path ends in them, so that the same block
// serves sibling providers.
func RepositoryTemplate(ref oci.Ref, addr ProviderAddress) string {
	repo := ref.Repository
	switch {
	case strings.HasSuffix(repo, "/"+addr.Namespace+"/"+addr.Type):
		repo = strings.TrimSuffix(repo, addr.Namespace+"/"+addr.Type) + "${namespace}/${type}"
	case strings.HasSuffix(repo, "/"+addr.Type) || repo == addr.Type:
		repo = strings.TrimSuffix(repo, addr.Type) + "${type}"
	}
	return ref.Registry + "/" + repo
}

// MirrorConfig renders the CLI-configuration block with which OpenTofu (>= 1.10) installs addr
// from ref's repository and everything else directly.
func MirrorConfig(ref oci.Ref, addr ProviderAddress) string {
	return fmt.Sprintf(`provider_installation {
  oci_mirror {
    repository_template = %q
    include             = [%q]
  }
  direct {
    exclude = [%q]
  }
}
`, RepositoryTemplate(ref, addr), addr.String(), addr.String())
}
