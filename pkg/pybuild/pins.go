package pybuild

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// pinsFiles are the requirements-style files of the author's pins oprov reads from a project,
// after a PEP 751 lock file, the first found.
var pinsFiles = []string{"constraints.txt", "requirements.txt"}

// pyLockName is a PEP 751 lock file's name: pylock.toml, or pylock.NAME.toml.
var pyLockName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^pylock(\.[^.\s/]+)?\.toml$`) })

// projectPins gives the author's pins for the project in dir (project is its name) as a
// constraints file pip can take, written into scratch under the pins file's own name, so that
// messages name the file the author wrote; "" when there are none.
//
// chosen, when set, is the pins file the author named (--python-pins). Otherwise it is the first
// found in dir of: pylock.toml; the one pylock.NAME.toml (several are an error that asks to choose
// one); constraints.txt; requirements.txt. A lock file gives its packages' versions. A
// requirements or constraints file is read as pip reads it (see requirementsPins).
func projectPins(dir, project, chosen, scratch string) (string, error) {
	src := chosen
	if src == "" {
		var err error
		if src, err = findPins(dir); err != nil || src == "" {
			return "", err
		}
	} else {
		st, err := os.Stat(src)
		if err == nil && !st.Mode().IsRegular() {
			err = fmt.Errorf("not a regular file")
		}
		if err != nil {
			return "", fmt.Errorf("--python-pins %s: %w", src, err)
		}
	}
	src, err := filepath.Abs(src)
	if err != nil {
		return "", err
	}
	var lines []string
	if pyLockName().MatchString(filepath.Base(src)) {
		lines, err = pyLockPins(src, project)
	} else {
		lines, err = requirementsPins(src, nil)
	}
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(scratch, filepath.Base(src))
	if err := writePipFile(out, lines); err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	return out, nil
}

// findPins gives the author's pins file in dir ("" when none), in projectPins' order.
func findPins(dir string) (string, error) {
	regular := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular()
	}
	if p := filepath.Join(dir, pyLockFile); regular(p) {
		return p, nil
	}
	named, _ := filepath.Glob(filepath.Join(dir, "pylock.*.toml"))
	var locks []string
	for _, p := range named {
		if pyLockName().MatchString(filepath.Base(p)) && regular(p) {
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
	for _, name := range pinsFiles {
		if p := filepath.Join(dir, name); regular(p) {
			return filepath.Abs(p)
		}
	}
	return "", nil
}

// hashOption is a --hash option of a requirements line, with its value.
var hashOption = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s--hash(=|\s+)\S+`) })

// commentPattern is a comment as pip finds one: at the start of a line or after white space.
var commentPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|\s+)#.*$`) })

// pipLines gives the logical lines of a requirements file as pip makes them: a line ending in a
// backslash joins the next unless it holds a comment, comments are removed and blank lines
// dropped.
func pipLines(text string) []string {
	var out, pending []string
	for _, line := range splitLines(text) {
		if strings.HasSuffix(line, "\\") && !commentPattern().MatchString(line) {
			pending = append(pending, strings.Trim(line, "\\"))
			continue
		}
		out = append(out, strings.Join(append(pending, line), ""))
		pending = nil
	}
	if len(pending) > 0 {
		out = append(out, strings.Join(pending, ""))
	}
	var kept []string
	for _, line := range out {
		if line = strings.TrimSpace(commentPattern().ReplaceAllString(line, "")); line != "" {
			kept = append(kept, line)
		}
	}
	return kept
}

// splitLines splits text into lines where Python's str.splitlines does, as pip reads a file.
func splitLines(text string) []string {
	var lines []string
	start := 0
	text = strings.ReplaceAll(text, "\r\n", "\n")
	for i, r := range text {
		switch r {
		case '\n', '\r', '\v', '\f', '\x1c', '\x1d', '\x1e', '\u0085', '\u2028', '\u2029':
			lines = append(lines, text[start:i])
			start = i + utf8.RuneLen(r)
		}
	}
	return append(lines, text[start:])
}

// requirementName is a line that starts with a distribution name (PEP 508): a pin or a range.
var requirementName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\s*(\[|==|>=|<=|~=|!=|===|<|>|;|$)`)
})

// keptOptions are the requirements-file options that still mean something in a constraints
// file; the value of those in pathOptions is a path, made absolute.
var (
	keptOptions = []string{"-i", "--index-url", "--extra-index-url", "--no-index", "-f", "--find-links", "--pre", "--trusted-host", "--prefer-binary", "--only-binary", "--no-binary"}
	pathOptions = []string{"-f", "--find-links"}
)

// maxIncludes bounds how deep requirements files may include one another.
const maxIncludes = 8

// requirementsPins reads a requirements or constraints file as constraint lines for pip: its
// logical lines (pipLines), with each file it includes (-r, -c) read in its place, since pip
// would install whatever a -r inside a constraints file names; --hash options and
// --require-hashes dropped (pip would turn hash checking on for every requirement, the project's
// own wheel too, and refuse); editable, path and URL lines dropped (pip takes no unnamed
// requirement or link as a constraint); index options kept, with a relative --find-links made
// absolute against the file's directory. seen holds the files being read, against loops.
func requirementsPins(path string, seen []string) ([]string, error) {
	if slices.Contains(seen, path) {
		return nil, fmt.Errorf("%s includes itself (through %s)", path, strings.Join(seen, ", "))
	}
	if len(seen) == maxIncludes {
		return nil, fmt.Errorf("%s: requirements files included more than %d deep", path, maxIncludes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	abs := func(p string) string {
		if filepath.IsAbs(p) || strings.Contains(p, "://") {
			return p
		}
		return filepath.Join(dir, p)
	}
	var out []string
	for _, line := range pipLines(string(data)) {
		line = strings.TrimSpace(hashOption().ReplaceAllString(" "+line, ""))
		opt, value := splitOption(line)
		switch {
		case line == "" || opt == "--require-hashes":
		case opt == "-r" || opt == "--requirement" || opt == "-c" || opt == "--constraint":
			if strings.Contains(value, "://") {
				return nil, fmt.Errorf("%s includes %s: oprov reads pins from local files only (download it beside the project)", path, value)
			}
			included, err := requirementsPins(abs(value), append(seen, path))
			if err != nil {
				return nil, err
			}
			out = append(out, included...)
		case slices.Contains(keptOptions, opt):
			if slices.Contains(pathOptions, opt) {
				value = abs(value)
			}
			out = append(out, strings.TrimSpace(opt+" "+value))
		case opt == "" && requirementName().MatchString(line) && !strings.Contains(line, " @ "):
			out = append(out, line)
		}
	}
	return out, nil
}

// splitOption splits a requirements line that is an option ("-r base.txt", "-rbase.txt",
// "--requirement=base.txt") into the option and its value; "" for a line that is not one.
func splitOption(line string) (opt, value string) {
	if !strings.HasPrefix(line, "-") {
		return "", ""
	}
	if strings.HasPrefix(line, "--") {
		opt, value, _ = strings.Cut(line, "=")
		if i := strings.IndexAny(opt, " \t"); i >= 0 {
			opt, value = opt[:i], opt[i:]
		}
		return opt, strings.TrimSpace(value)
	}
	if len(line) < 2 {
		return line, ""
	}
	return line[:2], strings.TrimSpace(line[2:])
}
