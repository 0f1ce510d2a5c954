package pybuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakePython writes an interpreter named name into dir. Probed in isolated mode without site (python
// -I -S -c CODE), it reports version v of implementation impl, free-threaded when ft; probed any other way
// it fails, as does any interpreter that reports nothing. Run for real (python -I -u -B -c CODE
// CACHE ...), it prints its name and the arguments after the cache directory, then
// "cache=CACHE" and HOME.
func fakePython(t *testing.T, dir, name, v, impl string, ft bool) {
	t.Helper()
	tag := "cp" + strings.ReplaceAll(v, ".", "")
	gil := "-"
	if ft {
		gil = "t"
	}
	script := "#!/bin/sh\n" +
		"case \"$1 $2 $3 $4\" in \"-I -S -c \"*version_info*) echo '" + v + " " + tag + " " + impl + " " + gil + "'; exit 0;; *version_info*) exit 1;; esac\n" +
		"[ \"$1 $2 $3 $4\" = '-I -u -B -c' ] || { echo \"bad flags $*\"; exit 2; }\n" +
		"cache=$6; shift 6\necho \"ran " + name + " with $*\"\necho \"cache=$cache\"\necho \"HOME=$HOME\"\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

type fakePy struct {
	v, impl string
	ft      bool
}

func cp(v string) fakePy { return fakePy{v, "cpython", false} }

// writeLauncher writes the launcher of a package claiming launcherVersions into a new directory.
func writeLauncher(t *testing.T) (pkg, exe string) {
	pkg = t.TempDir()
	exe = filepath.Join(pkg, "terraform-provider-x_v1.0.0")
	if err := os.WriteFile(exe, []byte(Launcher("terraform-provider-x", "x.main:main", launcherVersions)), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range launcherVersions {
		os.MkdirAll(filepath.Join(pkg, "lib", cpTag(v)), 0o755)
	}
	return pkg, exe
}

// TestPythonLauncherPicksVersion runs the launcher with fake interpreters on PATH and checks which
// one it runs, with which dependency set, or the one line it fails with.
func TestPythonLauncherPicksVersion(t *testing.T) {
	pkg, exe := writeLauncher(t)
	link := filepath.Join(t.TempDir(), "provider")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	link2 := filepath.Join(t.TempDir(), "again")
	if err := os.Symlink("../"+filepath.Base(filepath.Dir(link))+"/provider", link2); err != nil {
		t.Fatal(err)
	}
	const none = "terraform-provider-x: no compatible Python: it needs CPython 3.11, 3.12, 3.13 as python3 on PATH"
	const needs = "terraform-provider-x: no compatible Python: it needs CPython 3.11, 3.12, 3.13 (OPROV_PROVIDER_PYTHON="
	for _, tc := range []struct {
		name  string
		pys   map[string]fakePy // interpreter name -> what it reports
		exe   string            // how the launcher is run; exe when empty
		env   string            // OPROV_PROVIDER_PYTHON, a name in the fake bin directory
		want  string            // first line of stdout
		fails bool
	}{
		{"python3 in range", map[string]fakePy{"python3": cp("3.12"), "python3.11": cp("3.11")}, "", "", "ran python3 with " + pkg + "/lib/cp312 --dev", false},
		{"oldest claimed", map[string]fakePy{"python3": cp("3.11")}, "", "", "ran python3 with " + pkg + "/lib/cp311 --dev", false},
		{"python3 too old, python3.13 beside it", map[string]fakePy{"python3": cp("3.10"), "python3.13": cp("3.13")}, "", "", "ran python3.13 with " + pkg + "/lib/cp313 --dev", false},
		{"python3 too new", map[string]fakePy{"python3": cp("3.14")}, "", "", none + " (python3 is 3.14)", true},
		{"every one out of range", map[string]fakePy{"python3": cp("3.10"), "python3.12": cp("3.9")}, "", "", none + " (python3 is 3.10, python3.12 is 3.9)", true},
		{"no python at all", nil, "", "", none + " (no python3 on PATH)", true},
		{"PyPy is not CPython", map[string]fakePy{"python3": {"3.11", "pypy", false}}, "", "", none + " (python3 is pypy 3.11, not CPython)", true},
		{"PyPy first, CPython after", map[string]fakePy{"python3": {"3.11", "pypy", false}, "python3.12": cp("3.12")}, "", "", "ran python3.12 with " + pkg + "/lib/cp312 --dev", false},
		{"free-threaded 3.13t", map[string]fakePy{"python3": {"3.13", "cpython", true}}, "", "", none + " (python3 is free-threaded CPython 3.13 (the packaged wheels need the GIL build))", true},
		{"through a symlink elsewhere", map[string]fakePy{"python3": cp("3.12")}, link, "", "ran python3 with " + pkg + "/lib/cp312 --dev", false},
		{"through a relative symlink to a symlink", map[string]fakePy{"python3": cp("3.12")}, link2, "", "ran python3 with " + pkg + "/lib/cp312 --dev", false},
		{"OPROV_PROVIDER_PYTHON used", map[string]fakePy{"python3": cp("3.12"), "mypy": cp("3.13")}, "", "mypy", "ran mypy with " + pkg + "/lib/cp313 --dev", false},
		{"OPROV_PROVIDER_PYTHON missing", map[string]fakePy{"python3": cp("3.12")}, "", "nope", "terraform-provider-x: no compatible Python: OPROV_PROVIDER_PYTHON=BIN/nope is not an executable it can find", true},
		{"OPROV_PROVIDER_PYTHON too old", map[string]fakePy{"python3": cp("3.12"), "old": cp("3.10")}, "", "old", needs + "BIN/old is 3.10)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := toolsBin(t)
			for name, p := range tc.pys {
				fakePython(t, bin, name, p.v, p.impl, p.ft)
			}
			run := exe
			if tc.exe != "" {
				run = tc.exe
			}
			cmd := exec.Command(run, "--dev")
			cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir()}
			if tc.env != "" {
				cmd.Env = append(cmd.Env, "OPROV_PROVIDER_PYTHON="+filepath.Join(bin, tc.env))
			}
			want := strings.ReplaceAll(tc.want, "BIN", bin)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if got, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n"); got != want {
				t.Errorf("stdout %q, want %q", out, want)
			}
			if tc.fails && (err == nil || strings.TrimSpace(stderr.String()) != want) {
				t.Errorf("err %v, stderr %q: want exit 1 and the one line on stderr too", err, stderr.String())
			}
			if !tc.fails && err != nil {
				t.Errorf("launcher failed: %v (stderr %q)", err, stderr.String())
			}
		})
	}
}

// toolsBin is a new directory holding the few commands the launcher uses besides python, so that
// a PATH of it alone finds no real interpreter.
func toolsBin(t *testing.T) string {
	bin := t.TempDir()
	for _, tool := range []string{"mkdir", "id", "mktemp", "readlink"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestPythonLauncherCacheAndHome: bytecode goes to the user's cache, never beside the packaged
// sources; a HOME where the tf SDK cannot keep its certificate is replaced by a private writable
// one, said on stderr, and a writable HOME is left alone.
func TestPythonLauncherCacheAndHome(t *testing.T) {
	_, exe := writeLauncher(t)
	bin := toolsBin(t)
	fakePython(t, bin, "python3", "3.12", "cpython", false)
	run := func(env ...string) (string, string) {
		cmd := exec.Command(exe)
		cmd.Env = append([]string{"PATH=" + bin, "TMPDIR=" + t.TempDir()}, env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("launcher failed: %v (stderr %q)", err, stderr.String())
		}
		return string(out), stderr.String()
	}

	home := t.TempDir()
	out, stderr := run("HOME=" + home)
	if want := "cache=" + home + "/.cache\nHOME=" + home + "\n"; !strings.HasSuffix(out, want) || stderr != "" {
		t.Errorf("writable HOME: stdout %q stderr %q, want the prefix in its .cache and HOME kept", out, stderr)
	}
	xdg := t.TempDir()
	if out, _ = run("HOME="+home, "XDG_CACHE_HOME="+xdg); !strings.Contains(out, "cache="+xdg+"\n") {
		t.Errorf("XDG_CACHE_HOME set: stdout %q, want the prefix in it", out)
	}

	// A HOME that cannot hold .cache: a read-only directory, or (as root, who writes anyway) a file.
	ro := filepath.Join(t.TempDir(), "home")
	if os.Getuid() == 0 {
		os.WriteFile(ro, nil, 0o444)
	} else {
		os.Mkdir(ro, 0o555)
	}
	out, stderr = run("HOME=" + ro)
	var got string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "HOME="); ok {
			got = v
		}
	}
	if got == "" || got == ro || !strings.Contains(stderr, "HOME ("+ro+") has no writable .cache: running with HOME="+got) {
		t.Fatalf("read-only HOME: stdout %q stderr %q, want another HOME, said on stderr", out, stderr)
	}
	if st, err := os.Stat(got); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("replacement HOME %s: %v %v, want a 0700 directory", got, st, err)
	}
	if !strings.Contains(out, "cache="+got+"/.cache\n") {
		t.Errorf("read-only HOME: stdout %q, want the bytecode in the replacement HOME's cache", out)
	}
}

// launcherVersions are the CPython versions the test launchers claim.
var launcherVersions = []string{"3.11", "3.12", "3.13"}

// TestPythonLauncherBytecodePlace runs a launcher with this machine's python3 on a one-module
// package: the module's bytecode goes to XDG_CACHE_HOME/oprov-python/pycache when that is a
// directory of this user alone, to $TMPDIR/oprov-python-UID/pycache when XDG_CACHE_HOME is
// writable by others, and never beside the packaged sources.
func TestPythonLauncherBytecodePlace(t *testing.T) {
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
	os.WriteFile(filepath.Join(lib, "x", "main.py"), []byte("import sys\ndef main():\n    print(sys.pycache_prefix)\n"), 0o644)
	pyc := func(prefix string) string { return filepath.Join(prefix, lib, "x", "main."+tag+".pyc") }

	for _, tc := range []struct {
		name string
		mode os.FileMode
		tmp  bool
	}{{"private cache", 0o700, false}, {"cache writable by others", 0o777, true}} {
		t.Run(tc.name, func(t *testing.T) {
			xdg, tmp := t.TempDir(), t.TempDir()
			os.Chmod(xdg, tc.mode)
			cmd := exec.Command(exe)
			cmd.Env = []string{"PATH=" + filepath.Dir(py) + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "XDG_CACHE_HOME=" + xdg, "TMPDIR=" + tmp, "PYENV_VERSION=" + os.Getenv("PYENV_VERSION")}
			got, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("launcher: %v\n%s", err, got)
			}
			want := filepath.Join(xdg, "oprov-python", "pycache")
			if tc.tmp {
				want = filepath.Join(tmp, "oprov-python-"+strconv.Itoa(os.Geteuid()), "pycache")
			}
			if strings.TrimSpace(string(got)) != want {
				t.Errorf("prefix %q, want %s", got, want)
			}
			if _, err := os.Stat(pyc(want)); err != nil {
				t.Errorf("no bytecode of x.main in %s: %v", want, err)
			}
			if tc.tmp {
				if _, err := os.Stat(filepath.Join(xdg, "oprov-python")); err == nil {
					t.Errorf("something was made in the refused %s", xdg)
				}
			}
		})
	}
	filepath.WalkDir(pkg, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "__pycache__" {
			t.Errorf("bytecode beside the packaged sources: %s", p)
		}
		return nil
	})
}

// IsLauncher knows Launcher's own bytes, whatever the entry point and versions, and nothing else.
func TestIsLauncher(t *testing.T) {
	for _, entry := range []string{"x.main:main", "a.b:c.d"} {
		text := Launcher("terraform-provider-x", entry, []string{"3.11", "3.13"})
		if !IsLauncher([]byte(text), "terraform-provider-x") {
			t.Errorf("%s: its own launcher is not recognised", entry)
		}
		for _, bad := range []string{text + ": '/'\n", strings.Replace(text, "exec ", "exec /tmp/x ", 1), text[:len(text)-1]} {
			if IsLauncher([]byte(bad), "terraform-provider-x") {
				t.Errorf("%s: a changed launcher is recognised", entry)
			}
		}
		if IsLauncher([]byte(text), "terraform-provider-y") {
			t.Errorf("%s: another provider's launcher is recognised", entry)
		}
	}
}
