// Package hint reads a confined provider's messages for the kernel's refusals and says which line
// of a sandbox block would allow what was refused. It is apart from pkg/sandbox so that the
// sandbox step itself (cmd/oprov-sandbox) links no HCL.
package hint

import (
	"github.com/oprov/oprov/pkg/tofufiles"

	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Refusals as Go and Python programs report them: a TCP connect, an exec, and a path. Compiled
// on first use, so that commands which never read a refusal do not pay for them at start.
var (
	connectDenied = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`dial tcp \S*:(\d+): connect: (?:permission denied|operation not permitted)`)
	})
	execDenied = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:fork/exec|exec) "?(/[^\s:"']+)"?: (?:permission denied|operation not permitted)`)
	})
	pathDenied = sync.OnceValue(func() []*regexp.Regexp {
		return []*regexp.Regexp{
			regexp.MustCompile(`(/[^\s:"']+): permission denied`),                        // Go: open /x: permission denied
			regexp.MustCompile(`(?i)permission denied: '(/[^']+)'`),                      // Python: [Errno 13] Permission denied: '/x'
			regexp.MustCompile(`(?i)(?:permission denied|not permitted)[^/]*'(/[^']+)'`), // and its kin
		}
	})
)

// Suggest reads a provider's message (a line of its stderr, or a diagnostic) and, when it reports
// a permission error, says which line of a sandbox block would allow what was refused. It is a
// suggestion: the kernel does not say which rule refused, only that something did.
func Suggest(msg string) (string, bool) {
	if m := connectDenied().FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("the sandbox refused a TCP connection to port %s: to allow it, add connect = [%s] to the provider's sandbox block in oprov.hcl", m[1], m[1]), true
	}
	if m := execDenied().FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("the sandbox refused to run %s: to allow it, add execute = [%s] to the provider's sandbox block in oprov.hcl", m[1], tofufiles.HCLString(m[1])), true
	}
	for _, re := range pathDenied() {
		if m := re.FindStringSubmatch(msg); m != nil {
			p := m[1]
			return fmt.Sprintf("the sandbox may have refused %s: to allow it, add read = [%s] to the provider's sandbox block in oprov.hcl (write = [%s] if it writes there)", p, tofufiles.HCLString(p), tofufiles.HCLString(filepath.Dir(p))), true
		}
	}
	if strings.Contains(msg, "operation not permitted") && strings.Contains(msg, "ptrace") {
		return "the sandbox's seccomp filter refuses ptrace and the other calls that reach into other processes; no sandbox rule allows them", true
	}
	return "", false
}

// pythonRelative is Python's refusal of a relative path ([Errno 13] Permission denied: 'kv.json'),
// as a program reports a path it was given relative to its working directory.
var pythonRelative = regexp.MustCompile(`(?i)permission denied: '([^'/][^']*)'`)

// SuggestIn is Suggest for a program whose working directory is dir: a relative path it reports
// is read against dir, since a sandbox block names absolute paths.
func SuggestIn(msg, dir string) (string, bool) {
	if s, ok := Suggest(msg); ok || dir == "" {
		return s, ok
	}
	if m := pythonRelative.FindStringSubmatchIndex(msg); m != nil {
		abs := filepath.Join(dir, msg[m[2]:m[3]])
		return Suggest(msg[:m[2]] + abs + msg[m[3]:])
	}
	return "", false
}

// LineHinter is a writer that hands every complete line written to it to Suggest, and calls hint
// with each suggestion it has not made before.
type LineHinter struct {
	Hint func(string)
	// Dir is the provider's working directory, for the relative paths its messages name.
	Dir     string
	partial []byte
	said    map[string]bool
}

func (h *LineHinter) Write(p []byte) (int, error) {
	h.partial = append(h.partial, p...)
	for {
		i := strings.IndexByte(string(h.partial), '\n')
		if i < 0 {
			break
		}
		line := string(h.partial[:i])
		h.partial = h.partial[i+1:]
		if s, ok := SuggestIn(line, h.Dir); ok && !h.said[s] {
			if h.said == nil {
				h.said = map[string]bool{}
			}
			h.said[s] = true
			h.Hint(s)
		}
	}
	if len(h.partial) > 64<<10 {
		h.partial = h.partial[:0] // a line this long is not an error message
	}
	return len(p), nil
}
