// Package sandbox confines a provider process with the kernel's own means: resource limits,
// no_new_privs, a Landlock ruleset (file system, TCP ports, and the scoping of abstract unix
// sockets and signals) and a seccomp filter. oprov starts a sandboxed provider through a step of
// its own (ExecCommand, the hidden `oprov __sandbox-exec`), which applies a Spec to itself and
// then becomes the provider (execve), so the rules hold before the provider's first instruction.
//
// The parent decides (Plan: what the kernel supports against what the Spec needs, failing closed
// unless best effort is asked for); the step only applies, and refuses to exec when the kernel
// cannot enforce what it was handed.
package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ExecCommand is the hidden subcommand of oprov that applies a Spec and execs the provider:
// `oprov __sandbox-exec SPEC-JSON PROVIDER [ARGS...]`.
const ExecCommand = "__sandbox-exec"

// testABIEnv is a test hook: when set to a number, Probe reports that Landlock ABI instead of the
// kernel's (0: no Landlock), so that tests can show what happens on an older kernel. Only the
// probe reads it; it changes nothing the kernel enforces beyond making oprov use less of it.
const testABIEnv = "OPROV_TEST_LANDLOCK_ABI"

// ABI levels of Landlock that parts of a sandbox need.
const (
	abifs    = 1 // file system rules
	abiNet   = 4 // TCP bind and connect rules
	abiScope = 6 // scoping of abstract unix sockets and signals
)

// Limits are resource limits (setrlimit); zero means not set.
type Limits struct {
	Memory     uint64 `json:"memory,omitempty"`      // bytes of address space (RLIMIT_AS)
	Processes  uint64 `json:"processes,omitempty"`   // RLIMIT_NPROC (counted per user by the kernel)
	OpenFiles  uint64 `json:"open_files,omitempty"`  // RLIMIT_NOFILE
	CPUSeconds uint64 `json:"cpu_seconds,omitempty"` // RLIMIT_CPU
}

// Spec is one provider's sandbox, as the exec step applies it. Paths are absolute.
type Spec struct {
	// Name says where the sandbox comes from (`sandbox "PATTERN"` at FILE:LINE), for messages.
	Name string `json:"name"`
	// ABI is the Landlock ABI the step uses (0: none). Plan sets it.
	ABI int `json:"abi"`
	// Seccomp: load the seccomp filter. Plan sets it.
	Seccomp bool `json:"seccomp"`
	// Read may be read (files) and listed (directories); Exec read and executed; Write read,
	// written, made and removed below. Every path must exist (Landlock attaches a rule to a file).
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	Exec  []string `json:"exec,omitempty"`
	// Connect are the TCP ports the provider may connect to; it may bind none.
	Connect []uint16 `json:"connect,omitempty"`
	// Env are the names of the variables passed through (NAME, or PREFIX* for a family); the
	// parent drops the others before the step starts.
	Env []string `json:"env,omitempty"`
	// SetEnv are variables (NAME=VALUE) the step sets for the provider, in place of any it has:
	// where oprov points a provider's writes (its own cache directories).
	SetEnv []string `json:"set_env,omitempty"`
	Limits Limits   `json:"limits"`
	// BestEffort accepts a weaker sandbox where the kernel lacks a part; Dropped says which.
	BestEffort bool     `json:"best_effort,omitempty"`
	Dropped    []string `json:"dropped,omitempty"`
	// ExecFD, when set, is the exec step's descriptor holding the provider's executable as oprov
	// checked it (an ELF file): the step execs that file, through /proc/self/fd, not the path
	// (which stays argv[0]), so a file put in the path's place after the check never runs.
	ExecFD int `json:"exec_fd,omitempty"`
	// NoLinks are rule paths (of Read, Write and Exec) that were judged where they lead, links
	// resolved, by whoever granted them: the step opens each without following any link, so a
	// link put in a part's place after that judgement is refused, not followed.
	NoLinks []string `json:"no_links,omitempty"`
}

// Support is what this kernel offers.
type Support struct {
	OS          string `json:"os"`
	LandlockABI int    `json:"landlock_abi"`
	// Simulated is true when testABIEnv set LandlockABI.
	Simulated  bool   `json:"simulated,omitempty"`
	Seccomp    bool   `json:"seccomp"`
	NoNewPrivs bool   `json:"no_new_privs"`
	Why        string `json:"why,omitempty"` // why Landlock is missing, when it is
}

// Parts lists what a sandbox of this kernel can enforce, part by part, with the ABI each needs.
func (s Support) Parts() []Part {
	return []Part{
		{"file system rules (read, write, execute)", "Landlock ABI 1", s.LandlockABI >= abifs},
		{"TCP connect and bind rules", "Landlock ABI 4", s.LandlockABI >= abiNet},
		{"abstract unix socket and signal scoping", "Landlock ABI 6", s.LandlockABI >= abiScope},
		{"system call filter (ptrace, mount, namespaces, keyring, bpf, modules)", "seccomp", s.Seccomp},
		{"no_new_privs", "prctl", s.NoNewPrivs},
		{"resource limits", "setrlimit", s.OS == "linux"},
	}
}

// ScopesAbstractSockets says whether this kernel keeps every sandboxed provider from the abstract
// unix sockets made outside its sandbox (Landlock ABI 6): what a socket meant for oprov's own
// processes alone relies on, since a sandboxed provider runs as the same user.
func (s Support) ScopesAbstractSockets() bool { return s.LandlockABI >= abiScope }

// Part is one part of a sandbox and whether this kernel enforces it.
type Part struct {
	What      string `json:"what"`
	Needs     string `json:"needs"`
	Supported bool   `json:"supported"`
}

// Plan fits spec to what the kernel supports. Without BestEffort, a missing part is an error that
// names it and the setting that accepts a weaker sandbox; with it, the parts are dropped and
// listed in Dropped (to be said on every launch).
func Plan(spec Spec, sup Support) (Spec, error) {
	var missing []string
	for _, p := range sup.Parts() {
		if !p.Supported {
			missing = append(missing, fmt.Sprintf("%s (needs %s)", p.What, p.Needs))
		}
	}
	spec.ABI = min(sup.LandlockABI, 7)
	spec.Seccomp = sup.Seccomp
	spec.Dropped = nil
	if len(missing) == 0 {
		return spec, nil
	}
	if !spec.BestEffort {
		kernel := fmt.Sprintf("this kernel (%s) has Landlock ABI %d", sup.OS, sup.LandlockABI)
		if sup.Why != "" {
			kernel += " (" + sup.Why + ")"
		}
		return spec, fmt.Errorf("the provider's sandbox (%s) cannot be enforced: %s, and lacks %s; the provider was not started. Run it on a kernel with Landlock ABI %d or later and seccomp, or set best_effort = true in the sandbox block to start it with a weaker sandbox ('oprov sandbox check' says what this kernel supports)",
			spec.Name, kernel, strings.Join(missing, ", "), abiScope)
	}
	spec.Dropped = missing
	return spec, nil
}

// Describe is one line saying which sandbox a provider runs under.
func (s Spec) Describe() string {
	var parts []string
	if s.ABI > 0 {
		parts = append(parts, "Landlock ABI "+strconv.Itoa(s.ABI))
	}
	if s.Seccomp {
		parts = append(parts, "seccomp")
	}
	ports := "no TCP"
	if len(s.Connect) > 0 {
		var ps []string
		for _, p := range s.Connect {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		ports = "TCP to " + strings.Join(ps, ",")
	}
	d := fmt.Sprintf("sandbox %s (%s; %d read, %d write, %d execute paths; %s; %d variables)",
		s.Name, strings.Join(parts, ", "), len(s.Read), len(s.Write), len(s.Exec), ports, len(s.Env))
	if len(s.Dropped) > 0 {
		d += "; best_effort dropped: " + strings.Join(s.Dropped, ", ")
	}
	return d
}

// Args is the command line that starts path with args under the spec: the exec step's.
func (s Spec) Args(path string, args []string) ([]string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return append([]string{ExecCommand, string(b), path}, args...), nil
}

// FilterEnv keeps the variables of env that names passes through (NAME, or PREFIX* for every
// variable whose name starts with PREFIX).
func FilterEnv(env []string, names []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if EnvAllowed(name, names) {
			out = append(out, kv)
		}
	}
	return out
}

// EnvAllowed reports whether names passes the variable name through.
func EnvAllowed(name string, names []string) bool {
	for _, n := range names {
		if p, ok := strings.CutSuffix(n, "*"); ok && strings.HasPrefix(name, p) || n == name {
			return true
		}
	}
	return false
}

// withEnv is env with the variables of set (NAME=VALUE) in place of any of the same name.
func withEnv(env, set []string) []string {
	if len(set) == 0 {
		return env
	}
	names := map[string]bool{}
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !names[name] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// parseExecArgs reads the exec step's arguments: the spec and the provider's command line.
func parseExecArgs(args []string) (Spec, []string, error) {
	if len(args) < 2 {
		return Spec{}, nil, fmt.Errorf("usage: oprov %s SPEC-JSON PROVIDER [ARGS...] (oprov runs this itself)", ExecCommand)
	}
	var s Spec
	if err := json.Unmarshal([]byte(args[0]), &s); err != nil {
		return Spec{}, nil, fmt.Errorf("sandbox specification: %w", err)
	}
	return s, args[1:], nil
}

// Main is the exec step: it applies the spec in args to this process and execs the provider. It
// returns only on failure, having printed why on stderr (and on stdout, where tofu and oprov quote
// a plugin's first line), with the exit code to use.
func Main(args []string) int {
	spec, argv, err := parseExecArgs(args)
	if err == nil {
		err = apply(spec)
		if err == nil {
			err = execProvider(argv, withEnv(os.Environ(), spec.SetEnv), spec.ExecFD)
		}
	}
	msg := fmt.Sprintf("oprov sandbox: %v", err)
	fmt.Fprintln(os.Stderr, msg)
	fmt.Fprintln(os.Stdout, msg)
	return 1
}
