package loader

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

// sourceProject is a project keeping examples/hello as source, with a remote block selecting it.
func sourceProject(t *testing.T) (*Project, manifest.ProviderAddress, *config.Remote, Options) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	addr := mustAddr(t, "example.com/acme/hello")
	dir, err := filepath.Abs(filepath.Join("..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	sp := &config.SourceProvider{Addr: addr, Dir: dir, Range: hcl.Range{Filename: "oprov.hcl", Start: hcl.Pos{Line: 1}}}
	p := &Project{Dir: t.TempDir(), Config: &config.Config{Path: "oprov.hcl", Sources: []*config.SourceProvider{sp}},
		Local: []*Provider{{Req: &config.Requirement{Addr: addr}, Kept: sp}}}
	r := &config.Remote{Label: addr.String(), Command: []string{"ssh"}, Range: hcl.Range{Filename: "oprov.hcl", Start: hcl.Pos{Line: 4}}}
	return p, addr, r, Options{Cache: testfix.Cache(t)}
}

// elfMachine gives the machine of the one executable in the zip ro.Zip opens.
func elfMachine(t *testing.T, ro *plugin.RemoteOptions) elf.Machine {
	t.Helper()
	rc, err := ro.Zip()
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 || !strings.HasPrefix(zr.File[0].Name, "terraform-provider-hello_v") {
		t.Fatalf("the zip holds %d files, first %q", len(zr.File), zr.File[0].Name)
	}
	f, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Fatalf("the executable is not ELF: %v", err)
	}
	return ef.Machine
}

// The near side builds a provider kept as source for the platform the far side's hello reports,
// not for this machine: linux_arm64 gives an arm64 executable, linux_amd64 an x86-64 one, each in
// a request marked as built from source, with the zip's own h1:.
func TestRemoteSourceBuildsForFarPlatform(t *testing.T) {
	p, addr, r, opts := sourceProject(t)
	ro, err := p.remoteOptions(context.Background(), addr, r, opts)
	if err != nil {
		t.Fatal(err)
	}
	for platform, want := range map[string]elf.Machine{"linux_arm64": elf.EM_AARCH64, "linux_amd64": elf.EM_X86_64} {
		req, err := ro.Request(platform)
		if err != nil {
			t.Fatalf("%s: %v", platform, err)
		}
		if !req.Source || req.Platform != platform || req.Version != "0.0.0-dev" || len(req.H1) != 1 || !strings.HasPrefix(req.H1[0], "h1:") || req.Size <= 0 {
			t.Errorf("%s: request %+v", platform, req)
		}
		if got := elfMachine(t, ro); got != want {
			t.Errorf("far side %s: the near side built for %s, want %s", platform, got, want)
		}
	}
}

// A far side's platform is what a hostile far side says: anything but OS_ARCH of lower-case
// letters and digits is refused before anything is built, quoted in the error.
func TestRemoteSourceRefusesHostilePlatform(t *testing.T) {
	p, addr, r, opts := sourceProject(t)
	ro, err := p.remoteOptions(context.Background(), addr, r, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, platform := range []string{"", "linux", "linux_amd64 GOFLAGS=-toolexec=/bin/sh", "../../x_amd64", "linux_amd64\x1b]52;c;AAAA\a", "LINUX_AMD64", "linux/amd64/x", "linux_amd64\nGOFLAGS=x"} {
		if req, err := ro.Request(platform); err == nil || !strings.Contains(err.Error(), "the far side's platform") || strings.ContainsRune(err.Error(), 0x1b) {
			t.Errorf("platform %q: request %v, err %v", platform, req, err)
		}
	}
}

// A Python project or a stdio provider kept as source cannot be built for another machine: the
// near side says so, naming what to do, rather than shipping something that runs only here.
func TestRemoteSourceOnlyGo(t *testing.T) {
	p, addr, r, opts := sourceProject(t)
	for kind, files := range map[string]map[string]string{
		"Python project": {"pyproject.toml": "[project]\nname = \"terraform-provider-hello\"\n"},
		"stdio provider": {"oprov-provider.json": "{}", "go.mod": "module x\n"},
	} {
		dir := t.TempDir()
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p.Local[0].Kept.Dir = dir
		ro, err := p.remoteOptions(context.Background(), addr, r, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ro.Request("linux_amd64"); err == nil || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), "oprov package") {
			t.Errorf("%s kept as source: err %v", kind, err)
		}
	}
}

// sourceBuilt builds hello from source for this machine as the near side would send it, and
// gives the request and the zip's path.
func sourceBuilt(t *testing.T) (plugin.RemoteRequest, string) {
	t.Helper()
	p, addr, r, opts := sourceProject(t)
	ro, err := p.remoteOptions(context.Background(), addr, r, opts)
	if err != nil {
		t.Fatal(err)
	}
	req, err := ro.Request(testfix.Host().String())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ro.Zip()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	zp := filepath.Join(t.TempDir(), req.Filename)
	data, _ := io.ReadAll(rc)
	if err := os.WriteFile(zp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return *req, zp
}

// hostConfig writes a far side's configuration and reads it.
func hostConfig(t *testing.T, src string) *config.HostConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	hc, err := config.LoadHostConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// A provider the near side built from source has no release and no signature: the far side
// runs it only when its own configuration names the address in allow_source. Without a far
// configuration, with one that names another address or sets no allow_source, it is refused
// before the zip is asked for, naming the far setting; the request's own word grants nothing (a
// request that does not say "source" goes to the registry check, which a source build fails).
func TestHostSourceProviderNeedsFarAllowance(t *testing.T) {
	req, zp := sourceBuilt(t)
	mirror := "oci_mirror {\n  repository_template = \"127.0.0.1:9/p/${namespace}/${type}\"\n  include = [\"example.com/acme/*\"]\n}\n"
	for name, c := range map[string]struct {
		cfg      string
		source   bool
		want     string
		refused  bool
		mayAsk   bool
		sandbox  bool
		required bool
	}{
		"no far configuration":          {"", true, "allow_source in a host block of the far side's --config", true, false, false, false},
		"no far configuration, sandbox": {"", true, "allow_source in a host block of the far side's --config", true, false, false, true},
		"no allow_source":               {mirror, true, "no host block of", true, false, false, false},
		"another address":               {"host {\n  allow_source = [\"example.com/acme/other\"]\n}\n", true, "does not name it", true, false, false, false},
		"not marked as source":          {"host {\n  allow_source = [\"example.com/acme/hello\"]\n}\n", false, "no oci_mirror block of the far side's configuration", true, false, false, false},
		"allowed":                       {"host {\n  allow_source = [\"example.com/acme/*\"]\n}\n", true, "", false, true, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			ho := HostOptions{Cache: testfix.Cache(t), RequireSandbox: c.required}
			if c.cfg != "" {
				ho.Config = hostConfig(t, c.cfg)
			}
			r := req
			r.Source = c.source
			answer, asked, err := nearSide(t, ho, r, zp)
			msg, _ := answer["error"].(string)
			if c.refused {
				if err == nil || asked || !strings.Contains(msg, c.want) {
					t.Fatalf("want a refusal naming %q before the zip is asked for: asked %v, answer %v, err %v", c.want, asked, answer, err)
				}
				return
			}
			if !asked || answer["ready"] != true {
				t.Fatalf("an allowed source provider: asked %v, answer %v, err %v", asked, answer, err)
			}
		})
	}
}

// allow_source is the far operator's: a list of provider addresses or patterns, never empty.
func TestHostConfigAllowSource(t *testing.T) {
	for src, want := range map[string]string{
		"host {\n  allow_source = []\n}\n":                   "allow_source = []",
		"host {\n  allow_source = [\"not an address\"]\n}\n": "allow_source",
		"sandbox \"*\" {}\n":                                 "no oci_mirror block",
	} {
		path := filepath.Join(t.TempDir(), "host.hcl")
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.LoadHostConfig(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", src, err, want)
		}
	}
	hc := hostConfig(t, "host {\n  allow_source = [\"example.com/acme/*\"]\n}\n")
	if !hc.SourceAllowed(mustAddr(t, "example.com/acme/hello")) || hc.SourceAllowed(mustAddr(t, "example.com/other/hello")) {
		t.Errorf("allow_source %v matches wrongly", hc.AllowSource)
	}
}

func mustAddr(t *testing.T, s string) manifest.ProviderAddress {
	t.Helper()
	a, err := manifest.ParseProviderAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A provider built from source runs sandboxed on the far side even where its operator set no
// sandbox block and no --require-sandbox: the default sandbox, which the near side may narrow and
// never widen (read = ["/"] is refused naming it). A far block for it is the operator's word.
func TestHostSourceProviderSandboxedByDefault(t *testing.T) {
	addr := mustAddr(t, "example.com/acme/hello")
	ho := HostOptions{Config: hostConfig(t, "host {\n  allow_source = [\"example.com/acme/hello\"]\n}\n")}
	box, err := ho.sandboxFor(addr, &plugin.RemoteRequest{Source: true})
	if err != nil || box == nil || !strings.Contains(box.At(), "the default sandbox for a provider built from source") {
		t.Fatalf("a source provider with no far sandbox block: sandbox %+v, err %v", box, err)
	}
	if box, err := ho.sandboxFor(addr, &plugin.RemoteRequest{}); err != nil || box != nil {
		t.Errorf("a release with no far sandbox block (and no --require-sandbox): sandbox %+v, err %v", box, err)
	}
	wide := &plugin.RemoteRequest{Source: true, Sandbox: []byte(`{"label":"*","file":"oprov.hcl","line":3,"read":["/"]}`)}
	if _, err := ho.sandboxFor(addr, wide); err == nil || !strings.Contains(err.Error(), "the default sandbox for a provider built from source") {
		t.Errorf("a source provider asking read = [\"/\"]: err %v", err)
	}
	ho.Config = hostConfig(t, "host {\n  allow_source = [\"example.com/acme/hello\"]\n}\nsandbox \"example.com/acme/hello\" {\n  env = [\"HELLO_*\"]\n}\n")
	if box, err := ho.sandboxFor(addr, &plugin.RemoteRequest{Source: true}); err != nil || box == nil || len(box.Env) != 1 {
		t.Errorf("a source provider with the operator's block: sandbox %+v, err %v", box, err)
	}
}

// A near side's build is whatever the near side says it is: under allow_source, a zip with an
// entry that climbs out of the package is refused by the far side's unpacking, and nothing is
// written outside its cache.
func TestHostSourceZipCannotEscape(t *testing.T) {
	dir := t.TempDir()
	zp := filepath.Join(dir, "terraform-provider-hello_0.0.0-dev_"+testfix.Host().String()+".zip")
	f, err := os.Create(zp)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, name := range []string{"terraform-provider-hello_v0.0.0-dev", "../../../../escaped-by-source-build"} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, "#!/bin/sh\nexit 0\n")
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, err := os.ReadFile(zp)
	if err != nil {
		t.Fatal(err)
	}
	h1, err := pkghash.ZipH1(context.Background(), zp)
	if err != nil {
		t.Fatal(err)
	}
	req := plugin.RemoteRequest{Address: "example.com/acme/hello", Version: "0.0.0-dev", Platform: testfix.Host().String(), Filename: filepath.Base(zp),
		Zip: digest.FromBytes(data).String(), Size: int64(len(data)), H1: []string{h1}, Source: true}
	c := testfix.Cache(t)
	ho := HostOptions{Cache: c, Config: hostConfig(t, "host {\n  allow_source = [\"example.com/acme/hello\"]\n}\n")}
	answer, _, err := nearSide(t, ho, req, zp)
	msg, _ := answer["error"].(string)
	if err == nil || !strings.Contains(msg, "path traversal") {
		t.Fatalf("a source zip with a climbing entry: answer %v, err %v", answer, err)
	}
	filepath.WalkDir(filepath.Dir(c.Dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "escaped-by-source-build" {
			t.Errorf("the climbing entry was written at %s", p)
		}
		return nil
	})
}
