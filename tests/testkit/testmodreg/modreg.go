// Package testmodreg serves a module registry (the Module Registry Protocol, modules.v1) over TLS
// on 127.0.0.1 for tests and benchmarks: service discovery, each module's versions, and a 204
// with X-Terraform-Get naming the version's zip, which it serves too. It is what `tofu init` and
// oprov's module walk both read, so the two can be compared on the same registry.
package testmodreg

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testca"
)

// Registry is a running module registry.
type Registry struct {
	Host string // 127.0.0.1:PORT, the hostname module source addresses name
	srv  *httptest.Server

	mu       sync.Mutex
	versions map[string][]string // ns/name/system -> versions
	zips     map[string][]byte   // ns/name/system/version -> the package's zip
}

// Start serves an empty registry with a certificate from ca (for localhost and 127.0.0.1).
func Start(t testing.TB, ca *testca.CA) *Registry {
	t.Helper()
	r := &Registry{versions: map[string][]string{}, zips: map[string][]byte{}}
	certFile, keyFile := ca.Issue(t, t.TempDir(), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	// A module registry's hostname must hold a dot, which localhost does not.
	r.Host = strings.TrimPrefix(r.srv.URL, "https://")
	return r
}

// Add serves one version of NAMESPACE/NAME/SYSTEM, its package the zip given (the module at its
// root). It gives the module's source address.
func (r *Registry) Add(module, version string, zip []byte) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions[module] = append(r.versions[module], version)
	r.zips[module+"/"+version] = zip
	return r.Host + "/" + module
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := req.URL.Path
	switch {
	case p == "/.well-known/terraform.json":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"modules.v1":"/v1/modules/"}`)
	case strings.HasPrefix(p, "/v1/modules/") && strings.HasSuffix(p, "/versions"):
		key := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/modules/"), "/versions")
		if r.versions[key] == nil {
			http.NotFound(w, req)
			return
		}
		var vs []map[string]string
		for _, v := range r.versions[key] {
			vs = append(vs, map[string]string{"version": v})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"modules": []any{map[string]any{"versions": vs}}})
	case strings.HasPrefix(p, "/v1/modules/") && strings.HasSuffix(p, "/download"):
		key := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/modules/"), "/download")
		if r.zips[key] == nil {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("X-Terraform-Get", "/files/"+key+".zip")
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(p, "/files/") && strings.HasSuffix(p, ".zip"):
		z := r.zips[strings.TrimSuffix(strings.TrimPrefix(p, "/files/"), ".zip")]
		if z == nil {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/zip")
		w.Header().Set("Content-Length", fmt.Sprint(len(z)))
		w.Write(z)
	default:
		http.NotFound(w, req)
	}
}

// Stop stops the registry (its clients then find nothing there).
func (r *Registry) Stop() { r.srv.Close() }
