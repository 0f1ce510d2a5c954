package manifest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
)

// VersionToTag turns a provider version into its OCI tag. OCI tags cannot hold '+', so build
// metadata is joined with '_' instead: 1.2.0+abc is tagged 1.2.0_abc. The version must be valid
// semver in its canonical form (three numbers, no "v" prefix).
func VersionToTag(version string) (string, error) {
	if _, err := ParseVersion(version); err != nil {
		return "", err
	}
	return strings.ReplaceAll(version, "+", "_"), nil
}

// TagToVersion turns an OCI tag back into the provider version it names. Tags that are not
// versions ("latest", "sha256-...", "linux_amd64") give an error; OpenTofu ignores such tags.
func TagToVersion(tag string) (string, error) {
	if strings.Contains(tag, "+") {
		return "", fmt.Errorf("tag %q is not a version: OCI tags cannot contain '+' (write build metadata with '_')", tag)
	}
	v := strings.Replace(tag, "_", "+", 1)
	if _, err := ParseVersion(v); err != nil {
		return "", fmt.Errorf("tag %q is not a version: %v", tag, err)
	}
	return v, nil
}

// ParseVersion parses a provider version the way OpenTofu does, and also insists on the
// canonical spelling, so that one version has exactly one tag.
func ParseVersion(s string) (versions.Version, error) {
	v, err := parseVersion(s)
	if err != nil {
		return versions.Version{}, fmt.Errorf("version %q: %v", s, err)
	}
	if v.String() != s {
		return versions.Version{}, fmt.Errorf("version %q is not in canonical form: write %q", s, v.String())
	}
	return v, nil
}

// VersionTags picks the tags that name versions and returns them with their versions, highest
// version first. Other tags are ignored, as OpenTofu ignores them.
func VersionTags(tags []string) []TaggedVersion {
	var out []TaggedVersion
	for _, t := range tags {
		v, err := TagToVersion(t)
		if err != nil {
			continue
		}
		pv, _ := parseVersion(v)
		out = append(out, TaggedVersion{Tag: t, Version: pv})
	}
	sortTagged(out)
	return out
}

// TaggedVersion is a tag that names a version.
type TaggedVersion struct {
	Tag     string
	Version versions.Version
}

func sortTagged(tv []TaggedVersion) {
	sort.SliceStable(tv, func(i, j int) bool { return tv[j].Version.LessThan(tv[i].Version) })
}

// parseVersion is versions.ParseVersion without its panic on numbers that overflow uint64
// (found by FuzzTagToVersion: a tag "20000000000000000000" would crash a tag listing).
func parseVersion(s string) (v versions.Version, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = versions.Version{}, fmt.Errorf("not a valid version: %v", r)
		}
	}()
	return versions.ParseVersion(s)
}

// Constraints parses version constraints as OpenTofu writes them ("~> 1.2, >= 1.2.3"; "" allows
// every released version) into the set of versions they allow.
func Constraints(s string) (set versions.Set, err error) {
	if s == "" {
		return versions.Released, nil
	}
	defer func() {
		if r := recover(); r != nil { // go-versions panics on numbers that overflow
			set, err = versions.Set{}, fmt.Errorf("version constraint %q: %v", s, r)
		}
	}()
	set, err = versions.MeetingConstraintsStringRuby(s)
	if err != nil {
		return versions.Set{}, fmt.Errorf("version constraint %q: %w", s, err)
	}
	return set, nil
}
