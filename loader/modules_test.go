package loader_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

// archiveServer serves module archives (zip) by path on 127.0.0.1.
type archiveServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

func newArchiveServer(t *testing.T) *archiveServer {
	a := &archiveServer{files: map[string][]byte{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if b, ok := a.files[r.URL.Path]; ok {
			w.Write(b)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *archiveServer) put(t *testing.T, path string, files map[string]string) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(content))
	}
	zw.Close()
	a.mu.Lock()
	a.files[path] = buf.Bytes()
	a.mu.Unlock()
}

// moduleProject is a project whose root requires no managed provider: its remote module (an
// HTTP archive) requires example.com/acme/hello, which the oci_mirror block manages.
func moduleProject(t *testing.T, w *world) (string, *archiveServer) {
	a := newArchiveServer(t)
	a.put(t, "/net.zip", map[string]string{"main.tf": `terraform {
  required_providers {
    hello = { source = "example.com/acme/hello", version = "~> 1.0" }
  }
}
`})
	dir := w.project(t, nil, "")
	testfix.WriteFiles(t, dir, map[string]string{"modules.tf": "module \"net\" {\n  source = \"" + a.srv.URL + "/net.zip\"\n}\n"})
	return dir, a
}

func TestLockAllLocksModulesAndTheirProviders(t *testing.T) {
	w := newWorld(t)
	dir, a := moduleProject(t, w)
	p := open(t, dir)
	if len(p.Managed) != 0 {
		t.Fatalf("before the modules are resolved, managed: %d", len(p.Managed))
	}
	changes, err := p.LockAll(context.Background(), w.opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Addr != "example.com/acme/hello" || changes[0].Version != "1.1.0" {
		t.Fatalf("locked %+v, want example.com/acme/hello 1.1.0 (required by the remote module only)", changes)
	}
	if len(p.LockedModules) != 1 || p.LockedModules[0].Call != "module.net" {
		t.Fatalf("modules %+v", p.LockedModules)
	}
	ml, err := module.ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := ml.Entries["net"]
	if e == nil || e.Source != a.srv.URL+"/net.zip" || len(e.Hashes) != 2 {
		t.Fatalf("module lock entry %+v", e)
	}

	// init: the module is installed with modules.json; then the archive changes: refused, nothing
	// installed anew.
	res, err := open(t, dir).Install(context.Background(), w.opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modules) != 1 || len(res.Installed) != 1 {
		t.Fatalf("installed %d modules, %d providers", len(res.Modules), len(res.Installed))
	}
	data, err := os.ReadFile(filepath.Join(dir, ".terraform/modules/modules.json"))
	if err != nil || !strings.Contains(string(data), `"Key":"net"`) {
		t.Fatalf("modules.json %s %v", data, err)
	}
	var mj struct {
		Modules []struct{ Key, Source, Dir string }
	}
	if err := json.Unmarshal(data, &mj); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, ".terraform"))
	a.put(t, "/net.zip", map[string]string{"main.tf": "# other bytes\n"})
	_, err = open(t, dir).Install(context.Background(), w.opts())
	if !errors.Is(err, module.ErrLockMismatch) || !strings.Contains(err.Error(), "module.net") || !strings.Contains(err.Error(), e.Hashes[0]) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".terraform/modules")); err == nil {
		t.Error("a refused module left .terraform/modules behind")
	}
}

func TestBundleWantsModules(t *testing.T) {
	w := newWorld(t)
	dir, _ := moduleProject(t, w)
	local, _, err := module.Local(dir) // what the configuration declares without its remote modules
	if err != nil {
		t.Fatal(err)
	}
	wants, tree, err := loader.BundleWantsModules(context.Background(), dir, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, w := range wants {
		addrs = append(addrs, w.Addr.String())
	}
	if got := strings.Join(addrs, " "); got != "example.com/acme/hello registry.opentofu.org/hashicorp/random" || len(local) != 1 {
		t.Fatalf("wants %q (local only: %d), want the remote module's provider too", got, len(local))
	}
	if len(tree.Modules) != 1 || tree.Modules[0].Key != "net" || len(tree.Modules[0].Zip) == 0 {
		t.Fatalf("modules %+v", tree.Modules)
	}
	if wants[0].OCI == nil {
		t.Error("hello is not mapped to the oci_mirror block")
	}
}

// TestModuleHostBlock: a host block of the user's CLI configuration points modules.v1 of a
// hostname that does not resolve at a registry of ours, as it does for tofu.
func TestModuleHostBlock(t *testing.T) {
	w := newWorld(t)
	a := newArchiveServer(t)
	a.put(t, "/net.zip", map[string]string{"main.tf": "output \"x\" {\n  value = 1\n}\n"})
	reg := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/modules/acme/net/aws/versions":
			rw.Write([]byte(`{"modules":[{"versions":[{"version":"0.3.0"}]}]}`))
		case "/v1/modules/acme/net/aws/0.3.0/download":
			rw.Header().Set("X-Terraform-Get", a.srv.URL+"/net.zip")
			rw.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(reg.Close)
	rc := filepath.Join(t.TempDir(), "tofurc")
	testfix.WriteFiles(t, filepath.Dir(rc), map[string]string{"tofurc": "host \"modules.example.test\" {\n  services = {\n    \"modules.v1\" = \"" + reg.URL + "/v1/modules/\"\n  }\n}\n"})
	t.Setenv("TF_CLI_CONFIG_FILE", rc)
	dir := w.project(t, map[string]string{"hello": "~> 1.0"}, "")
	testfix.WriteFiles(t, dir, map[string]string{"modules.tf": "module \"net\" {\n  source  = \"modules.example.test/acme/net/aws\"\n  version = \"~> 0.3\"\n}\n"})
	p := open(t, dir)
	if _, err := p.LockAll(context.Background(), w.opts()); err != nil {
		t.Fatal(err)
	}
	if len(p.LockedModules) != 1 || p.LockedModules[0].Version != "0.3.0" {
		t.Fatalf("modules %+v", p.LockedModules)
	}
}
