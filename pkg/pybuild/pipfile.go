package pybuild

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// checkPipLine says why line cannot be one line of a requirements or constraints file that pip
// reads: pip splits a file where Python's str.splitlines does (\n \r \v \f \x1c \x1d \x1e \x85
// U+2028 U+2029), so any of those would start another line, an option such as --index-url
// among them. Other control characters (a tab aside) and bytes that are not UTF-8 are refused
// too: nothing written for pip is meant to hold one.
func checkPipLine(line string) error {
	if !utf8.ValidString(line) {
		return fmt.Errorf("%q is not UTF-8", line)
	}
	for _, r := range line {
		switch {
		case r == '\t':
		case len(splitLines(string(r))) > 1:
			return fmt.Errorf("%q holds %U, where pip would start another line", line, r)
		case unicode.IsControl(r):
			return fmt.Errorf("%q holds the control character %U", line, r)
		}
	}
	return nil
}

// writePipFile writes lines as a requirements or constraints file for pip at path, whole or not
// at all, once each line is checked to stay one line for pip (checkPipLine).
func writePipFile(path string, lines []string) error {
	for _, line := range lines {
		if err := checkPipLine(line); err != nil {
			return fmt.Errorf("writing %s for pip: %w", path, err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".pip-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(strings.Join(lines, "\n") + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// pipMisreads are what pip makes of a requirement line before it reads the requirement: a # after
// white space starts a comment, a word starting with - after a space is an option, and ${NAME} is
// replaced from the environment. A marker taken from a lock file must hold none of them, quoted
// or not, or pip would read another requirement than the file says.
var pipMisreads = sync.OnceValue(func() []pipMisread {
	return []pipMisread{
		{regexp.MustCompile(`\s#`), "pip reads # after white space as the start of a comment"},
		{regexp.MustCompile(`\s-`), "pip reads a word starting with - as an option"},
		{regexp.MustCompile(`\$\{`), "pip replaces ${NAME} with an environment variable"},
	}
})

// pipMisread is a pattern pip reads otherwise than a lock file means it, and why.
type pipMisread struct {
	re  *regexp.Regexp
	why string
}
