package loader

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader/config"
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
	exe := filepath.Join(pkg, "terraform-provider-pyhello")
	os.WriteFile(exe, []byte("#!/bin/sh\n# terraform-provider-pyhello, packaged by oprov: runs the provider with this machine's CPython\n"), 0o755)
	s, err := sandboxSpec(Launchable{Addr: "example.com/acme/pyhello", Executable: exe}, &config.Sandbox{Label: "*"})
	if err != nil {
		t.Fatal(err)
	}
	sh, _ := exec.LookPath("sh")
	if !slices.Contains(s.Exec, sh) || !slices.Contains(s.Exec, py) {
		t.Errorf("the launcher's shell %s and interpreter %s are not executable: %v", sh, py, s.Exec)
	}
	for _, d := range []string{filepath.Join(home, ".cache", "oprov-python"), filepath.Join(home, ".cache", "tf-python-provider")} {
		if !slices.Contains(s.Write, d) {
			t.Errorf("%s is not writable: %v", d, s.Write)
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("%s was not made: %v", d, err)
		}
	}
	if slices.Contains(s.Write, home) || slices.Contains(s.Read, home) {
		t.Errorf("the home itself is allowed: %+v", s)
	}
}
