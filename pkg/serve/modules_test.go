package serve

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// moduleZip is a one-file module whose output says which version it is.
func moduleZip(t *testing.T, version string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("main.tf")
	w.Write([]byte(`output "v" { value = "` + version + `" }`))
	zw.Close()
	return buf.Bytes()
}

// moduleServer serves modules from a layout per module (acme/net/aws holds 1.0.0 and 1.2.0,
// signed, and 1.1.0, unsigned) under the key's policy, or none.
func moduleServer(t *testing.T, withPolicy bool) (*testServer, string) {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	prefix := filepath.Join(t.TempDir(), "k")
	pass := func(bool) ([]byte, error) { return []byte("pw"), nil }
	keyPath, pubPath, err := sign.GenerateKeyPair(prefix, pass)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadSigner(keyPath, pass)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := oci.ParseRef(oci.LayoutScheme + filepath.Join(root, "acme/net/aws"))
	target, err := oci.NewClient(oci.Options{}).Open(ctx, ref, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		desc, err := modulepkg.Push(ctx, target, moduleZip(t, v), v, map[string]string{"org.opencontainers.image.version": v})
		if err != nil {
			t.Fatal(err)
		}
		if v != "1.1.0" {
			if _, err := sign.Sign(ctx, target, ref.WithReference(v), desc, signer, sign.SignOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmpl, err := ParseModuleTemplate(oci.LayoutScheme + root + "/${namespace}/${name}/${system}")
	if err != nil {
		t.Fatal(err)
	}
	pats, err := CheckModuleInclude(tmpl, []string{"modules.example/*/*/*"})
	if err != nil {
		t.Fatal(err)
	}
	var policy *sign.Policy
	if withPolicy {
		pk, err := sign.LoadPublicKey(pubPath)
		if err != nil {
			t.Fatal(err)
		}
		rule := &sign.Rule{Name: "test", Mode: sign.ModeEnforce, Repositories: []string{"**"}, Keys: []sign.PublicKey{pk}}
		policy = &sign.Policy{Path: "test", Mode: sign.ModeEnforce, Rules: []*sign.Rule{rule}}
	}
	c, err := cache.Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	buf := &syncBuffer{}
	s, err := New(Config{Modules: &ModuleConfig{Template: tmpl, Include: pats, Hostname: "serve.example"}, Policy: policy, Cache: c,
		Refresh: time.Minute, RegistryConcurrency: 4, Log: slog.New(slog.NewJSONHandler(buf, nil)), CatalogRefresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: s, cache: c, log: buf, h: s.Handler()}, root
}

func moduleVersions(t *testing.T, s *testServer, addr string) []string {
	t.Helper()
	code, body := s.get(t, modulesPath+addr+"/versions")
	if code != http.StatusOK {
		t.Fatalf("versions of %s: %d %s", addr, code, body)
	}
	var out struct {
		Modules []struct {
			Versions []struct{ Version string } `json:"versions"`
		} `json:"modules"`
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Modules) != 1 {
		t.Fatalf("versions: %v %s", err, body)
	}
	var vs []string
	for _, v := range out.Modules[0].Versions {
		vs = append(vs, v.Version)
	}
	return vs
}

func TestModuleRegistryProtocol(t *testing.T) {
	s, _ := moduleServer(t, true)
	const addr = "modules.example/acme/net/aws"
	if got := strings.Join(moduleVersions(t, s, addr), " "); got != "1.2.0 1.0.0" {
		t.Fatalf("versions under the policy: %q, want the two signed ones", got)
	}
	rec := s.do(t, modulesPath+addr+"/1.2.0/download")
	loc := rec.Header().Get("X-Terraform-Get")
	if rec.Code != http.StatusNoContent || loc != modulesPath+addr+"/1.2.0/module.zip" {
		t.Fatalf("download: %d, X-Terraform-Get %q", rec.Code, loc)
	}
	code, body := s.get(t, loc)
	if code != http.StatusOK || !bytes.Equal(body, moduleZip(t, "1.2.0")) {
		t.Fatalf("module zip: %d, %d bytes", code, len(body))
	}
	for _, path := range []string{
		modulesPath + addr + "/1.1.0/download",              // unsigned
		modulesPath + addr + "/1.1.0/module.zip",            // unsigned
		modulesPath + addr + "/9.9.9/download",              // no such version
		modulesPath + "other.example/acme/net/aws/versions", // not included
		modulesPath + "modules.example/acme/nope/aws/versions",
		modulesPath + addr + "/1.0/download", // not a version
	} {
		if code, body := s.get(t, path); code != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", path, code, body)
		}
	}
	if lines := s.log.logLines("not signed"); len(lines) == 0 {
		t.Error("the unsigned version's refusal is not in the log")
	}
	code, body = s.get(t, "/.well-known/terraform.json")
	if code != http.StatusOK || !strings.Contains(string(body), `"modules.v1":"/modules/v1/serve.example/"`) {
		t.Fatalf("discovery: %d %s", code, body)
	}
	cat := s.refreshCatalog(context.Background())
	if len(cat.Modules) != 1 || len(cat.Modules[0].Versions) != 2 || len(cat.Modules[0].Refused) != 1 || cat.Modules[0].Refused[0].Reason != "policy" {
		t.Fatalf("catalog modules: %+v", cat.Modules)
	}
	code, page := s.get(t, "/")
	if code != http.StatusOK || !strings.Contains(string(page), `<a href="modules/modules.example/acme/net/aws">Module modules.example/acme/net/aws</a>`) {
		t.Fatalf("catalog page: %d, no module section linking to the module's page", code)
	}
	manifest := cat.Modules[0].Versions[0].Manifest
	code, page = s.get(t, "/modules/modules.example/acme/net/aws")
	if code != http.StatusOK || !strings.Contains(string(page), "manifest "+manifest) || !strings.Contains(string(page), "not signed") {
		t.Fatalf("the module's page: %d\n%s", code, page)
	}
	var one CatalogModule
	if code, body := s.get(t, "/modules/modules.example/acme/net/aws?format=json"); code != http.StatusOK || json.Unmarshal(body, &one) != nil || one.Versions[0].Manifest != manifest {
		t.Fatalf("the module's page as JSON: %d %s", code, body)
	}
	if code, _ := s.get(t, "/modules/modules.example/acme/other/aws"); code != http.StatusNotFound {
		t.Errorf("a module the catalog does not hold: %d, want 404", code)
	}
	if got := route("/modules/modules.example/acme/net/aws"); got != "catalog" {
		t.Errorf("route of a module page: %q", got)
	}
	if got := route(modulesPath + "modules.example/acme/net/aws/1.0.0/module.zip"); got != "module_zip" {
		t.Errorf("route of a module zip: %q", got)
	}
}

func TestModuleRegistryWithoutPolicy(t *testing.T) {
	s, _ := moduleServer(t, false)
	if got := strings.Join(moduleVersions(t, s, "modules.example/acme/net/aws"), " "); got != "1.2.0 1.1.0 1.0.0" {
		t.Fatalf("versions without a policy: %q", got)
	}
}

func TestModuleTemplateAndInclude(t *testing.T) {
	for _, bad := range []string{"reg.example/m/${name}/${system}", "reg.example/${namespace}/${name}/${system}/${type}", "reg.example/${namespace}/${name}/${system}:tag"} {
		if _, err := ParseModuleTemplate(bad); err == nil {
			t.Errorf("template %q accepted", bad)
		}
	}
	tmpl, err := ParseModuleTemplate("${namespace}.reg.example/${name}/${system}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckModuleInclude(tmpl, nil); err == nil {
		t.Error("a template whose host holds ${namespace} was accepted without --module-include")
	}
	if _, err := CheckModuleInclude(tmpl, []string{"h.example/*/*/*"}); err == nil {
		t.Error("a * namespace was accepted where the namespace picks the registry host")
	}
	if _, err := CheckModuleInclude(tmpl, []string{"h.example/acme/*/*"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"a/b/c", "h.example/a/b/c/d", "h.example/a/b/NOT_SYSTEM", "bad host/a/b/c"} {
		if _, err := parseModuleAddress(bad); err == nil {
			t.Errorf("address %q accepted", bad)
		}
	}
	a, err := parseModuleAddress("Modules.Example/acme/net/aws")
	if err != nil || a.String() != "modules.example/acme/net/aws" {
		t.Fatalf("address: %v %s", err, a)
	}
}

// FuzzModuleAddress: any request path's parts either fail or parse into an address that prints
// back to a form parsing to the same address, and that a template expands to a repository without
// a tag, or an error; it never panics.
func FuzzModuleAddress(f *testing.F) {
	f.Add("modules.example/acme/net/aws", "reg.io/m/${namespace}/${name}/${system}")
	f.Add("Ünï.example/a-b/c_d/x9", "oci-layout:/srv/${hostname}/${namespace}/${name}/${system}")
	f.Add("h/a/b/c", "reg.io/${namespace}/${name}/${system}:1")
	f.Fuzz(func(t *testing.T, s, tmpl string) {
		a, err := parseModuleAddress(s)
		if err != nil {
			return
		}
		b, err := parseModuleAddress(a.String())
		if err != nil || b != a {
			t.Fatalf("%q parsed as %+v; its own form %q parses as %+v, %v", s, a, a.String(), b, err)
		}
		tm, err := ParseModuleTemplate(tmpl)
		if err != nil {
			return
		}
		if ref, err := tm.Repository(a); err == nil && ref.Reference != "" {
			t.Fatalf("%q gives %s for %s, which has a tag or digest", tmpl, ref, a)
		}
	})
}

// TestModuleZipTampered: a zip whose bytes in the registry no longer match the digest its
// verified manifest names is refused (502), never sent.
func TestModuleZipTampered(t *testing.T) {
	s, root := moduleServer(t, true)
	const addr = "modules.example/acme/net/aws"
	moduleVersions(t, s, addr)
	l := s.moduleListing(context.Background(), ModuleAddress{"modules.example", "acme", "net", "aws"})
	layer := l.versions[0].Resolved.Layer()
	blob := filepath.Join(root, "acme/net/aws/blobs/sha256", layer.Digest.Encoded())
	data := moduleZip(t, "1.2.0")
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, body := s.get(t, modulesPath+addr+"/1.2.0/module.zip")
	if code != http.StatusBadGateway || !strings.Contains(string(body), "do not match their digest") {
		t.Fatalf("a tampered zip: %d %s", code, body)
	}
}

// TestModuleVerificationCachedByDigest: with every request reading the repository again (Refresh
// 0), a manifest whose signatures passed is not checked again; a fresh server does check.
func TestModuleVerificationCachedByDigest(t *testing.T) {
	s, root := moduleServer(t, true)
	const addr = "modules.example/acme/net/aws"
	if got := strings.Join(moduleVersions(t, s, addr), " "); got != "1.2.0 1.0.0" {
		t.Fatalf("versions: %q", got)
	}
	s.cfg.Refresh = 0
	blobs, _ := filepath.Glob(filepath.Join(root, "acme/net/aws/blobs/sha256/*"))
	removed := 0
	for _, b := range blobs {
		data, _ := os.ReadFile(b)
		if strings.Contains(string(data), "application/vnd.dev.sigstore.bundle") {
			os.Remove(b)
			removed++
		}
	}
	if removed == 0 {
		t.Fatal("found no signature to remove")
	}
	if got := strings.Join(moduleVersions(t, s, addr), " "); got != "1.2.0 1.0.0" {
		t.Errorf("with the verifications remembered by digest: %q", got)
	}
	s.mods = newModuleState()
	if got := strings.Join(moduleVersions(t, s, addr), " "); got != "" {
		t.Errorf("a server that remembers nothing found the removed signatures: %q (so the check above proves nothing)", got)
	}
}

// TestModuleZipOverSizeLimit: a module zip over the package size limit is refused before any byte
// of it is fetched, as a provider archive is.
func TestModuleZipOverSizeLimit(t *testing.T) {
	s, _ := moduleServer(t, true)
	s.cfg.Registry.Limits.MaxPackageSize = 10
	code, body := s.get(t, modulesPath+"modules.example/acme/net/aws/1.2.0/module.zip")
	if code != http.StatusBadGateway || !strings.Contains(string(body), "over this server's size limit") {
		t.Fatalf("a module zip over the limit: %d %s", code, body)
	}
	if lines := s.log.logLines("maximum package size"); len(lines) == 0 {
		t.Error("the log does not say which limit refused it")
	}
}

func TestCheckModules(t *testing.T) {
	s, _ := moduleServer(t, true)
	pats, err := CheckModuleInclude(s.cfg.Modules.Template, []string{"modules.example/acme/net/aws", "modules.example/acme/missing/aws", "modules.example/*/*/*"})
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Modules.Include = pats
	problems := s.CheckModules(context.Background())
	if len(problems) != 1 || problems["modules.example/acme/missing/aws"] == nil {
		t.Fatalf("problems: %v, want the missing module's only", problems)
	}
	if _, kept := s.mods.lists["modules.example/acme/missing/aws"]; kept {
		t.Error("a failed reading was kept")
	}
}
