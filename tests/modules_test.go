package tests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/tls"
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
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// moduleServers are the module sources of one test on 127.0.0.1: a module registry (Module
// Registry Protocol) that also serves archives, over TLS with a CA of the test's own, and git
// repositories served by git http-backend.
type moduleServers struct {
	reg     *httptest.Server
	git     *httptest.Server
	gitRoot string
	mu      sync.Mutex
	files   map[string][]byte // archives by path
	hits    int
}

func startModuleServers(t *testing.T, ca *testca.CA) *moduleServers {
	t.Helper()
	gitPath := peers.Require(t, "git")
	m := &moduleServers{files: map[string][]byte{}, gitRoot: t.TempDir()}
	certFile, keyFile := ca.Issue(t, t.TempDir(), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	m.reg = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	m.reg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	m.reg.StartTLS()
	t.Cleanup(m.reg.Close)
	git := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + m.gitRoot, "GIT_HTTP_EXPORT_ALL=1"}}
	m.git = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.hits++
		m.mu.Unlock()
		git.ServeHTTP(w, r)
	}))
	t.Cleanup(m.git.Close)
	return m
}

func (m *moduleServers) host() string { return strings.TrimPrefix(m.reg.URL, "https://") }

// serve answers discovery, the versions of acme/vpc/aws (1.0.0 and 1.1.0) and their download
// locations (X-Terraform-Get, relative to the registry), and archives.
func (m *moduleServers) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hits++
	switch p := r.URL.Path; {
	case p == "/.well-known/terraform.json":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"modules.v1":"/v1/modules/"}`)
	case p == "/v1/modules/acme/vpc/aws/versions":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"modules":[{"versions":[{"version":"1.0.0"},{"version":"1.1.0"}]}]}`)
	case strings.HasPrefix(p, "/v1/modules/acme/vpc/aws/") && strings.HasSuffix(p, "/download"):
		v := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/modules/acme/vpc/aws/"), "/download")
		w.Header().Set("X-Terraform-Get", "/archives/vpc-"+v+".tar.gz")
		w.WriteHeader(http.StatusNoContent)
	default:
		if b, ok := m.files[p]; ok {
			w.Write(b)
			return
		}
		http.NotFound(w, r)
	}
}

func (m *moduleServers) put(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	zw.Close()
	m.mu.Lock()
	m.files[path] = buf.Bytes()
	m.mu.Unlock()
}

func (m *moduleServers) requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits
}

// commit commits files to a repository of the git server (made on first use) and tags it,
// moving the tag if it exists.
func (m *moduleServers) commit(t *testing.T, repo, tag string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(m.gitRoot, repo)
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(dir); err != nil {
		os.MkdirAll(dir, 0o755)
		run("init", "--quiet", "-b", "main")
	}
	for n, c := range files {
		writeFile(t, filepath.Join(dir, n), c)
	}
	run("add", "-A")
	run("commit", "--quiet", "--allow-empty", "-m", "c")
	run("tag", "-f", tag)
	return run("rev-parse", "HEAD")
}

// moduleFixture is a configuration whose root requires no provider itself and calls (a) a
// registry module that calls a git module, (b) that git module, (c) an HTTP archive module that
// requires example.com/acme/hello, which oprov.hcl manages from the signed OCI registry.
type moduleFixture struct {
	*loaderFixture
	mods   *moduleServers
	gitSrc string
	commit string
}

const netModule = `output "name" {
  value = "net"
}
`

const webModule = `terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = "~> 1.0"
    }
  }
}

resource "hello_greeting" "web" {
  name = "modules"
}

output "message" {
  value = hello_greeting.web.message
}
`

func newModuleFixture(t *testing.T, withOCI bool) *moduleFixture {
	t.Helper()
	ca := testca.NewCA(t, t.TempDir())
	f := &moduleFixture{loaderFixture: newLoaderFixture(t, "# written below\n")}
	f.mods = startModuleServers(t, ca)
	// One file of both CAs: oprov, tofu and terraform trust the registry and the module server.
	caFile := filepath.Join(t.TempDir(), "cas.pem")
	a, _ := os.ReadFile(f.reg.CAFile)
	b, _ := os.ReadFile(ca.File)
	writeFile(t, caFile, string(a)+string(b))
	f.env = append(f.env, "SSL_CERT_FILE="+caFile)

	f.commit = f.mods.commit(t, "net.git", "v1.0.0", map[string]string{"main.tf": netModule})
	f.gitSrc = "git::" + f.mods.git.URL + "/net.git?ref=v1.0.0"
	for _, v := range []string{"1.0.0", "1.1.0"} {
		f.mods.put(t, "/archives/vpc-"+v+".tar.gz", map[string]string{"main.tf": "module \"net\" {\n  source = \"" + f.gitSrc + "\"\n}\n\noutput \"version\" {\n  value = \"" + v + "\"\n}\n\noutput \"net\" {\n  value = module.net.name\n}\n"})
	}
	f.mods.put(t, "/archives/web.tar.gz", map[string]string{"main.tf": webModule})
	if withOCI {
		store := t.TempDir()
		writeFile(t, filepath.Join(store, "main.tf"), "output \"kind\" {\n  value = \"oci\"\n}\n")
		mustOprov(t, f.env, "push", "--module", store, f.reg.Host+"/modules/store:1.0.0", "--sign", "--key", filepath.Join(f.keys, "cosign.key"))
		writeFile(t, filepath.Join(f.cfg, "store.tf"), "module \"store\" {\n  source = \"oci://"+f.reg.Host+"/modules/store?tag=1.0.0\"\n}\n\noutput \"store\" {\n  value = module.store.kind\n}\n")
	}
	writeFile(t, filepath.Join(f.cfg, "main.tf"), `module "vpc" {
  source  = "`+f.mods.host()+`/acme/vpc/aws"
  version = "~> 1.0"
}

module "net" {
  source = "`+f.gitSrc+`"
}

module "web" {
  source = "https://`+f.mods.host()+`/archives/web.tar.gz"
}

output "vpc" {
  value = "${module.vpc.version}/${module.vpc.net}/${module.net.name}"
}

output "message" {
  value = module.web.message
}
`)
	return f
}

// freshCopy copies the configuration with its lock and module lock.
func (f *moduleFixture) freshCopy(t *testing.T) string {
	t.Helper()
	dir := f.loaderFixture.freshCopy(t)
	for _, name := range []string{".terraform.modules.lock.hcl", "store.tf"} {
		if data, err := os.ReadFile(filepath.Join(f.cfg, name)); err == nil {
			writeFile(t, filepath.Join(dir, name), string(data))
		}
	}
	return dir
}

type moduleRecord struct{ Key, Source, Version, Dir string }

func readModulesJSON(t *testing.T, dir string) map[string]moduleRecord {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ".terraform/modules/modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var mj struct{ Modules []moduleRecord }
	decodeJSON(t, string(data), &mj)
	out := map[string]moduleRecord{}
	for _, r := range mj.Modules {
		out[r.Key] = r
	}
	return out
}

// TestModulesWithTofu: oprov lock resolves and locks every module (and the provider only a
// remote module requires); oprov init installs them and tofu init keeps them (with every module
// server stopped, tofu init and apply still work: nothing is downloaded again).
// The configuration also calls a signed oci:// module, verified under oprov.hcl's policy; under
// a policy trusting another key, oprov init refuses it, naming the module call.
func TestModulesWithTofu(t *testing.T) {
	f := testModulesWith(t, peers.Require(t, "tofu"), true)
	t.Run("an oci:// module signed by a key the policy does not trust", func(t *testing.T) {
		other := t.TempDir()
		mustOprov(t, f.env, "keygen", "--output-key-prefix", filepath.Join(other, "cosign"))
		// Only the oci:// module is called (the other module servers are stopped by now).
		dir := f.freshCopy(t)
		writeFile(t, filepath.Join(dir, "main.tf"), "# the oci:// module only\n")
		hcl, _ := os.ReadFile(filepath.Join(dir, "oprov.hcl"))
		writeFile(t, filepath.Join(dir, "oprov.hcl"), strings.Replace(string(hcl), filepath.Join(f.keys, "cosign.pub"), filepath.Join(other, "cosign.pub"), 1))
		r := oprov(t, append(f.env, "OPROV_TOFU="+peers.Require(t, "tofu")), "init", "-C", dir)
		if r.Code == 0 || !strings.Contains(r.Stderr, "module.store") || !strings.Contains(r.Stderr, "store.tf:1") || !strings.Contains(r.Stderr, "signature") {
			t.Errorf("init under a policy trusting another key: exit %d\n%s", r.Code, r.Stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, ".terraform", "modules")); err == nil {
			t.Error("something was installed into .terraform/modules")
		}
	})
}

// TestModulesWithTerraform: the same with Terraform 1.5.7 (which knows no oci:// modules).
func TestModulesWithTerraform(t *testing.T) {
	testModulesWith(t, peers.Require(t, "terraform"), false)
}

func testModulesWith(t *testing.T, bin string, withOCI bool) *moduleFixture {
	f := newModuleFixture(t, withOCI)
	r := mustOprov(t, f.env, "lock", "-C", f.cfg, "-o", "json")
	var locked struct {
		Providers []struct{ Address, Version string }
		Modules   []struct{ Call, Source, Version, H1, ZH string }
	}
	decodeJSON(t, r.Stdout, &locked)
	if len(locked.Providers) != 1 || locked.Providers[0].Address != "example.com/acme/hello" {
		t.Errorf("locked providers %+v: want hello, which only the web module requires", locked.Providers)
	}
	calls := map[string]string{}
	for _, m := range locked.Modules {
		calls[m.Call] = m.Version
	}
	want := 4
	if withOCI {
		want++
		if !strings.HasPrefix(calls["module.store"], "sha256:") {
			t.Errorf("the oci:// module is locked at %q, want its manifest digest", calls["module.store"])
		}
	}
	if calls["module.vpc"] != "1.1.0" || calls["module.vpc.module.net"] != f.commit || calls["module.net"] != f.commit || len(calls) != want {
		t.Fatalf("locked modules %v", calls)
	}
	lockText, err := os.ReadFile(filepath.Join(f.cfg, ".terraform.modules.lock.hcl"))
	if err != nil || !strings.Contains(string(lockText), `module "vpc.net" {`) {
		t.Fatalf("module lock: %v\n%s", err, lockText)
	}

	dir := f.freshCopy(t)
	out := mustOprov(t, append(f.env, "OPROV_TOFU="+bin), "init", "-C", dir)
	if strings.Contains(out.Stdout, "Downloading") {
		t.Errorf("%s init downloaded modules oprov had installed:\n%s", filepath.Base(bin), out.Stdout)
	}
	recs := readModulesJSON(t, dir)
	if recs["vpc"].Version != "1.1.0" || recs["vpc.net"].Source == "" || recs["web"].Dir != ".terraform/modules/web" {
		t.Errorf("modules.json after %s init: %+v", filepath.Base(bin), recs)
	}
	// Control: plain init of a copy without oprov's modules downloads them, and says so.
	bare := f.freshCopy(t)
	os.Remove(filepath.Join(bare, "store.tf"))
	if got := mustTofu(t, bin, bare, f.env, "get"); !strings.Contains(got, "Downloading") {
		t.Errorf("control: %s get did not say it downloaded, so the checks prove nothing:\n%s", filepath.Base(bin), got)
	}
	// Every module server stops: tofu init again (with oprov's CLI configuration) keeps every
	// module, and apply works.
	f.mods.reg.Close()
	f.mods.git.Close()
	before := f.mods.requests()
	rc := append(f.env, "TF_CLI_CONFIG_FILE="+filepath.Join(dir, ".terraform", "oprov", "cli.tfrc"))
	again := mustTofu(t, bin, dir, rc, "init", "-input=false")
	if strings.Contains(again, "Downloading") || f.mods.requests() != before {
		t.Errorf("a second init reached for the modules:\n%s", again)
	}
	// oprov init again, servers still stopped: the installed modules match the lock.
	re := mustOprov(t, append(f.env, "OPROV_TOFU="+bin), "init", "-C", dir)
	if strings.Count(re.Stderr, "already installed and matching the module lock") != len(calls) {
		t.Errorf("oprov init again did not keep the installed modules:\n%s", re.Stderr)
	}
	mustTofu(t, bin, dir, f.env, "apply", "-auto-approve", "-input=false")
	var outputs map[string]struct{ Value string }
	tofuJSON(t, bin, dir, f.env, &outputs, "output", "-json")
	if outputs["vpc"].Value != "1.1.0/net/net" || outputs["message"].Value != "Hello, modules!" {
		t.Errorf("outputs %+v", outputs)
	}
	if withOCI && outputs["store"].Value != "oci" {
		t.Errorf("outputs %+v", outputs)
	}
	return f
}

// TestModuleLocksHold: a registry serving other bytes for the locked version, a git tag moved to
// another commit, and an archive with ../ entries are each refused by oprov init, naming the
// module call (file:line), its source and both hashes; nothing is installed.
func TestModuleLocksHold(t *testing.T) {
	f := newModuleFixture(t, false)
	tofu := peers.Require(t, "tofu")
	mustOprov(t, f.env, "lock", "-C", f.cfg)
	lockText, _ := os.ReadFile(filepath.Join(f.cfg, ".terraform.modules.lock.hcl"))
	hashesOf := func(call string) []string {
		i := strings.Index(string(lockText), `module "`+call+`" {`)
		block := string(lockText)[i:]
		block = block[:strings.Index(block, "]")]
		return lockHashRE.FindAllString(block, -1)
	}
	// refused runs oprov init on a fresh copy and wants it refused, naming the call of key (vpc.net
	// is module.vpc.module.net), where it is written, parts, and the call's locked hashes.
	refused := func(t *testing.T, key, where string, parts ...string) {
		t.Helper()
		dir := f.freshCopy(t)
		r := oprov(t, append(f.env, "OPROV_TOFU="+tofu), "init", "-C", dir)
		if r.Code == 0 {
			t.Fatalf("init succeeded:\n%s", r.Stdout)
		}
		for _, p := range append(append([]string{"module." + strings.ReplaceAll(key, ".", ".module."), where}, parts...), hashesOf(key)...) {
			if !strings.Contains(r.Stderr, strings.Trim(p, `"`)) {
				t.Errorf("the refusal does not name %s:\n%s", p, r.Stderr)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, ".terraform", "modules")); err == nil {
			t.Error("something was installed into .terraform/modules")
		}
	}
	t.Run("registry serves other bytes for the locked version", func(t *testing.T) {
		f.mods.mu.Lock()
		good := f.mods.files["/archives/vpc-1.1.0.tar.gz"]
		f.mods.mu.Unlock()
		f.mods.put(t, "/archives/vpc-1.1.0.tar.gz", map[string]string{"main.tf": "output \"version\" {\n  value = \"evil\"\n}\n"})
		defer func() {
			f.mods.mu.Lock()
			f.mods.files["/archives/vpc-1.1.0.tar.gz"] = good
			f.mods.mu.Unlock()
		}()
		refused(t, "vpc", "main.tf:1", f.mods.host()+"/acme/vpc/aws", "other bytes for version 1.1.0")
	})
	t.Run("archive with ../ entries", func(t *testing.T) {
		f.mods.put(t, "/archives/web.tar.gz", map[string]string{"main.tf": webModule, "../../escape.tf": "# out\n"})
		refused(t, "web", "main.tf:10", "../../escape.tf", "sha256:")
	})
	t.Run("git tag moved", func(t *testing.T) {
		moved := f.mods.commit(t, "net.git", "v1.0.0", map[string]string{"evil.tf": "# moved\n"})
		// module.vpc's call of the git module comes first: named where it is installed, as tofu
		// names files of remote modules.
		refused(t, "vpc.net", filepath.Join(".terraform", "modules", "vpc", "main.tf")+":1", f.gitSrc, f.commit, moved)
	})
}

// TestModuleLockThroughServe: oprov lock and init resolve registry modules through 'oprov serve
// --modules' and the host block it printed (modules.v1 for a name that does not resolve), and
// lock exactly the bytes that were published: the module lock's zh: is the published zip's
// digest, since oprov's zip of the module tree is the package's zip.
func TestModuleLockThroughServe(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	reg := testreg.Start(t, testreg.Options{})
	keys := t.TempDir()
	pass := []string{"COSIGN_PASSWORD=test-password"}
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	src := filepath.Join(t.TempDir(), "m")
	writeNetworkModule(t, src, "1.0.0")
	r := mustOprov(t, pass, "push", "--module", src, reg.Host+"/modules/acme/network/aws:1.0.0", "--sign",
		"--key", filepath.Join(keys, "cosign.key"), "--ca-file", reg.CAFile, "-o", "json")
	s := startServe(t, nil, false, "--modules", reg.Host+"/modules/${namespace}/${name}/${system}",
		"--module-include", "modules.internal/acme/*/*", "--key", filepath.Join(keys, "cosign.pub"),
		"--ca-file", reg.CAFile, "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	work := t.TempDir()
	rc := filepath.Join(work, "modules.tfrc")
	writeFile(t, rc, s.CLIConfig)
	cfg := filepath.Join(work, "cfg")
	writeFile(t, filepath.Join(cfg, "main.tf"), "module \"net\" {\n  source  = \"modules.internal/acme/network/aws\"\n  version = \"~> 1.0\"\n}\n\noutput \"text\" {\n  value = module.net.text\n}\n")
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), "oci_mirror {\n  repository_template = \""+reg.Host+"/providers/${namespace}/${type}\"\n  include             = [\"example.com/acme/*\"]\n}\n")
	env := []string{"TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + s.CAFile, "HOME=" + work, "OPROV_CACHE_DIR=" + filepath.Join(work, "cache"), "OPROV_TOFU=" + tofu}

	var locked struct {
		Modules []struct{ Call, Version, H1, ZH string }
	}
	decodeJSON(t, mustOprov(t, env, "lock", "-C", cfg, "-o", "json").Stdout, &locked)
	if len(locked.Modules) != 1 || locked.Modules[0].Version != "1.0.0" {
		t.Fatalf("locked %+v", locked.Modules)
	}
	// push printed the package's h1: and zh:; the lock, made from the module tree as served,
	// records the same.
	for _, h := range []string{locked.Modules[0].ZH, locked.Modules[0].H1} {
		if h == "" || !strings.Contains(r.Stdout, `"`+h+`"`) {
			t.Errorf("the module lock's %q is not what push published:\n%s", h, r.Stdout)
		}
	}
	mustOprov(t, env, "init", "-C", cfg)
	mustTofu(t, tofu, cfg, env, "apply", "-auto-approve", "-input=false")
	if got := outputText(t, tofu, cfg, env); got != "1.0.0: hello world from a subdirectory module" {
		t.Errorf("output %q", got)
	}
}
