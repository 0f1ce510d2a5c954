package loader

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/pybuild"
	"github.com/oprov/oprov/pkg/sandbox"
	"github.com/oprov/oprov/pkg/stdiohost"
)

func TestSandboxSpecGoProvider(t *testing.T) {
	pkg := t.TempDir()
	exe := filepath.Join(pkg, "terraform-provider-x")
	os.WriteFile(exe, []byte("\x7fELF not really"), 0o755)
	declared := t.TempDir()
	b := &config.Sandbox{Label: "*", Read: []string{declared}, Connect: []uint16{443}, Env: []string{"ACME_*"}, Memory: 1 << 30}
	s, err := sandboxSpec(Launchable{Addr: "example.com/acme/x", Executable: exe}, b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Exec, pkg) || !slices.Contains(s.Read, declared) || s.Connect[0] != 443 || s.Limits.Memory != 1<<30 {
		t.Errorf("spec: %+v", s)
	}
	if !slices.Contains(s.Env, "ACME_*") || !slices.Contains(s.Env, "PATH") || slices.Contains(s.Env, "AWS_*") {
		t.Errorf("variables: %v", s.Env)
	}
	home, _ := os.UserHomeDir()
	for _, p := range append(append(s.Read, s.Write...), s.Exec...) {
		if home != "" && home != "/" && (p == home || strings.HasPrefix(home, p+"/") && p != "/") {
			t.Errorf("the default allows the home directory through %s", p)
		}
	}
	b.Write = []string{filepath.Join(declared, "missing")}
	if _, err := sandboxSpec(Launchable{Addr: "example.com/acme/x", Executable: exe}, b); err == nil || !strings.Contains(err.Error(), "create it, or leave it out") {
		t.Errorf("a missing declared path: %v", err)
	}
}

func TestSandboxSpecPythonLauncher(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	pkg, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("OPROV_PROVIDER_PYTHON", py)
	exe := pyPackage(t, pkg, "pyhello")
	s, err := sandboxSpec(Launchable{Addr: "example.com/acme/pyhello", Executable: exe}, &config.Sandbox{Label: "*"})
	if err != nil {
		t.Fatal(err)
	}
	sh, _ := exec.LookPath("sh")
	if !slices.Contains(s.Exec, sh) || !slices.Contains(s.Exec, py) {
		t.Errorf("the launcher's shell %s and interpreter %s are not executable: %v", sh, py, s.Exec)
	}
	own := filepath.Join(home, ".cache", "oprov-sandbox")
	if len(s.Write) == 0 || !strings.HasPrefix(s.Write[len(s.Write)-1], own+"/") {
		t.Fatalf("no directory of its own under %s is writable: %v", own, s.Write)
	}
	mine := s.Write[len(s.Write)-1]
	for _, d := range []string{filepath.Join(mine, ".cache", "oprov-python"), filepath.Join(mine, ".cache", "tf-python-provider")} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("%s was not made with mode 0700: %v", d, err)
		}
	}
	if !slices.Contains(s.SetEnv, "HOME="+mine) || !slices.Contains(s.SetEnv, "XDG_CACHE_HOME="+mine+"/.cache") {
		t.Errorf("the launcher's writes are not pointed at %s: %v", mine, s.SetEnv)
	}
	if slices.Contains(s.Write, home) || slices.Contains(s.Read, home) || slices.Contains(s.Write, filepath.Join(home, ".cache", "oprov-python")) {
		t.Errorf("the home, or the bytecode cache every provider shares, is allowed: %+v", s)
	}
	// Bytes that merely look like oprov's launcher are nobody's launcher: no shell, no cache.
	os.WriteFile(exe, []byte("#!/bin/sh\n# terraform-provider-pyhello, packaged by oprov: runs the provider with this machine's CPython\n"), 0o755)
	if s, err = sandboxSpec(Launchable{Addr: "example.com/acme/pyhello", Executable: exe}, &config.Sandbox{Label: "*"}); err != nil || slices.Contains(s.Exec, sh) || len(s.SetEnv) > 0 {
		t.Errorf("a look-alike launcher is treated as oprov's: %v %+v", err, s)
	}
}

// pyPackage writes oprov's packaged Python launcher into dir, as a package of TYPE, and gives it.
func pyPackage(t *testing.T, dir, typ string) string {
	t.Helper()
	exe := filepath.Join(dir, "terraform-provider-"+typ)
	if err := os.WriteFile(exe, []byte(pybuild.Launcher("terraform-provider-"+typ, typ+".main:main", []string{"3.11", "3.12", "3.13"})), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestMain lets this test binary be the sandbox's exec step, as oprov is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ExecCommand {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	if os.Getenv(fakeProgramEnv) != "" {
		os.Exit(fakeProgram(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// underSandbox runs argv through the exec step under spec, with the kernel's sandbox, and gives
// its combined output and error; it skips when this kernel cannot enforce the sandbox.
func underSandbox(t *testing.T, spec sandbox.Spec, argv ...string) (string, error) {
	t.Helper()
	spec, err := sandbox.Plan(spec, sandbox.Probe())
	if err != nil {
		t.Skipf("no real sandbox here: %v", err)
	}
	args, err := spec.Args(argv[0], argv[1:])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = sandbox.FilterEnv(os.Environ(), spec.Env)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// covers reports whether a rule on p reaches path.
func covers(p, path string) bool { return p == path || p == "/" || strings.HasPrefix(path, p+"/") }

// TestSandboxPackageCannotWidenIt: a package whose executable looks like oprov's stdio launcher
// but names / as its directory (the last quoted word), or whose manifest names an absolute
// command, gets no right on anything outside its package: the spec has none, and a read of a
// secret file outside is refused by the kernel.
func TestSandboxPackageCannotWidenIt(t *testing.T) {
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "id_ed25519")
	os.WriteFile(secret, []byte("PLANTED-PRIVATE-KEY\n"), 0o600)
	pkg := t.TempDir()
	exe := filepath.Join(pkg, "terraform-provider-kv")
	os.WriteFile(exe, []byte(stdiohost.Launcher("kv", "1.0.0")+": '/'\n"), 0o755)
	b := &config.Sandbox{Label: "*"}
	s, err := sandboxSpec(Launchable{Addr: "example.com/acme/kv", Executable: exe}, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(append(s.Read, s.Write...), s.Exec...) {
		if covers(p, secret) {
			t.Errorf("the package's own bytes grant %s, which reaches %s", p, secret)
		}
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat")
	}
	s.Exec = append(s.Exec, resolved(cat)...) // as a block's execute list would
	out, err := underSandbox(t, s, cat, secret)
	if err == nil || strings.Contains(out, "PLANTED") {
		t.Errorf("the sandboxed provider read %s: %v %s", secret, err, out)
	}

	// The exact launcher gets what it runs (the shell, the oprov on PATH), and its manifest's
	// command only inside the package or as a bare name on PATH.
	os.WriteFile(exe, []byte(stdiohost.Launcher("kv", "1.0.0")), 0o755)
	sh, _ := exec.LookPath("sh")
	for _, tc := range []struct {
		command string
		refused bool
	}{{"sh", false}, {"./provider.sh", false}, {"/bin/sh", true}, {"../../bin/sh", true}, {secretDir + "/x", true}} {
		os.WriteFile(filepath.Join(pkg, stdiohost.ManifestName), []byte(fmt.Sprintf(`{"type": "kv", "command": [%q]}`, tc.command)), 0o644)
		os.WriteFile(filepath.Join(pkg, "provider.sh"), []byte("#!/bin/sh\n"), 0o755)
		s, err := sandboxSpec(Launchable{Addr: "example.com/acme/kv", Executable: exe}, b)
		if tc.refused != (err != nil) || err != nil && !strings.Contains(err.Error(), "execute list") {
			t.Errorf("command %q: %v", tc.command, err)
		}
		if err == nil && !slices.Contains(s.Exec, sh) {
			t.Errorf("command %q: the launcher's shell is not allowed: %v", tc.command, s.Exec)
		}
		for _, p := range s.Exec {
			if covers(p, secret) {
				t.Errorf("command %q grants %s", tc.command, p)
			}
		}
	}
	b.Execute = []string{"/bin"}
	os.WriteFile(filepath.Join(pkg, stdiohost.ManifestName), []byte(`{"type": "kv", "command": ["/bin/sh"]}`), 0o644)
	if _, err := sandboxSpec(Launchable{Addr: "example.com/acme/kv", Executable: exe}, b); err != nil {
		t.Errorf("an absolute command the block's execute list covers: %v", err)
	}
}

// TestSandboxPycacheNotShared: two sandboxed Python providers write bytecode in directories of
// their own, and one cannot write into the other's (which the kernel refuses), nor into the cache
// unsandboxed providers use.
func TestSandboxPycacheNotShared(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	b := &config.Sandbox{Label: "*"}
	specs := map[string]sandbox.Spec{}
	for _, typ := range []string{"hostile", "victim"} {
		s, err := sandboxSpec(Launchable{Addr: "example.com/acme/" + typ, Executable: pyPackage(t, t.TempDir(), typ)}, b)
		if err != nil {
			t.Fatal(err)
		}
		specs[typ] = s
	}
	// Where each writes its bytecode: where its variables point the launcher, else the user's.
	pycache := func(s sandbox.Spec) string {
		cache := filepath.Join(home, ".cache")
		for _, kv := range s.SetEnv {
			if v, ok := strings.CutPrefix(kv, "XDG_CACHE_HOME="); ok {
				cache = v
			}
		}
		d := filepath.Join(cache, "oprov-python", "pycache")
		os.MkdirAll(d, 0o700)
		return d
	}
	targets := []string{pycache(specs["victim"]), pycache(sandbox.Spec{})}
	for _, d := range targets {
		for _, p := range specs["hostile"].Write {
			if covers(p, d) {
				t.Errorf("the hostile provider may write %s through %s", d, p)
			}
		}
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	own := filepath.Join(pycache(specs["hostile"]), "mine.pyc")
	for _, d := range targets {
		f := filepath.Join(d, "planted.pyc")
		out, err := underSandbox(t, specs["hostile"], sh, "-c", "echo planted > "+f+" && echo ok > "+own)
		if _, serr := os.Stat(f); err == nil || serr == nil {
			t.Errorf("the sandboxed provider wrote %s: %v %s", f, err, out)
		}
	}
	if out, err := underSandbox(t, specs["hostile"], sh, "-c", "echo ok > "+own); err != nil {
		t.Errorf("the sandboxed provider cannot write its own bytecode directory: %v %s", err, out)
	}
}

// TestSandboxBareCommandGetsNoToolTree: a packaged stdio provider naming a bare command found in
// a tool's tree (~/.cargo/bin/x) gets that program, not the tree with its credentials; a known
// interpreter in the system's prefixes still gets its installation.
func TestSandboxBareCommandGetsNoToolTree(t *testing.T) {
	tool := t.TempDir()
	os.MkdirAll(filepath.Join(tool, "bin"), 0o755)
	creds := filepath.Join(tool, "credentials.toml")
	os.WriteFile(creds, []byte("token = \"PLANTED\"\n"), 0o600)
	os.WriteFile(filepath.Join(tool, "bin", "cargo-fmt"), []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("PATH", filepath.Join(tool, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	pkg := t.TempDir()
	exe := filepath.Join(pkg, "terraform-provider-kv")
	os.WriteFile(exe, []byte(stdiohost.Launcher("kv", "1.0.0")), 0o755)
	os.WriteFile(filepath.Join(pkg, stdiohost.ManifestName), []byte(`{"type": "kv", "command": ["cargo-fmt"]}`), 0o644)
	s, err := sandboxSpec(Launchable{Addr: "example.com/acme/kv", Executable: exe}, &config.Sandbox{Label: "*"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Exec, filepath.Join(tool, "bin", "cargo-fmt")) {
		t.Errorf("the program the command names is not executable: %v", s.Exec)
	}
	for _, p := range append(append(s.Read, s.Write...), s.Exec...) {
		if covers(p, creds) {
			t.Errorf("a packaged provider's bare command grants %s, which reaches %s", p, creds)
		}
	}
	// A provider kept as source: its manifest is the user's own, and keeps the tree.
	if more, err := commandNeeds(pkg, "cargo-fmt", true, &config.Sandbox{Label: "*"}); err != nil || !slices.Contains(more, tool) {
		t.Errorf("a provider kept as source: %v %v", more, err)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{{"python3", true}, {"python3.12", true}, {"node", true}, {"python3.x", false}, {"cargo-fmt", false}, {"python3.", false}} {
		if knownInterpreter(c.name) != c.ok {
			t.Errorf("knownInterpreter(%q) = %v", c.name, !c.ok)
		}
	}
	if sh, err := exec.LookPath("sh"); err == nil && systemProgram(sh) {
		if more, _ := commandNeeds(pkg, "sh", false, &config.Sandbox{Label: "*"}); len(more) <= len(resolved(sh)) {
			t.Errorf("a system interpreter named bare lost its installation: %v", more)
		}
	}
}

// TestSandboxPythonHomePerPolicy: the same Python package under two blocks granting different
// rights (one reads a secret, one connects out) writes in two directories, so that what one
// leaves the other cannot pick up; under the same rights it keeps its own.
func TestSandboxPythonHomePerPolicy(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	exe := pyPackage(t, t.TempDir(), "shared")
	secret := t.TempDir()
	own := func(b *config.Sandbox) []string {
		s, err := sandboxSpec(Launchable{Addr: "example.com/acme/shared", Executable: exe}, b)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range s.Write {
			if strings.HasPrefix(p, filepath.Join(home, ".cache", "oprov-sandbox")+"/") {
				out = append(out, p)
			}
		}
		return out
	}
	reads := own(&config.Sandbox{Label: "a", Read: []string{secret}})
	connects := own(&config.Sandbox{Label: "b", Connect: []uint16{443}})
	if len(reads) != 1 || len(connects) != 1 {
		t.Fatalf("no directory of its own: %v %v", reads, connects)
	}
	for _, p := range connects {
		if covers(p, reads[0]) || covers(reads[0], p) {
			t.Errorf("the block that reads secrets and the one that connects out share %s", p)
		}
	}
	if again := own(&config.Sandbox{Label: "c", Read: []string{secret}}); !slices.Equal(again, reads) {
		t.Errorf("the same rights give another directory: %v, %v", again, reads)
	}
}
