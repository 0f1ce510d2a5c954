package pybuild

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// PinsFiles are the requirements-style files of the author's pins oprov reads from a project,
// after a PEP 751 lock file, the first found.
var PinsFiles = []string{"constraints.txt", "requirements.txt"}

// pyLockName is a PEP 751 lock file's name: pylock.toml, or pylock.NAME.toml.
var pyLockName = regexp.MustCompile(`^pylock(\.[^.\s/]+)?\.toml$`)

// ProjectPins gives the author's pins for the project in dir (project is its name) as a
// constraints file pip can take, written into scratch under the pins file's own name, so that
// messages name the file the author wrote; "" when there are none.
//
// chosen, when set, is the pins file the author named (--python-pins). Otherwise it is the first
// found in dir of: pylock.toml; the one pylock.NAME.toml (several are an error that asks to choose
// one); constraints.txt; requirements.txt. A lock file gives its packages' versions; a
// requirements or constraints file is copied with each --hash option dropped (pip would turn hash
// checking on for every requirement, the project's own wheel too, and refuse) and the files it
// includes (-r, -c) made absolute.
func ProjectPins(dir, project, chosen, scratch string) (string, error) {
	src := chosen
	if src == "" {
		var err error
		if src, err = findPins(dir); err != nil || src == "" {
			return "", err
		}
	} else if st, err := os.Stat(src); err != nil || !st.Mode().IsRegular() {
		if err == nil {
			err = fmt.Errorf("not a regular file")
		}
		return "", fmt.Errorf("--python-pins %s: %w", src, err)
	}
	var lines []string
	if pyLockName.MatchString(filepath.Base(src)) {
		pins, err := PyLockPins(src, project)
		if err != nil {
			return "", err
		}
		lines = pins
	} else {
		data, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		lines = requirementsPins(string(data), filepath.Dir(src))
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(scratch, filepath.Base(src))
	if err := os.WriteFile(out, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	return out, nil
}

// findPins gives the author's pins file in dir ("" when none), in ProjectPins' order.
func findPins(dir string) (string, error) {
	regular := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular()
	}
	if p := filepath.Join(dir, PyLockFile); regular(p) {
		return p, nil
	}
	named, _ := filepath.Glob(filepath.Join(dir, "pylock.*.toml"))
	var locks []string
	for _, p := range named {
		if pyLockName.MatchString(filepath.Base(p)) && regular(p) {
			locks = append(locks, filepath.Base(p))
		}
	}
	switch len(locks) {
	case 0:
	case 1:
		return filepath.Join(dir, locks[0]), nil
	default:
		return "", fmt.Errorf("%s holds %d PEP 751 lock files (%s): choose one with --python-pins", dir, len(locks), strings.Join(locks, ", "))
	}
	for _, name := range PinsFiles {
		if p := filepath.Join(dir, name); regular(p) {
			return filepath.Abs(p)
		}
	}
	return "", nil
}

// hashOption is a --hash option of a requirements line, with its value.
var hashOption = regexp.MustCompile(`\s--hash[=\s]\s*\S+`)

// includeLine is a requirements line that includes another file: -r FILE, -c FILE and their long
// forms.
var includeLine = regexp.MustCompile(`^(-r|-c|--requirement|--constraint)(=|\s+)(\S+)\s*$`)

// requirementsPins gives the lines of a requirements or constraints file as pip reads them
// (backslash continuations joined), without --hash options and comment-only lines, with the
// relative path of an included file made absolute against dir.
func requirementsPins(text, dir string) []string {
	var out []string
	joined := strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(hashOption.ReplaceAllString(" "+line, ""))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := includeLine.FindStringSubmatch(line); m != nil && !filepath.IsAbs(m[3]) && !strings.Contains(m[3], "://") {
			line = m[1] + " " + filepath.Join(dir, m[3])
		}
		out = append(out, line)
	}
	return out
}
