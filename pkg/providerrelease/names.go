// Package providerrelease is the provider release format: the terraform-provider-TYPE_VERSION_OS_ARCH.zip
// naming convention, SHA256SUMS files, deterministic zips, writing a release from executables,
// and checking a set of release files before anything is published. Building executables from
// source is internal/build's; lock-file hashes are pkg/pkghash's; unpacking is pkg/pkghash/unzip's.
package providerrelease

import (
	"fmt"
	"strings"

	"github.com/oprov/oprov/manifest"
)

// ProviderPrefix begins the name of every provider executable, release file and provider
// module or project: terraform-provider-TYPE.
const ProviderPrefix = "terraform-provider-"

// Filename is a parsed release package file name.
type Filename struct {
	Type     string
	Version  string
	Platform manifest.Platform
}

// String gives the file name back: terraform-provider-TYPE_VERSION_OS_ARCH.zip.
func (f Filename) String() string {
	return fmt.Sprintf("%s%s_%s_%s.zip", ProviderPrefix, f.Type, f.Version, f.Platform)
}

// ExecutableName is the executable a package of this type and version holds, as `oprov package`
// writes it: terraform-provider-TYPE_vVERSION, with .exe on windows.
func ExecutableName(typ, version, goos string) string {
	name := ProviderPrefix + typ + "_v" + version
	if goos == "windows" {
		name += ".exe"
	}
	return name
}

// SumsName is the name of the release's checksum file: terraform-provider-TYPE_VERSION_SHA256SUMS.
func SumsName(typ, version string) string {
	return ProviderPrefix + typ + "_" + version + "_SHA256SUMS"
}

// ParseFilename parses a release package file name of the form
// terraform-provider-TYPE_VERSION_OS_ARCH.zip.
func ParseFilename(name string) (Filename, error) {
	const want = "want terraform-provider-TYPE_VERSION_OS_ARCH.zip"
	rest, ok := strings.CutPrefix(name, ProviderPrefix)
	if !ok {
		return Filename{}, fmt.Errorf("file name %q does not start with %q (%s)", name, ProviderPrefix, want)
	}
	rest, ok = strings.CutSuffix(rest, ".zip")
	if !ok {
		return Filename{}, fmt.Errorf("file name %q does not end in .zip (%s)", name, want)
	}
	parts := strings.Split(rest, "_")
	if len(parts) != 4 {
		return Filename{}, fmt.Errorf("file name %q has %d '_'-separated parts after the prefix, not 4 (%s)", name, len(parts), want)
	}
	if err := validateType(parts[0]); err != nil {
		return Filename{}, fmt.Errorf("file name %q: %w", name, err)
	}
	if _, err := manifest.ParseVersion(parts[1]); err != nil {
		return Filename{}, fmt.Errorf("file name %q: %w", name, err)
	}
	p, err := manifest.ParsePlatform(parts[2] + "_" + parts[3])
	if err != nil {
		return Filename{}, fmt.Errorf("file name %q: %w", name, err)
	}
	return Filename{Type: parts[0], Version: parts[1], Platform: p}, nil
}

// validateType checks a provider type name: lowercase letters, digits and dashes, starting with
// a letter, as provider source addresses allow.
func validateType(t string) error {
	if t == "" {
		return fmt.Errorf("provider type is empty")
	}
	for i, r := range t {
		switch {
		case r >= 'a' && r <= 'z':
		case (r >= '0' && r <= '9' || r == '-') && i > 0:
		default:
			return fmt.Errorf("provider type %q: use lowercase letters, digits and '-', starting with a letter", t)
		}
	}
	if strings.HasSuffix(t, "-") {
		return fmt.Errorf("provider type %q ends with '-'", t)
	}
	return nil
}

// TypeFromName takes the provider type from a directory or module name of the form
// terraform-provider-TYPE (a module path's last element counts).
func TypeFromName(name string) (string, bool) {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	t, ok := strings.CutPrefix(name, ProviderPrefix)
	if !ok || validateType(t) != nil {
		return "", false
	}
	return t, true
}
