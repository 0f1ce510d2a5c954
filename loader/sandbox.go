package loader

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/oprov/oprov/internal/build/pybuild"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/middleware"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/sandbox"
	"github.com/oprov/oprov/pkg/stdiohost"
)

// sandboxEnv are the variables every sandboxed provider keeps: the locale, where programs and its
// home are (a name, not a right to read it), the logging settings tofu and oprov pass, the
// system's certificate settings, and what the Python launcher reads. A block's env adds to them.
var sandboxEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM",
	"TF_LOG", "TF_LOG_*", "SSL_CERT_FILE", "SSL_CERT_DIR", "OPROV_PROVIDER_PYTHON", "XDG_CACHE_HOME"}

// The system's files every sandboxed provider may use, where they exist: CA certificates, time
// zones, the resolver's files, the dynamic linker's cache and random devices (read), the shared
// libraries a dynamically linked program loads (read and execute), and /dev/null (write).
var (
	systemRead = []string{"/etc/ssl", "/etc/pki", "/etc/ca-certificates", "/usr/share/ca-certificates", "/etc/localtime",
		"/usr/share/zoneinfo", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
		"/etc/services", "/etc/protocols", "/etc/ld.so.cache", "/dev/urandom", "/dev/random", "/dev/zero"}
	systemExec  = []string{"/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32"}
	systemWrite = []string{"/dev/null"}
	// launcherTools are the programs the Python launcher (a sh script) runs besides Python.
	launcherTools = []string{"sh", "readlink", "id", "mkdir", "mktemp"}
)

// existing keeps the paths that exist.
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// sandboxSpec is the sandbox of one provider under a block: the default (its own package, the
// system's files, its interpreter for a Python provider) and what the block adds.
func sandboxSpec(l Launchable, b *config.Sandbox) (sandbox.Spec, error) {
	s := sandbox.Spec{
		Name:  fmt.Sprintf("%q at %s", b.Label, b.At()),
		Read:  existing(systemRead),
		Exec:  append(existing(systemExec), filepath.Dir(l.Executable)),
		Write: existing(systemWrite),
		Env:   append(slices.Clip(sandboxEnv), b.Env...),
		Limits: sandbox.Limits{Memory: b.Memory, Processes: b.Processes, OpenFiles: b.OpenFiles,
			CPUSeconds: b.CPUSeconds},
		Connect:    b.Connect,
		BestEffort: b.BestEffort,
	}
	for _, v := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR"} {
		s.Read = append(s.Read, existing(filepath.SplitList(os.Getenv(v)))...)
	}
	for _, d := range []struct {
		paths []string
		to    *[]string
		what  string
	}{{b.Read, &s.Read, "read"}, {b.Write, &s.Write, "write"}, {b.Execute, &s.Exec, "execute"}} {
		for _, p := range d.paths {
			if _, err := os.Stat(p); err != nil {
				return s, fmt.Errorf("%s: sandbox %q: %s path %s: %w (Landlock attaches a rule to an existing file or directory: create it, or leave it out)", b.At(), b.Label, d.what, p, err)
			}
			*d.to = append(*d.to, p)
		}
	}
	s.Exec = append(s.Exec, stdioNeeds(l.Executable)...)
	if py, err := pythonNeeds(l.Executable, s.Env); err != nil {
		return s, err
	} else if py != nil {
		s.Exec = append(s.Exec, py.exec...)
		s.Write = append(s.Write, py.write...)
	}
	return s, nil
}

// stdioQuoted is the last single-quoted word of the stdio launcher's exec line (shell-quoted as
// pkg/source writes it).
var stdioQuoted = regexp.MustCompile(`'((?:[^']|'\\'')*)'\s*$`)

// stdioNeeds recognises oprov's stdio launchers (kept as source: an exec of this oprov with the
// provider's directory; packaged: an exec of the oprov on PATH with the script's own directory)
// and gives what they run: the shell and its tools, the oprov that hosts the program, the
// provider's directory, and the interpreter its manifest names with its tree. nil otherwise.
func stdioNeeds(exe string) []string {
	data, err := os.ReadFile(exe)
	if err != nil || len(data) > 64<<10 || !bytes.HasPrefix(data, []byte("#!/bin/sh\n")) || !bytes.Contains(data, []byte(" __stdio-host ")) {
		return nil
	}
	dir := filepath.Dir(exe)
	if m := stdioQuoted.FindSubmatch(bytes.TrimSpace(data)); m != nil {
		dir = strings.ReplaceAll(string(m[1]), `'\''`, "'")
	}
	out := []string{dir}
	for _, t := range append(slices.Clip(launcherTools), "dirname", "oprov") {
		if p, err := exec.LookPath(t); err == nil {
			out = append(out, resolved(p)...)
		}
	}
	if self, err := os.Executable(); err == nil {
		out = append(out, resolved(self)...)
	}
	if m, err := stdiohost.ReadManifest(dir); err == nil && len(m.Command) > 0 {
		cmd := m.Command[0]
		if !filepath.IsAbs(cmd) && strings.ContainsRune(cmd, '/') {
			cmd = filepath.Join(dir, cmd)
		}
		if p, err := exec.LookPath(cmd); err == nil {
			out = append(out, interpreterTree(p)...)
		}
	}
	return out
}

// pyNeeds are the paths a Python provider needs beyond its package.
type pyNeeds struct{ exec, write []string }

// pythonNeeds recognises oprov's Python launchers (packaged, or a venv kept as source) and gives
// what they need: the shell and the few programs the launcher runs, every interpreter it may
// pick with the tree it was installed in, and the user's cache directories it writes (made when
// missing, as the launcher would). nil for any other provider.
func pythonNeeds(exe string, env []string) (*pyNeeds, error) {
	head := make([]byte, 512)
	f, err := os.Open(exe)
	if err != nil {
		return nil, err
	}
	n, _ := io.ReadFull(f, head)
	f.Close()
	head = head[:n]
	if !bytes.HasPrefix(head, []byte("#!/bin/sh\n")) || !bytes.Contains(head, []byte("by oprov")) {
		return nil, nil
	}
	getenv := func(k string) string {
		if sandbox.EnvAllowed(k, env) {
			return os.Getenv(k)
		}
		return ""
	}
	py := &pyNeeds{}
	for _, t := range launcherTools {
		if p, err := exec.LookPath(t); err == nil {
			py.exec = append(py.exec, resolved(p)...)
		}
	}
	candidates := []string{filepath.Join(filepath.Dir(exe), "venv", "bin", "python")}
	if v := getenv("OPROV_PROVIDER_PYTHON"); v != "" {
		candidates = append(candidates, v)
	} else {
		candidates = append(candidates, "python3")
		for _, v := range pybuild.PythonVersions {
			candidates = append(candidates, "python"+v)
		}
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			py.exec = append(py.exec, interpreterTree(p)...)
		}
	}
	for _, d := range pybuild.LauncherWrites(getenv) {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("the Python provider's cache directory %s: %w", d, err)
		}
		py.write = append(py.write, d)
	}
	return py, nil
}

// resolved is path and, when it is a link, the file it leads to.
func resolved(p string) []string {
	out := []string{p}
	if r, err := filepath.EvalSymlinks(p); err == nil && r != p {
		out = append(out, r)
	}
	return out
}

// interpreterTree is what running the interpreter at p needs: p, the file it leads to, and the
// tree it was installed in (PREFIX of PREFIX/bin/python3.X, where its standard library is). A
// script (a pyenv shim) needs its tool's tree (the shim's ../) and the system's programs it runs.
func interpreterTree(p string) []string {
	out := resolved(p)
	real := out[len(out)-1]
	if f, err := elf.Open(real); err == nil {
		f.Close()
		return append(out, filepath.Dir(filepath.Dir(real)))
	}
	return append(out, append([]string{filepath.Dir(filepath.Dir(real))}, existing([]string{"/bin", "/usr/bin"})...)...)
}

// withSandbox gives each member the sandbox its block asks for, fitted to what the kernel
// supports (sandbox.Plan): a provider whose sandbox cannot be enforced is an error naming it,
// unless its block sets best_effort, when warn says what was dropped. It gives one line per
// provider saying what it runs under, for -v and the audit.
func (p *Project) withSandbox(members []plugin.Member, ls []Launchable, warn func(string)) ([]string, error) {
	desc := make([]string, len(members))
	var sup *sandbox.Support
	self := ""
	for i, l := range ls {
		desc[i] = "no sandbox"
		addr, err := manifest.ParseProviderAddress(l.Addr)
		if err != nil {
			return nil, err
		}
		b := p.Config.SandboxFor(addr)
		if b == nil {
			continue
		}
		if sup == nil {
			s := sandbox.Probe()
			sup = &s
			if self, err = sandboxExecutable(); err != nil {
				return nil, err
			}
		}
		spec, err := sandboxSpec(l, b)
		if err != nil {
			return nil, err
		}
		if spec, err = sandbox.Plan(spec, *sup); err != nil {
			return nil, fmt.Errorf("%s: %w", l.Addr, err)
		}
		if len(spec.Dropped) > 0 {
			warn(fmt.Sprintf("%s runs with a weaker sandbox (best_effort = true in sandbox %q at %s): this kernel lacks %s", l.Addr, b.Label, b.At(), strings.Join(spec.Dropped, ", ")))
		}
		members[i].Options.Sandbox, members[i].Options.SandboxExec = &spec, self
		addr2 := l.Addr
		members[i].Options.Hint = func(s string) { warn(addr2 + ": " + s) }
		members[i].Wrap = middleware.WithHints
		desc[i] = spec.Describe()
	}
	return desc, nil
}

// sandboxExecutable is the program that applies a sandbox: oprov-sandbox beside oprov's own
// executable when it is there (the same step, quicker to start), else oprov itself (its hidden
// __sandbox-exec command).
func sandboxExecutable() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding oprov's own executable, which starts sandboxed providers: %w", err)
	}
	helper := filepath.Join(filepath.Dir(self), "oprov-sandbox")
	if st, err := os.Stat(helper); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return helper, nil
	}
	return self, nil
}
