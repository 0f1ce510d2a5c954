package pybuild

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
)

// pyLockFile is the PEP 751 lock file oprov reads from a project.
const pyLockFile = "pylock.toml"

// pyLockPins reads a PEP 751 lock file and gives its pins as constraint lines
// ("name==version", with " ; marker" when the entry has one), in the file's order. Entries
// without a version (a directory or VCS source) and the project itself (project, its
// normalized name) are not pins.
func pyLockPins(path, project string) ([]string, error) {
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
		line, err := pyLockPin(p.Name, p.Version, p.Marker)
		if err != nil {
			return nil, fmt.Errorf("%s: packages[%d] (name %q): %w", path, i, p.Name, err)
		}
		out = append(out, line)
	}
	return out, nil
}

// pyLockPin is a lock file's package entry as one line of a constraints file. What the file
// says is checked to stay one pin for pip: a line break of any kind pip knows, or a character
// pip reads as a comment, an option or a variable, would smuggle another line or an option
// (--index-url) into pip's input. Names are PEP 508's, versions have no space, markers are PEP
// 508 environment markers (checkMarker).
func pyLockPin(name, version, marker string) (string, error) {
	if !pyLockNamePattern().MatchString(name) {
		return "", fmt.Errorf("the name is not a distribution name: names are letters, digits and . _ - (PEP 508)")
	}
	if !pyLockVersion().MatchString(version) {
		return "", fmt.Errorf("version %q is not a version: versions are letters, digits and . ! + _ - (PEP 440)", version)
	}
	line := name + "==" + version
	if marker == "" {
		return line, nil
	}
	if err := checkMarker(marker); err != nil {
		return "", fmt.Errorf("marker %q is not a PEP 508 environment marker: %w (write one such as python_version >= \"3.11\" and sys_platform == \"linux\")", marker, err)
	}
	for _, m := range pipMisreads() {
		if m.re.MatchString(marker) {
			return "", fmt.Errorf("marker %q cannot be given to pip: %s", marker, m.why)
		}
	}
	line += " ; " + marker
	return line, checkPipLine(line)
}

var (
	pyLockNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`) })
	pyLockVersion     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9.!+_-]+$`) })
)

var nameSeparators = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[-_.]+`) })

// normalizeName is a distribution name as PEP 503 compares them.
func normalizeName(n string) string {
	return nameSeparators().ReplaceAllString(strings.ToLower(n), "-")
}
