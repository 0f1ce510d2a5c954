package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/oprov/oprov/manifest"
)

// Sandbox is one sandbox block of oprov.hcl: what the providers it selects may touch beyond the
// safe default (see loader's sandbox.go for the default, and pkg/sandbox for the enforcement).
type Sandbox struct {
	Label   string  // as written: an address, a pattern, or "*" for every provider
	Pattern Pattern // what the label selects
	// Paths are absolute (relative ones are relative to oprov.hcl; ~/ is the user's home).
	Read, Write, Execute []string
	// Written are the read, write and execute paths as the block writes them: what a remote
	// provider's far side resolves on its own machine (its home for ~, its home for a relative
	// path), since the near side's home and directory mean nothing there.
	Written              SandboxPaths
	Connect              []uint16
	Env                  []string
	Memory               uint64 // bytes
	Processes, OpenFiles uint64
	CPUSeconds           uint64
	BestEffort           bool
	// NoLinks are paths judged where they lead (a far side's narrowing of a near request): the
	// sandbox opens each without following a link, so one swapped in afterwards is refused.
	NoLinks []string
	Range   hcl.Range
}

// SandboxPaths are a sandbox block's paths, by right.
type SandboxPaths struct{ Read, Write, Execute []string }

type sandboxFile struct {
	Label      string    `hcl:"pattern,label"`
	Read       []string  `hcl:"read,optional"`
	Write      []string  `hcl:"write,optional"`
	Execute    []string  `hcl:"execute,optional"`
	Connect    []int     `hcl:"connect,optional"`
	Env        []string  `hcl:"env,optional"`
	Memory     *string   `hcl:"memory,optional"`
	Processes  *int      `hcl:"processes,optional"`
	OpenFiles  *int      `hcl:"open_files,optional"`
	CPUTime    *string   `hcl:"cpu_time,optional"`
	BestEffort *bool     `hcl:"best_effort,optional"`
	DeclRange  hcl.Range `hcl:",def_range"`
}

// At is where the block is, FILE:LINE.
func (s *Sandbox) At() string { return fmt.Sprintf("%s:%d", s.Range.Filename, s.Range.Start.Line) }

// parseSandboxes checks every sandbox block: its label, paths, ports, names and limits.
func (c *Config) parseSandboxes(blocks []sandboxFile) error {
	seen := map[string]bool{}
	for _, b := range blocks {
		at := fmt.Sprintf("%s:%d", b.DeclRange.Filename, b.DeclRange.Start.Line)
		s, err := parseSandbox(c.Path, b)
		if err != nil {
			return fmt.Errorf("%s: sandbox %q: %w", at, b.Label, err)
		}
		if seen[s.Pattern.String()] {
			return fmt.Errorf("%s: sandbox %q: a sandbox block for %s is declared twice", at, b.Label, s.Pattern)
		}
		seen[s.Pattern.String()] = true
		c.Sandboxes = append(c.Sandboxes, s)
	}
	return nil
}

func parseSandbox(path string, b sandboxFile) (*Sandbox, error) {
	label := b.Label
	if label == "*" {
		label = "*/*/*"
	}
	pat, err := parsePattern(label)
	if err != nil {
		return nil, fmt.Errorf("%w (or \"*\" for every provider)", err)
	}
	s := &Sandbox{Label: b.Label, Pattern: pat, Env: b.Env, Range: b.DeclRange, BestEffort: b.BestEffort != nil && *b.BestEffort,
		Written: SandboxPaths{Read: b.Read, Write: b.Write, Execute: b.Execute}}
	for _, l := range []struct {
		in  []string
		out *[]string
	}{{b.Read, &s.Read}, {b.Write, &s.Write}, {b.Execute, &s.Execute}} {
		for _, p := range l.in {
			abs, err := sandboxPath(path, p)
			if err != nil {
				return nil, err
			}
			*l.out = append(*l.out, abs)
		}
	}
	for _, p := range b.Connect {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("connect: port %d is not a TCP port (1-65535)", p)
		}
		s.Connect = append(s.Connect, uint16(p))
	}
	for _, n := range b.Env {
		if strings.TrimSuffix(n, "*") == "" || strings.ContainsAny(strings.TrimSuffix(n, "*"), "=*") {
			return nil, fmt.Errorf("env: %q is not a variable name (NAME, or PREFIX* for a family)", n)
		}
	}
	return s, s.parseLimits(b)
}

// parseLimits reads memory ("512MiB"), processes, open_files and cpu_time ("90s", "5m").
func (s *Sandbox) parseLimits(b sandboxFile) error {
	if b.Memory != nil {
		n, err := parseBytes(*b.Memory)
		if err != nil {
			return fmt.Errorf("memory: %w", err)
		}
		s.Memory = n
	}
	for _, l := range []struct {
		name string
		in   *int
		out  *uint64
	}{{"processes", b.Processes, &s.Processes}, {"open_files", b.OpenFiles, &s.OpenFiles}} {
		if l.in == nil {
			continue
		}
		if *l.in < 1 {
			return fmt.Errorf("%s = %d: want a positive number", l.name, *l.in)
		}
		*l.out = uint64(*l.in)
	}
	if b.CPUTime != nil {
		d, err := time.ParseDuration(*b.CPUTime)
		if err != nil || d < time.Second {
			return fmt.Errorf("cpu_time = %q: want a duration of a second or more, as \"90s\" or \"5m\"", *b.CPUTime)
		}
		s.CPUSeconds = uint64(d / time.Second)
	}
	return nil
}

// parseBytes reads a size: a number with an optional unit (B, KiB, MiB, GiB, KB, MB, GB).
func parseBytes(v string) (uint64, error) {
	v = strings.TrimSpace(v)
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := v, ""
	if i >= 0 {
		num, unit = v[:i], strings.TrimSpace(v[i:])
	}
	mult := map[string]float64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
	f, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil || f*mult < 1<<20 {
		return 0, fmt.Errorf("%q: want a size of 1MiB or more, as \"512MiB\" or \"2GiB\"", v)
	}
	return uint64(f * mult), nil
}

// sandboxPath makes a declared path absolute: ~/ is the user's home, and a relative path is
// relative to oprov.hcl's directory.
func sandboxPath(cfgPath, p string) (string, error) {
	return SandboxPath(filepath.Dir(cfgPath), p)
}

// SandboxPath makes a sandbox path absolute on this machine: ~ and ~/... are this user's home, a
// relative path is relative to base. Another user's home (~name) is refused.
func SandboxPath(base, p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("an empty path")
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%q: %w", p, err)
		}
		return filepath.Join(home, p[1:]), nil
	case strings.HasPrefix(p, "~"):
		return "", fmt.Errorf("%q: another user's home (~NAME) is not a sandbox path: write ~/... or an absolute path", p)
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	}
	return filepath.Abs(filepath.Join(base, p))
}

// SandboxFor gives the sandbox block that applies to addr, or nil: the most specific pattern
// (an exact address before NAMESPACE/*, before "*"), the first written among equals.
func (c *Config) SandboxFor(addr manifest.ProviderAddress) *Sandbox {
	var best *Sandbox
	for _, s := range c.Sandboxes {
		if s.Pattern.Match(addr) && (best == nil || specificity(s.Pattern) > specificity(best.Pattern)) {
			best = s
		}
	}
	return best
}
