package pybuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
)

// fakePython writes an interpreter named name into dir that reports version v to the launcher's
// probe and, when run for real (python -I -B -c CODE ...), prints the arguments after the code.
func fakePython(t *testing.T, dir, name, v string) {
	t.Helper()
	tag := "cp" + strings.ReplaceAll(v, ".", "")
	script := "#!/bin/sh\ncase \"$2\" in *version_info*) echo '" + v + " " + tag + "'; exit 0;; esac\n" +
		"shift 4\necho \"ran " + name + " with $*\"\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestPythonLauncherPicksVersion runs the launcher with fake interpreters on PATH and checks which
// one it runs, with which dependency set, or the one line it fails with.
func TestPythonLauncherPicksVersion(t *testing.T) {
	pkg := t.TempDir()
	exe := filepath.Join(pkg, "terraform-provider-x_v1.0.0")
	if err := os.WriteFile(exe, []byte(PythonLauncher("terraform-provider-x", "x.main:main", PythonVersions)), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range PythonVersions {
		os.MkdirAll(filepath.Join(pkg, "lib", cpTag(v)), 0o755)
	}
	const none = "terraform-provider-x: no compatible Python: it needs CPython 3.11, 3.12, 3.13 as python3 on PATH"
	for _, tc := range []struct {
		name  string
		pys   map[string]string // interpreter name -> version it reports
		want  string            // stdout
		fails bool
	}{
		{"python3 in range", map[string]string{"python3": "3.12", "python3.11": "3.11"}, "ran python3 with " + pkg + "/lib/cp312 --dev", false},
		{"oldest claimed", map[string]string{"python3": "3.11"}, "ran python3 with " + pkg + "/lib/cp311 --dev", false},
		{"python3 too old, python3.13 beside it", map[string]string{"python3": "3.10", "python3.13": "3.13"}, "ran python3.13 with " + pkg + "/lib/cp313 --dev", false},
		{"python3 too new", map[string]string{"python3": "3.14"}, none + " (python3 is 3.14)", true},
		{"every one out of range", map[string]string{"python3": "3.10", "python3.12": "3.9"}, none + " (python3 is 3.10, python3.12 is 3.9)", true},
		{"no python at all", nil, none + " (no python3 on PATH)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			for name, v := range tc.pys {
				fakePython(t, bin, name, v)
			}
			cmd := exec.Command(exe, "--dev")
			cmd.Env = []string{"PATH=" + bin}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("stdout %q, want %q", got, tc.want)
			}
			if tc.fails && (err == nil || strings.TrimSpace(stderr.String()) != tc.want) {
				t.Errorf("err %v, stderr %q: want exit 1 and the one line on stderr too", err, stderr.String())
			}
			if !tc.fails && err != nil {
				t.Errorf("launcher failed: %v (stderr %q)", err, stderr.String())
			}
		})
	}
}

func TestPyProjectEntry(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "pyproject.toml"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("[project]\nname = \"p\"\n[project.scripts]\nterraform-provider-foo = \"foo.cli:app.run\"\nother = \"x:y\"\n")
	p, err := ReadPyProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ProviderTypes(); len(got) != 1 || got[0] != "foo" {
		t.Errorf("types %v", got)
	}
	if e, err := p.ProviderEntry("foo"); err != nil || e != "foo.cli:app.run" {
		t.Errorf("entry %q, %v", e, err)
	}
	if _, err := p.ProviderEntry("bar"); err == nil || !strings.Contains(err.Error(), "no console script terraform-provider-bar (it declares other, terraform-provider-foo)") {
		t.Errorf("missing script: %v", err)
	}
	if code := PythonEntryCode("terraform-provider-foo", "foo.cli:app.run", false); !strings.Contains(code, "from foo.cli import app\nsys.exit(app.run())") {
		t.Errorf("entry code:\n%s", code)
	}
	write("[tool.poetry]\nname = \"p\"\n[tool.poetry.scripts]\nterraform-provider-foo = \"foo'; rm -rf /:x\"\n")
	if p, err = ReadPyProject(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ProviderEntry("foo"); err == nil || !strings.Contains(err.Error(), "not of the form module:function") {
		t.Errorf("a hostile entry point was accepted: %v", err)
	}
	write("[project\n")
	if _, err := ReadPyProject(dir); err == nil {
		t.Error("a broken pyproject.toml was accepted")
	}
}

func TestPythonPlatforms(t *testing.T) {
	if _, err := pipPlatforms(manifest.Platform{OS: "windows", Arch: "amd64"}); err == nil || !strings.Contains(err.Error(), ".exe") {
		t.Errorf("windows: %v", err)
	}
	tags, err := pipPlatforms(manifest.Platform{OS: "linux", Arch: "arm64"})
	if err != nil || tags[0] != "manylinux_2_28_aarch64" || tags[len(tags)-1] != "manylinux2014_aarch64" {
		t.Errorf("linux_arm64: %v %v", tags, err)
	}
}

// TestCleanSite: what pip leaves that varies between runs or machines goes; RECORD keeps the
// lines of the files that stay.
func TestCleanSite(t *testing.T) {
	site := t.TempDir()
	files := map[string]string{
		"pkg/__init__.py":                   "",
		"pkg/__pycache__/x.cpython-311.pyc": "x",
		"bin/terraform-provider-x":          "#!/tmp/venv/bin/python",
		"pkg-1.0.dist-info/direct_url.json": "{\"url\": \"file:///tmp/123\"}",
		"pkg-1.0.dist-info/RECORD":          "pkg/__init__.py,sha256=a,0\n../../bin/terraform-provider-x,,\npkg-1.0.dist-info/direct_url.json,,\npkg-1.0.dist-info/RECORD,,\n",
	}
	for name, content := range files {
		p := filepath.Join(site, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o644)
	}
	if err := cleanSite(site); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"bin", "pkg/__pycache__", "pkg-1.0.dist-info/direct_url.json"} {
		if _, err := os.Stat(filepath.Join(site, gone)); err == nil {
			t.Errorf("%s is still there", gone)
		}
	}
	record, _ := os.ReadFile(filepath.Join(site, "pkg-1.0.dist-info", "RECORD"))
	if want := "pkg-1.0.dist-info/RECORD,,\npkg/__init__.py,sha256=a,0\n"; string(record) != want {
		t.Errorf("RECORD is\n%s\nwant\n%s", record, want)
	}
}
