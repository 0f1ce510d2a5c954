package manifest

import (
	"fmt"

	tfaddr "github.com/opentofu/registry-address"
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
