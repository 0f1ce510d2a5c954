package loader

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/middleware"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/pybuild"
	"github.com/oprov/oprov/pkg/sandbox"
	"github.com/oprov/oprov/pkg/source"
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
		NoLinks:    b.NoLinks,
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
	needs, err := launcherNeeds(l, b)
	if err != nil {
		return s, err
	}
	s.Exec = append(s.Exec, needs.exec...)
	s.Write = append(s.Write, needs.write...)
	s.SetEnv = needs.env
	return s, nil
}

// needs are the paths a provider's launcher needs beyond its package, and the variables oprov
// sets for it.
type needs struct{ exec, write, env []string }

// launcherNeeds recognises oprov's own launchers and gives what they run. A launcher oprov made on
// this machine (a provider kept as source) is known by the record oprov wrote beside it
// (l.Launcher); a packaged one only when its bytes are exactly those oprov's packaging writes,
// which tells what it does. What they are granted comes from that record, the configuration and
// this machine's PATH, never from a path the package names: any other provider gets nothing here.
func launcherNeeds(l Launchable, b *config.Sandbox) (needs, error) {
	addr, err := manifest.ParseProviderAddress(l.Addr)
	if err != nil {
		return needs{}, err
	}
	if r := l.Launcher; r != nil {
		switch r.Kind {
		case source.LauncherStdio:
			return stdioNeeds(r.Source, []string{r.Host}, true, b)
		case source.LauncherVenv:
			return pythonNeeds(l.Executable, true, b)
		}
		return needs{}, nil
	}
	data, err := readSmall(l.Executable, 64<<10)
	if err != nil || data == nil {
		return needs{}, err
	}
	switch {
	case stdiohost.IsLauncher(data, addr.Type):
		return stdioNeeds(filepath.Dir(l.Executable), nil, false, b)
	case pybuild.IsLauncher(data, providerrelease.ProviderPrefix+addr.Type):
		return pythonNeeds(l.Executable, false, b)
	}
	return needs{}, nil
}

// readSmall reads a file of at most max bytes; nil for a larger one.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil || int64(len(data)) > max {
		return nil, err
	}
	return data, nil
}

// stdioNeeds is what oprov's stdio launchers run: the shell and its tools, the oprov that hosts the
// program (this one, the one on PATH, and hosts), the provider's directory dir, and the
// interpreter its manifest names (commandNeeds; trusted for a provider kept as source).
func stdioNeeds(dir string, hosts []string, trusted bool, b *config.Sandbox) (needs, error) {
	out := []string{dir}
	for _, t := range append(slices.Clip(launcherTools), "dirname", "oprov") {
		if p, err := exec.LookPath(t); err == nil {
			out = append(out, resolved(p)...)
		}
	}
	if self, err := os.Executable(); err == nil {
		hosts = append(hosts, self)
	}
	for _, h := range hosts {
		if _, err := os.Stat(h); err == nil {
			out = append(out, resolved(h)...)
		}
	}
	if m, err := stdiohost.ReadManifest(dir); err == nil && len(m.Command) > 0 {
		more, err := commandNeeds(dir, m.Command[0], trusted, b)
		if err != nil {
			return needs{}, err
		}
		out = append(out, more...)
	}
	return needs{exec: out}, nil
}

// commandNeeds is what running a stdio provider's command needs beyond its directory. A command
// inside the directory needs nothing more. A bare name is looked up on PATH and gets the program
// found (and the file a link leads to); it gets the tree that program was installed in only when
// it is a known interpreter (knownInterpreter) in the system's own prefixes (systemProgram), or
// when trusted (a provider kept as source beside the configuration, whose manifest is the user's
// own): a packaged provider names any program on PATH, and the tree of ~/.cargo/bin/x is
// ~/.cargo, with its credentials. Whatever else it needs comes from the block's execute and read
// lists. Any other command (an absolute path, or one leaving the directory) is refused unless the
// block's execute list covers it: the package does not choose what the sandbox allows.
func commandNeeds(dir, cmd string, trusted bool, b *config.Sandbox) ([]string, error) {
	if !strings.ContainsRune(cmd, '/') {
		p, err := exec.LookPath(cmd)
		if err != nil {
			return nil, nil // the provider fails to start, and says so
		}
		if !trusted && !(knownInterpreter(cmd) && systemProgram(p)) {
			return resolved(p), nil
		}
		home, _ := os.UserHomeDir()
		var out []string
		for _, q := range interpreterTree(p) {
			if q != "/" && (home == "" || q != home && !strings.HasPrefix(home, q+"/")) {
				out = append(out, q)
			}
		}
		return out, nil
	}
	if filepath.IsLocal(cmd) {
		real, err1 := filepath.EvalSymlinks(filepath.Join(dir, cmd))
		root, err2 := filepath.EvalSymlinks(dir)
		if err1 != nil || err2 != nil || within(root, real) {
			return nil, nil
		}
	}
	for _, e := range b.Execute {
		if within(e, cmd) {
			return nil, nil
		}
	}
	return nil, fmt.Errorf("%s: sandbox %q: the stdio provider in %s names the command %q, which is outside its directory: under a sandbox a provider runs only a program inside its own directory or one named bare and found on PATH (which gets that program alone, and its installation only for an interpreter such as python3 in /usr: its libraries elsewhere come from the block's execute and read lists). Name it so in %s, or add the program's directory to the block's execute list",
		b.At(), b.Label, dir, cmd, stdiohost.ManifestName)
}

// knownInterpreter reports whether name is an interpreter a packaged stdio provider may name bare
// and be given its installation (its standard library) with.
func knownInterpreter(name string) bool {
	switch name {
	case "python", "python3", "node", "nodejs", "ruby", "perl", "bash", "sh":
		return true
	}
	v, ok := strings.CutPrefix(name, "python3.")
	return ok && v != "" && strings.Trim(v, "0123456789") == ""
}

// systemProgram reports whether the program at p, and the file it leads to, are in the system's
// own prefixes (/usr, /bin, /sbin; /usr/local), where the administrator installs, rather than in
// a home or a tool's tree: there an interpreter's tree is the system's, not a user's.
func systemProgram(p string) bool {
	for _, q := range resolved(p) {
		ok := false
		for _, prefix := range []string{"/usr", "/bin", "/sbin"} {
			if within(prefix, q) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// within reports whether path is dir or below it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// pythonNeeds is what oprov's Python launchers need: the shell and the few programs the launcher
// runs, every interpreter it may pick (the venv's beside it, for a venv oprov built; else
// OPROV_PROVIDER_PYTHON, or python3 and python3.X on PATH) with the tree it was installed in, and
// a writable directory of this package alone (pythonHome), where oprov points the launcher's
// writes (HOME and XDG_CACHE_HOME).
func pythonNeeds(exe string, venv bool, b *config.Sandbox) (needs, error) {
	env := append(slices.Clip(sandboxEnv), b.Env...)
	getenv := func(k string) string {
		if sandbox.EnvAllowed(k, env) {
			return os.Getenv(k)
		}
		return ""
	}
	var py needs
	for _, t := range launcherTools {
		if p, err := exec.LookPath(t); err == nil {
			py.exec = append(py.exec, resolved(p)...)
		}
	}
	var candidates []string
	if venv {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "venv", "bin", "python"))
	}
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
	home, err := pythonHome(filepath.Dir(exe), b)
	if err != nil {
		return needs{}, err
	}
	vars, dirs := pybuild.LauncherHome(home)
	for _, d := range dirs {
		if err := privateDir(d); err != nil {
			return needs{}, fmt.Errorf("the Python provider's own cache directory %s: %w", d, err)
		}
	}
	py.write, py.env = []string{home}, vars
	return py, nil
}

// pythonHome is the directory of the sandboxed Python provider whose package is pkgDir, under
// block b: in the user's cache, under oprov-sandbox, named by a hash of the package directory's
// real path and of the rights b grants (the cache keeps a package by its contents' digest, so
// another package never shares it; the same package under two blocks, one reading secrets and
// one connecting out, gets two, so that the directory is no channel between the policies).
func pythonHome(pkgDir string, b *config.Sandbox) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("the user's cache directory, where a sandboxed Python provider keeps its bytecode: %w", err)
	}
	if real, err := filepath.EvalSymlinks(pkgDir); err == nil {
		pkgDir = real
	}
	key, err := json.Marshal(struct {
		Dir                       string
		Read, Write, Execute, Env []string
		Connect                   []uint16
	}{pkgDir, b.Read, b.Write, b.Execute, b.Env, b.Connect})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(key)
	return filepath.Join(base, "oprov-sandbox", hex.EncodeToString(sum[:16])), nil
}

// privateDir makes dir (and its missing parents) with mode 0700 and checks that it is a directory
// of this user, not a link, that no one else may write.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return errors.New("is not a directory (remove it: oprov makes it again)")
	}
	if uid, ok := fileUID(st); ok && uid != os.Geteuid() {
		return fmt.Errorf("belongs to user %d, not to you (remove it: oprov makes it again)", uid)
	}
	return os.Chmod(dir, 0o700)
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
		if b == nil && members[i].Remote != nil { // the far side's operator decides
			desc[i] = "whatever sandbox the far side's operator sets (this side asks for none)"
			continue
		}
		if b == nil {
			continue
		}
		if members[i].Remote != nil { // the far side fits the block to its own machine
			desc[i] = fmt.Sprintf("the far side's fit of sandbox %q at %s", b.Label, b.At())
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
		members[i].Wrap = middleware.WithHints(members[i].Options.WorkDir)
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
