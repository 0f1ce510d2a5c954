package sandbox

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets this test binary be the exec step, as oprov is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ExecCommand {
		os.Exit(Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// confined runs argv through the exec step under spec and gives its combined output.
func confined(t *testing.T, spec Spec, env []string, argv ...string) (string, error) {
	t.Helper()
	sup := Probe()
	if sup.LandlockABI < abiScope || !sup.Seccomp {
		t.Skipf("this kernel lacks Landlock ABI %d or seccomp: %+v", abiScope, sup)
	}
	spec, err := Plan(spec, sup)
	if err != nil {
		t.Fatal(err)
	}
	args, err := spec.Args(argv[0], argv[1:])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestApplyConfines(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("allowed"), 0o644)
	os.WriteFile(filepath.Join(other, "secret.txt"), []byte("secret"), 0o644)
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	spec := Spec{Name: "test", Exec: []string{"/lib", "/lib64", "/usr/lib", sh, "/usr/bin/cat", "/usr/bin/unshare"}, Read: []string{dir}, Write: []string{"/dev/null"}}
	spec.Exec = existingPaths(spec.Exec)
	for _, tc := range []struct {
		argv []string
		want string
		ok   bool
	}{
		{[]string{"/usr/bin/cat", filepath.Join(dir, "ok.txt")}, "allowed", true},
		{[]string{"/usr/bin/cat", filepath.Join(other, "secret.txt")}, "Permission denied", false},
		{[]string{sh, "-c", "echo x > " + filepath.Join(dir, "new")}, "Permission denied", false},
		{[]string{"/usr/bin/unshare", "-U", "/usr/bin/cat", "/dev/null"}, "Operation not permitted", false},
		{[]string{"/usr/bin/ls", dir}, "oprov sandbox: exec /usr/bin/ls: permission denied", false},
	} {
		out, err := confined(t, spec, []string{"PATH=/usr/bin:/bin"}, tc.argv...)
		if (err == nil) != tc.ok || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %v, %q; want ok=%v and %q", tc.argv, err, out, tc.ok, tc.want)
		}
	}
}

func TestApplyRefusesBadSpec(t *testing.T) {
	out, err := exec.Command(os.Args[0], ExecCommand, "{not json", "/bin/true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "sandbox specification") {
		t.Errorf("a bad spec: %v, %s", err, out)
	}
	b, _ := json.Marshal(Spec{Name: "none"}) // ABI 0, no seccomp, no best effort
	out, err = exec.Command(os.Args[0], ExecCommand, string(b), "/bin/true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to start the provider unconfined") {
		t.Errorf("a spec with nothing planned: %v, %s", err, out)
	}
	b, _ = json.Marshal(Spec{Name: "missing", ABI: 7, Seccomp: true, Read: []string{"/nonexistent/x"}})
	out, err = exec.Command(os.Args[0], ExecCommand, string(b), "/bin/true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "/nonexistent/x") {
		t.Errorf("a missing path: %v, %s", err, out)
	}
}

func existingPaths(ps []string) []string {
	var out []string
	for _, p := range ps {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}
