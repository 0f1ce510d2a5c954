package module

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// writeTree writes files (name -> content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// gitRepos is a directory of git repositories served by git http-backend (net/http/cgi) on
// 127.0.0.1.
type gitRepos struct {
	root    string
	srv     *httptest.Server
	fetches atomic.Int64 // ref advertisements: one a clone
}

func newGitRepos(t *testing.T) *gitRepos {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	g := &gitRepos{root: t.TempDir()}
	h := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1"}}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			g.fetches.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gitRepos) git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files into repository name (made on first use), commits them and tags the
// commit (moving the tag if it exists). It gives the commit.
func (g *gitRepos) commit(t *testing.T, name, tag string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(g.root, name)
	if _, err := os.Stat(dir); err != nil {
		g.git(t, g.root, "init", "--quiet", "-b", "main", name)
	}
	writeTree(t, dir, files)
	g.git(t, dir, "add", "-A")
	g.git(t, dir, "commit", "--quiet", "--allow-empty", "-m", "c")
	if tag != "" {
		g.git(t, dir, "tag", "-f", tag)
	}
	g.git(t, dir, "update-server-info")
	return g.git(t, dir, "rev-parse", "HEAD")
}

func (g *gitRepos) url(name string) string { return g.srv.URL + "/" + name }

// registry is a module registry (Module Registry Protocol) and archive server of ours on
// 127.0.0.1, over TLS: modules by "ns/name/system" with their versions and where each version's
// package is (X-Terraform-Get); archives by path.
type registry struct {
	srv      *httptest.Server
	mu       sync.Mutex
	versions map[string][]string                           // ns/name/system -> versions listed
	location map[string]string                             // ns/name/system/version -> X-Terraform-Get
	files    map[string][]byte                             // /path -> archive bytes
	hits     map[string]int                                // path -> requests
	override func(http.ResponseWriter, *http.Request) bool // a hostile answer, when it answers
}

func newRegistry(t *testing.T) *registry {
	r := &registry{versions: map[string][]string{}, location: map[string]string{}, files: map[string][]byte{}, hits: map[string]int{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *registry) host() string { return strings.TrimPrefix(r.srv.URL, "https://") }

func (r *registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits[req.URL.Path]++
	if r.override != nil && r.override(w, req) {
		return
	}
	p := req.URL.Path
	switch {
	case p == "/.well-known/terraform.json":
		fmt.Fprint(w, `{"modules.v1":"/api/modules/"}`)
	case strings.HasPrefix(p, "/api/modules/") && strings.HasSuffix(p, "/versions"):
		key := strings.TrimSuffix(strings.TrimPrefix(p, "/api/modules/"), "/versions")
		var vs []map[string]string
		for _, v := range r.versions[key] {
			vs = append(vs, map[string]string{"version": v})
		}
		if vs == nil {
			http.NotFound(w, req)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"modules": []any{map[string]any{"versions": vs}}})
	case strings.HasPrefix(p, "/api/modules/") && strings.HasSuffix(p, "/download"):
		key := strings.TrimSuffix(strings.TrimPrefix(p, "/api/modules/"), "/download")
		loc, ok := r.location[key]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("X-Terraform-Get", loc)
		w.WriteHeader(http.StatusNoContent)
	default:
		b, ok := r.files[p]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(b)
	}
}

func (r *registry) set(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// tarGz makes a .tar.gz of files; a name may hold "../".
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range sortedKeys(files) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[name]))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range sortedKeys(files) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[name]))
	}
	zw.Close()
	return buf.Bytes()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// zipWithSymlink is a zip whose one entry is a symbolic link to /etc/passwd.
func zipWithSymlink(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "main.tf"}
	h.SetMode(os.ModeSymlink | 0o777)
	w, err := zw.CreateHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("/etc/passwd"))
	zw.Close()
	return buf.Bytes()
}
