package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// TestGoInstallReportsTheModuleVersion does what a user does, 'go install
// github.com/oprov/oprov/cmd/oprov@vX', from a module proxy (a file:// one holding this work tree
// as vX), and checks that the installed oprov reports vX in --version and version -o json.
//
// vX differs on every run: the go command takes a module version's content as immutable (it keeps
// an index of it), so a work tree served again under the same version would build stale.
func TestGoInstallReportsTheModuleVersion(t *testing.T) {
	v := fmt.Sprintf("v1.9.9-test.%d", time.Now().UnixNano())
	proxy := t.TempDir()
	moduleProxy(t, proxy, v)
	forgetModuleVersion(t, v)
	bin := t.TempDir()
	install := exec.Command("go", "install", "github.com/oprov/oprov/cmd/oprov@"+v)
	install.Dir = t.TempDir() // outside the work tree: no main module but the one installed
	install.Env = append(os.Environ(), "GOBIN="+bin, "GOPROXY=file://"+filepath.ToSlash(proxy)+",https://proxy.golang.org",
		"GONOSUMDB=github.com/oprov/oprov", "GOFLAGS=-modcacherw", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install ...@%s: %v\n%s", v, err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "oprov"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "oprov "+v+" (") {
		t.Errorf("oprov --version printed %q (%v), want it to start %q", out, err, "oprov "+v)
	}
	out, err = exec.Command(filepath.Join(bin, "oprov"), "version", "-o", "json").Output()
	var got struct{ Version, Go string }
	if err != nil || json.Unmarshal(out, &got) != nil || got.Version != v || !strings.HasPrefix(got.Go, "go1.") {
		t.Errorf("oprov version -o json printed %q (%v), want version %s", out, err, v)
	}
}

// forgetModuleVersion removes github.com/oprov/oprov@v from the module cache now and when the test
// ends, so that each run installs this work tree and leaves nothing of it behind.
func forgetModuleVersion(t *testing.T, v string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := strings.TrimSpace(string(out))
	forget := func() {
		downloaded, _ := filepath.Glob(filepath.Join(cache, "cache", "download", "github.com", "oprov", "oprov", "@v", v+".*"))
		for _, p := range append(downloaded, filepath.Join(cache, "github.com", "oprov", "oprov@"+v)) {
			if err := os.RemoveAll(p); err != nil {
				t.Errorf("cleaning the module cache: %v", err)
			}
		}
	}
	forget()
	t.Cleanup(forget)
}

// moduleProxy lays out a file:// module proxy serving this work tree (its tracked and untracked,
// not ignored, files; not the nested example modules) as github.com/oprov/oprov at version v.
func moduleProxy(t *testing.T, proxy, v string) {
	t.Helper()
	list, err := exec.Command("git", "-C", repoRoot, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	paths := strings.Fields(string(list))
	nested := map[string]bool{}
	for _, p := range paths {
		if path.Base(p) == "go.mod" && path.Dir(p) != "." {
			nested[path.Dir(p)+"/"] = true
		}
	}
	var files []modzip.File
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(repoRoot, p)); err != nil || inNested(p, nested) {
			continue // deleted in the work tree, or another module's
		}
		files = append(files, workFile(p))
	}
	dir := filepath.Join(proxy, "github.com", "oprov", "oprov", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, v+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	if err := modzip.Create(zf, module.Version{Path: "github.com/oprov/oprov", Version: v}, files); err != nil {
		t.Fatalf("module zip: %v", err)
	}
	gomod, _ := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	writeFile(t, filepath.Join(dir, v+".mod"), string(gomod))
	writeFile(t, filepath.Join(dir, v+".info"), `{"Version":"`+v+`","Time":"2026-01-01T00:00:00Z"}`)
	writeFile(t, filepath.Join(dir, "list"), v+"\n")
}

func inNested(p string, nested map[string]bool) bool {
	for dir := range nested {
		if strings.HasPrefix(p, dir) {
			return true
		}
	}
	return false
}

// workFile is a file of the work tree, as a module zip takes it.
type workFile string

func (f workFile) Path() string                 { return string(f) }
func (f workFile) Lstat() (os.FileInfo, error)  { return os.Lstat(filepath.Join(repoRoot, string(f))) }
func (f workFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(repoRoot, string(f))) }
