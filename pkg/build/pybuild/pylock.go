package pybuild

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// PyLockFile is the PEP 751 lock file oprov reads from a project.
const PyLockFile = "pylock.toml"

// PyLockPins reads a PEP 751 lock file and gives its pins as constraint lines
// ("name==version", with " ; marker" when the entry has one), in the file's order. Entries
// without a version (a directory or VCS source) and the project itself (project, its
// normalized name) are not pins.
func PyLockPins(path, project string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		LockVersion string `toml:"lock-version"`
		Packages    []struct {
			Name      string         `toml:"name"`
			Version   string         `toml:"version"`
			Marker    string         `toml:"marker"`
			Directory map[string]any `toml:"directory"`
			VCS       map[string]any `toml:"vcs"`
		} `toml:"packages"`
	}
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.LockVersion != "" && !strings.HasPrefix(doc.LockVersion, "1.") && doc.LockVersion != "1" {
		return nil, fmt.Errorf("%s: lock-version %s: oprov reads PEP 751 lock-version 1", path, doc.LockVersion)
	}
	var out []string
	for i, p := range doc.Packages {
		if p.Name == "" {
			return nil, fmt.Errorf("%s: packages[%d] has no name", path, i)
		}
		if p.Version == "" || p.Directory != nil || p.VCS != nil || normalizeName(p.Name) == normalizeName(project) {
			continue
		}
		// What becomes a line of a constraints file must stay one pin: a newline or a stray
		// character would smuggle another line or an option (--index-url) into pip's input.
		if !pyLockNamePattern.MatchString(p.Name) || !pyLockVersion.MatchString(p.Version) || strings.ContainsAny(p.Marker, "\r\n#") {
			return nil, fmt.Errorf("%s: packages[%d] (%q %q): a name, version or marker that is not one: names are letters, digits and . _ - (PEP 508), versions have no spaces", path, i, p.Name, p.Version)
		}
		line := p.Name + "==" + p.Version
		if p.Marker != "" {
			line += " ; " + p.Marker
		}
		out = append(out, line)
	}
	return out, nil
}

var (
	pyLockNamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	pyLockVersion     = regexp.MustCompile(`^[A-Za-z0-9.!+_-]+$`)
)

var nameSeparators = regexp.MustCompile(`[-_.]+`)

// normalizeName is a distribution name as PEP 503 compares them.
func normalizeName(n string) string { return nameSeparators.ReplaceAllString(strings.ToLower(n), "-") }
