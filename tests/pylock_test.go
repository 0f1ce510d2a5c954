package tests

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestPythonPyLockMarkerLineBreak: a pylock.toml marker holding U+2028 (where pip starts a new
// line) and an --index-url naming a hostile index on 127.0.0.1 is refused by oprov package
// --python, naming the file and the package entry, and pip never asks that index for anything.
// (pip's own index is a server of ours answering 404, so the wheelhouse is used and nothing
// leaves the machine.)
func TestPythonPyLockMarkerLineBreak(t *testing.T) {
	env := pyEnv(t)
	var asked atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	defer evil.Close()
	none := httptest.NewServer(http.NotFoundHandler())
	defer none.Close()
	var kept []string
	for _, e := range env {
		if !strings.HasPrefix(e, "PIP_NO_INDEX=") {
			kept = append(kept, e)
		}
	}
	kept = append(kept, "PIP_INDEX_URL="+none.URL+"/simple")

	src := pyhelloWith(t)
	lock := filepath.Join(src, "pylock.toml")
	writeFile(t, lock, "lock-version = \"1.0\"\n\n[[packages]]\nname = \"grpcio\"\nversion = \"1.67.1\"\n"+
		"marker = \"python_version >= '3.11'\u2028--index-url "+evil.URL+"/simple\"\n")
	r := oprov(t, kept, "package", "--python", src, "--version", "1.0.0", "--platform", "linux_amd64",
		"--python-versions", "3.12", "--out-dir", t.TempDir(), "-o", "json")
	for _, want := range []string{lock + ": packages[0] (name \"grpcio\")", "not a PEP 508 environment marker", `\u2028`} {
		if r.Code == 0 || !strings.Contains(r.Stderr, want) {
			t.Errorf("exit %d, stderr:\n%s\nwant a refusal saying %q", r.Code, r.Stderr, want)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("pip asked the index smuggled in the marker %d times", n)
	}
}
