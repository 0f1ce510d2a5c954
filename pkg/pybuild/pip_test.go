package pybuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
)

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

// TestCheckPureWheel: a wheel built from an sdist passes only when pure Python; a compiled one
// is refused naming the package and its version.
func TestCheckPureWheel(t *testing.T) {
	if err := checkPureWheel("docopt-0.6.2-py2.py3-none-any.whl"); err != nil {
		t.Errorf("pure wheel refused: %v", err)
	}
	err := checkPureWheel("fastthing-1.4.0-cp311-cp311-linux_x86_64.whl")
	if err == nil || !strings.Contains(err.Error(), "fastthing 1.4.0 is published only as a source distribution") || !strings.Contains(err.Error(), "compiles") {
		t.Errorf("compiled wheel: %v", err)
	}
	if err := checkPureWheel("abi-2.0-cp311-abi3-any.whl"); err == nil {
		t.Error("an abi3 wheel passed as pure")
	}
}
