package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// loaderFixture is a TLS registry holding examples/hello 1.0.0 signed, a key pair, a cache, and
// a configuration directory whose oprov.hcl manages example.com/acme/* from that registry.
type loaderFixture struct {
	reg   *testreg.Registry
	keys  string
	cache string
	cfg   string // configuration directory
	env   []string
	repo  string // HOST/providers/acme/hello
	push  pushOutput
}

const oprovHCL = `oci_mirror {
  repository_template = "%HOST%/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
  public_keys         = ["%KEYS%/cosign.pub"]
}
`

func newLoaderFixture(t testing.TB, tf string) *loaderFixture {
	t.Helper()
	return newLoaderFixtureOf(t, tf, helloRelease(t))
}

// newLoaderFixtureOf is newLoaderFixture with the release in dist (zips and SHA256SUMS) pushed
// as example.com/acme/hello.
func newLoaderFixtureOf(t testing.TB, tf, dist string) *loaderFixture {
	t.Helper()
	f := &loaderFixture{reg: testreg.Start(t, testreg.Options{}), keys: t.TempDir(), cache: filepath.Join(t.TempDir(), "cache"), cfg: t.TempDir()}
	f.repo = f.reg.Host + "/providers/acme/hello"
	// SSL_CERT_FILE lets oprov, tofu and terraform all trust the test CA; HOME keeps the user's
	// own CLI configuration out of the test.
	f.env = []string{"OPROV_CACHE_DIR=" + f.cache, "SSL_CERT_FILE=" + f.reg.CAFile, "COSIGN_PASSWORD=test", "HOME=" + t.TempDir()}
	mustOprov(t, f.env, "keygen", "--output-key-prefix", filepath.Join(f.keys, "cosign"))
	f.push = pushJSON(t, f.env, dist, f.repo, "--address", "example.com/acme/hello", "--sign", "--key", filepath.Join(f.keys, "cosign.key"))
	writeFile(t, filepath.Join(f.cfg, "main.tf"), tf)
	writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", f.reg.Host, "%KEYS%", f.keys).Replace(oprovHCL))
	return f
}

// freshCopy copies the configuration (and its lock, when there is one) without .terraform.
func (f *loaderFixture) freshCopy(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"main.tf", "oprov.hcl", ".terraform.lock.hcl"} {
		if data, err := os.ReadFile(filepath.Join(f.cfg, name)); err == nil {
			writeFile(t, filepath.Join(dir, name), string(data))
		}
	}
	return dir
}

// TestLoaderWithTofu: oprov lock and oprov init, then plain tofu apply; the lock is complete for
// every platform, plain tofu init via oci_mirror accepts it, and a warm cache works offline.
func TestLoaderWithTofu(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig+helloFunctionOutput)

	mustOprov(t, f.env, "lock", "-C", f.cfg)
	hashes := lockHashes(t, filepath.Join(f.cfg, ".terraform.lock.hcl"), "example.com/acme/hello")
	for _, p := range f.push.Platforms {
		if !contains(hashes, "zh:"+strings.TrimPrefix(p.Zip, "sha256:")) || !contains(hashes, helloHashes[p.Platform].H1) {
			t.Errorf("lock lacks %s's zh:/h1: hashes: %v", p.Platform, hashes)
		}
	}
	if len(hashes) != 2*len(f.push.Platforms) {
		t.Errorf("lock has %d hashes, want %d", len(hashes), 2*len(f.push.Platforms))
	}

	t.Run("oprov init, then plain tofu apply", func(t *testing.T) {
		dir := f.freshCopy(t)
		expectPreinstalled(t, mustOprov(t, append(f.env, "OPROV_TOFU="+tofu), "init", "-C", dir).Stdout)
		mustTofu(t, tofu, dir, f.env, "apply", "-auto-approve", "-input=false")
		expectHelloOutputs(t, tofu, dir, f.env, true)
		// tofu init kept oprov's lock: every platform's hashes are still there.
		if got := lockHashes(t, filepath.Join(dir, ".terraform.lock.hcl"), "example.com/acme/hello"); len(got) != len(hashes) {
			t.Errorf("after tofu init the lock has %v, want %v", got, hashes)
		}
	})

	t.Run("plain tofu init via oci_mirror accepts the lock", func(t *testing.T) {
		dir := f.freshCopy(t)
		rc := filepath.Join(t.TempDir(), "tofurc")
		r := mustOprov(t, f.env, "tofurc", "-C", dir)
		writeFile(t, rc, r.Stdout)
		out := mustTofu(t, tofu, dir, append(f.env, "TF_CLI_CONFIG_FILE="+rc), "init", "-input=false")
		if strings.Contains(strings.ToLower(out), "incomplete lock file") {
			t.Errorf("tofu init warned about the lock:\n%s", out)
		}
		if !strings.Contains(out, "example.com/acme/hello") {
			t.Errorf("tofu init did not install hello:\n%s", out)
		}
		// Control: without oprov's lock, tofu locks only this platform and says so, so the check
		// above can fail.
		bare := t.TempDir()
		writeFile(t, filepath.Join(bare, "main.tf"), helloConfig)
		out = mustTofu(t, tofu, bare, append(f.env, "TF_CLI_CONFIG_FILE="+rc), "init", "-input=false")
		if !strings.Contains(strings.ToLower(out), "incomplete lock file") {
			t.Errorf("control: tofu init without oprov's lock did not warn, so the check proves nothing:\n%s", out)
		}
	})

	t.Run("a tampered mirror is refused by tofu init", func(t *testing.T) {
		// A copy of the cache whose unpacked executable was changed on disk.
		cache := filepath.Join(t.TempDir(), "cache")
		if err := os.CopyFS(cache, os.DirFS(f.cache)); err != nil {
			t.Fatal(err)
		}
		exes, _ := filepath.Glob(filepath.Join(cache, "mirror", "*", "*", "*", "*", "*", "*", "terraform-provider-hello*"))
		if len(exes) != 1 {
			t.Fatalf("found %v", exes)
		}
		os.Chmod(exes[0], 0o755)
		if err := os.WriteFile(exes[0], []byte("#!/bin/sh\necho tampered\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		dir := f.freshCopy(t)
		r := oprov(t, append(f.env, "OPROV_TOFU="+tofu, "OPROV_CACHE_DIR="+cache), "init", "-C", dir)
		if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "checksum") {
			t.Errorf("a tampered mirror was accepted: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})

	t.Run("offline from a warm cache", func(t *testing.T) {
		f.reg.Stop()
		dir := f.freshCopy(t)
		r := mustOprov(t, append(f.env, "OPROV_TOFU="+tofu, "OPROV_DEBUG_HTTP=1"), "init", "-C", dir)
		if strings.Contains(r.Stderr, "http: ") {
			t.Errorf("a warm cache with a lock made network requests:\n%s", r.Stderr)
		}
		mustTofu(t, tofu, dir, f.env, "apply", "-auto-approve", "-input=false")
		expectHelloOutputs(t, tofu, dir, f.env, true)
	})
}

// TestLoaderWithTerraform: the same loop with Terraform 1.5.7, which cannot read OCI at all.
func TestLoaderWithTerraform(t *testing.T) {
	terraform := peers.Require(t, "terraform")
	f := newLoaderFixture(t, helloConfig)
	env := append(f.env, "OPROV_TOFU="+terraform)
	expectPreinstalled(t, mustOprov(t, env, "init", "-C", f.cfg).Stdout)
	mustTofu(t, terraform, f.cfg, f.env, "apply", "-auto-approve", "-input=false")
	expectHelloOutputs(t, terraform, f.cfg, f.env, false)
	hashes := lockHashes(t, filepath.Join(f.cfg, ".terraform.lock.hcl"), "example.com/acme/hello")
	if len(hashes) != 2*len(f.push.Platforms) {
		t.Errorf("lock after terraform init: %v", hashes)
	}
}

// expectPreinstalled checks that tofu (or terraform) init found the provider oprov placed in
// .terraform/providers and checked it against the lock rather than installing it again.
func expectPreinstalled(t *testing.T, initOut string) {
	t.Helper()
	if !strings.Contains(initOut, "Using previously-installed example.com/acme/hello v1.0.0") {
		t.Errorf("init installed the provider itself rather than using the one oprov placed:\n%s", initOut)
	}
}

func expectHelloOutputs(t *testing.T, bin, dir string, env []string, function bool) {
	t.Helper()
	var outputs map[string]struct{ Value string }
	tofuJSON(t, bin, dir, env, &outputs, "output", "-json")
	want := map[string]string{"message": "Hello, oprov!", "data_message": "Hello, tofu!"}
	if function {
		want["function_message"] = "Hello, function!"
	}
	for k, v := range want {
		if outputs[k].Value != v {
			t.Errorf("%s output %s = %q, want %q", filepath.Base(bin), k, outputs[k].Value, v)
		}
	}
}

// TestLoaderRefuses: a release that disagrees with the lock, or fails the policy, is refused, and
// nothing is unpacked into the mirror.
func TestLoaderRefuses(t *testing.T) {
	f := newLoaderFixture(t, helloConfig)
	mustOprov(t, f.env, "lock", "-C", f.cfg)
	lockBefore, _ := os.ReadFile(filepath.Join(f.cfg, ".terraform.lock.hcl"))

	t.Run("tag moved to a release whose zips differ from the lock", func(t *testing.T) {
		// Someone pushes (and validly signs) different zips as 1.0.0.
		other := t.TempDir()
		fakeRelease(t, other, "hello", "1.0.0", helloPlatforms...)
		mustOprov(t, f.env, "push", other, f.repo, "--sign", "--key", filepath.Join(f.keys, "cosign.key"))
		env := append(append([]string{}, f.env...), "OPROV_CACHE_DIR="+filepath.Join(t.TempDir(), "cold"))
		r := oprov(t, env, "install", "-C", f.cfg)
		if r.Code != 10 || !strings.Contains(r.Stderr, "does not match the lock file") || !strings.Contains(r.Stderr, "nothing was installed") {
			t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
		}
		if n := countEntries(t, filepath.Join(env[len(env)-1][len("OPROV_CACHE_DIR="):], "mirror")); n != 0 {
			t.Errorf("the mirror holds %d entries after a refused install", n)
		}
		if after, _ := os.ReadFile(filepath.Join(f.cfg, ".terraform.lock.hcl")); string(after) != string(lockBefore) {
			t.Errorf("a refused install changed the lock file")
		}
		// Put 1.0.0 back for the other cases.
		mustOprov(t, f.env, "push", helloRelease(t), f.repo)
	})

	for _, tc := range []struct {
		name, version, signer, want string
		code                        int
	}{
		{"unsigned release", "2.0.0", "", "not signed", 12},
		{"release signed by an untrusted key", "3.0.0", "untrusted", "none by a trusted key", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			versionedHello(t, f.reg, "providers/acme/hello", tc.version)
			if tc.signer != "" {
				mustOprov(t, f.env, "keygen", "--output-key-prefix", filepath.Join(f.keys, tc.signer))
				mustOprov(t, f.env, "sign", f.repo+":"+tc.version, "--key", filepath.Join(f.keys, tc.signer+".key"))
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "main.tf"), strings.Replace(helloConfig, `version = "~> 1.0"`, `version = "`+tc.version+`"`, 1))
			data, _ := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
			writeFile(t, filepath.Join(dir, "oprov.hcl"), string(data))
			cache := filepath.Join(t.TempDir(), "cache")
			r := oprov(t, append(f.env, "OPROV_CACHE_DIR="+cache), "install", "-C", dir)
			if r.Code != tc.code || !strings.Contains(r.Stderr, tc.want) || !strings.Contains(r.Stderr, tc.version) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.Code, r.Stderr, tc.code, tc.want)
			}
			if n := countEntries(t, filepath.Join(cache, "mirror")); n != 0 {
				t.Errorf("the mirror holds %d entries after a refused install", n)
			}
			if _, err := os.Stat(filepath.Join(dir, ".terraform.lock.hcl")); err == nil {
				t.Errorf("a refused install wrote a lock file")
			}
		})
	}
}

func countEntries(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(entries)
}
