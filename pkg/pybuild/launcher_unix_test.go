//go:build unix

package pybuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPythonLauncherPlantedBytecode: with XDG_CACHE_HOME a sticky directory every user can
// write, another user (uid 65534) plants an unchecked-hash .pyc for the packaged module where
// CPython would look for it under CACHE/oprov-python/pycache, before the first launch; the launch
// runs the packaged source, not the planted code. (tests/pycache_test.go does the same with the
// packaged example provider under tofu.)
func TestPythonLauncherPlantedBytecode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a child as another user needs root")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	out, err := exec.Command(py, "-I", "-c", "import sys; print(\"%d.%d\" % sys.version_info[:2], sys.implementation.cache_tag)").Output()
	if err != nil {
		t.Fatal(err)
	}
	version, tag, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	pkg := t.TempDir()
	exe := filepath.Join(pkg, "terraform-provider-x_v1.0.0")
	if err := os.WriteFile(exe, []byte(Launcher("terraform-provider-x", "x.main:main", []string{version})), 0o755); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(pkg, "lib", cpTag(version))
	os.MkdirAll(filepath.Join(lib, "x"), 0o755)
	os.WriteFile(filepath.Join(lib, "x", "__init__.py"), nil, 0o644)
	os.WriteFile(filepath.Join(lib, "x", "main.py"), []byte("def main():\n    print(\"packaged\")\n"), 0o644)

	open := func(mode os.FileMode) string {
		d, err := os.MkdirTemp("", "oprov-plant-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		os.Chmod(d, mode)
		return d
	}
	xdg, stage := open(0o777|os.ModeSticky), open(0o755)
	evil := filepath.Join(stage, "main.py")
	os.WriteFile(evil, []byte("def main():\n    print(\"planted\")\n"), 0o644)
	compile := "import py_compile, sys\npy_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
	if out, err := exec.Command(py, "-I", "-c", compile, evil, evil+"c").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	os.Chmod(evil+"c", 0o644)
	target := filepath.Join(xdg, "oprov-python", "pycache", lib, "x", "main."+tag+".pyc")
	plant := exec.Command("/bin/sh", "-c", `mkdir -p "$(dirname "$2")" && cp "$1" "$2"`, "sh", evil+"c", target)
	plant.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := plant.CombinedOutput(); err != nil {
		t.Fatalf("planting as uid 65534: %v\n%s", err, out)
	}

	run := func(env ...string) string {
		cmd := exec.Command(exe)
		cmd.Env = append([]string{"PATH=" + filepath.Dir(py) + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir(), "PYENV_VERSION=" + os.Getenv("PYENV_VERSION")}, env...)
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("launcher: %v\n%s", err, got)
		}
		return strings.TrimSpace(string(got))
	}
	// Control: CPython reading that place runs the planted code.
	ctl := exec.Command(py, "-I", "-B", "-X", "pycache_prefix="+filepath.Join(xdg, "oprov-python", "pycache"), "-c", "import sys; sys.path.insert(0, sys.argv[1]); from x.main import main; main()", lib)
	if got, _ := ctl.CombinedOutput(); strings.TrimSpace(string(got)) != "planted" {
		t.Fatalf("control: CPython reading %s printed %q, want the planted code's \"planted\"", xdg, got)
	}
	for i := 0; i < 2; i++ {
		if got := run("XDG_CACHE_HOME=" + xdg); got != "packaged" {
			t.Errorf("launch %d with the shared cache: %q, want the packaged code's \"packaged\"", i+1, got)
		}
	}
}
