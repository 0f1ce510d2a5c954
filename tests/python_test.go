package tests

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/pkghash/unzip"
	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// pyPlatforms are the platforms the tests package examples/pyhello for: the host's and two others.
var pyPlatforms = func() []string {
	host := runtime.GOOS + "_" + runtime.GOARCH
	out := []string{host}
	for _, p := range []string{"linux_amd64", "darwin_arm64", "linux_arm64"} {
		if p != host && len(out) < 3 {
			out = append(out, p)
		}
	}
	return out
}()

// pyVersions are the CPython versions `oprov package --python` claims (pybuild.PythonVersions).
var pyVersions = []string{"3.11", "3.12", "3.13"}

// pyEnv is what every Python test needs: tf installed by tests/tools/install.sh, and pip pointed
// at the wheelhouse it downloaded from PyPI (no index: the tests make no network request).
func pyEnv(t testing.TB) []string {
	t.Helper()
	peers.Require(t, "tf-python")
	wh := filepath.Join(filepath.Dir(peers.Dir()), "python-wheels-1.2.0")
	if _, err := os.Stat(filepath.Join(wh, ".complete")); err != nil {
		peers.Missing(t, "wheelhouse "+wh)
	}
	return []string{"PIP_NO_INDEX=1", "PIP_FIND_LINKS=" + wh, "PIP_CACHE_DIR=" + filepath.Join(filepath.Dir(peers.Dir()), "pip-cache")}
}

type pyPackaged struct {
	Type     string `json:"type"`
	Packages []struct {
		Platform string `json:"platform"`
		Path     string `json:"path"`
		Size     int64  `json:"size"`
		ZH       string `json:"zh"`
		H1       string `json:"h1"`
	} `json:"packages"`
}

var (
	pyOnce    sync.Once
	pyDist    string
	pyOut     pyPackaged
	pyErr     error
	pyPackDur time.Duration
)

// packagePyhello packages examples/pyhello 1.0.0 for pyPlatforms into dir.
func packagePyhello(t testing.TB, dir string, extra ...string) (pyPackaged, time.Duration, error) {
	var out pyPackaged
	start := time.Now()
	r := oprov(t, pyEnv(t), append([]string{"package", "--python", filepath.Join(repoRoot, "examples", "pyhello"), "--version", "1.0.0",
		"--platform", strings.Join(pyPlatforms, ","), "--out-dir", dir, "-o", "json"}, extra...)...)
	took := time.Since(start)
	if r.Code != 0 {
		return out, took, fmt.Errorf("oprov package --python: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	return out, took, json.Unmarshal([]byte(r.Stdout), &out)
}

// pyhelloRelease packages examples/pyhello once per test run. Tests must not modify it.
func pyhelloRelease(t testing.TB) (string, pyPackaged) {
	t.Helper()
	pyOnce.Do(func() {
		if pyDist, pyErr = os.MkdirTemp("", "oprov-pyhello-dist-"); pyErr != nil {
			return
		}
		pyOut, pyPackDur, pyErr = packagePyhello(t, pyDist)
	})
	if pyErr != nil {
		t.Fatal(pyErr)
	}
	return pyDist, pyOut
}

// pyConfig uses pyhello's resource and data source.
const pyConfig = `terraform {
  required_providers {
    pyhello = {
      source  = "example.com/acme/pyhello"
      version = "~> 1.0"
    }
  }
}

provider "pyhello" {}

resource "pyhello_greeting" "world" {
  name = "oprov"
}

data "pyhello_greeting" "tofu" {
  name = "tofu"
}

output "message" {
  value = pyhello_greeting.world.message
}

output "data_message" {
  value = data.pyhello_greeting.tofu.message
}
`

// expectPyOutputs checks the outputs of an applied pyConfig.
func expectPyOutputs(t *testing.T, bin, dir string, env []string, greeting string) {
	t.Helper()
	var outputs map[string]struct{ Value string }
	tofuJSON(t, bin, dir, env, &outputs, "output", "-json")
	for k, want := range map[string]string{"message": greeting + ", oprov!", "data_message": greeting + ", tofu!"} {
		if outputs[k].Value != want {
			t.Errorf("output %s = %q, want %q", k, outputs[k].Value, want)
		}
	}
}

// pyFixture is a TLS registry holding pyhello 1.0.0 signed, and a configuration whose oprov.hcl
// manages example.com/acme/* from it (the loader fixture, with pyhello instead of hello).
func pyFixture(t *testing.T) *loaderFixture {
	t.Helper()
	dist, _ := pyhelloRelease(t)
	f := &loaderFixture{reg: testreg.Start(t, testreg.Options{}), keys: t.TempDir(), cache: filepath.Join(t.TempDir(), "cache"), cfg: t.TempDir()}
	f.repo = f.reg.Host + "/providers/acme/pyhello"
	f.env = append(pyEnv(t), "OPROV_CACHE_DIR="+f.cache, "SSL_CERT_FILE="+f.reg.CAFile, "COSIGN_PASSWORD=test", "HOME="+t.TempDir())
	mustOprov(t, f.env, "keygen", "--output-key-prefix", filepath.Join(f.keys, "cosign"))
	f.push = pushJSON(t, f.env, dist, f.repo, "--address", "example.com/acme/pyhello", "--sign", "--key", filepath.Join(f.keys, "cosign.key"))
	writeFile(t, filepath.Join(f.cfg, "main.tf"), pyConfig)
	writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", f.reg.Host, "%KEYS%", f.keys).Replace(oprovHCL))
	return f
}

// TestPythonProviderFromRegistry: pyhello packaged with --python for three platforms and pushed
// to a TLS registry is locked for every platform, installed by plain tofu init through
// oci_mirror, by oprov init (for tofu and terraform), and launched by tofu; its schema as oprov
// reads it equals tofu's; and its launcher fails clearly without a usable python3.
func TestPythonProviderFromRegistry(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := pyFixture(t)
	_, packaged := pyhelloRelease(t)
	mustOprov(t, f.env, "lock", "-C", f.cfg)
	hashes := lockHashes(t, filepath.Join(f.cfg, ".terraform.lock.hcl"), "example.com/acme/pyhello")
	for _, p := range packaged.Packages {
		if !contains(hashes, p.ZH) || !contains(hashes, p.H1) {
			t.Errorf("lock lacks %s's zh:/h1: hashes (%s, %s): %v", p.Platform, p.ZH, p.H1, hashes)
		}
	}
	if len(hashes) != 2*len(pyPlatforms) {
		t.Errorf("lock has %d hashes, want %d", len(hashes), 2*len(pyPlatforms))
	}

	plain := f.freshCopy(t)
	rc := filepath.Join(t.TempDir(), "tofurc")
	writeFile(t, rc, mustOprov(t, f.env, "tofurc", "-C", plain).Stdout)
	rcEnv := append(f.env, "TF_CLI_CONFIG_FILE="+rc)
	t.Run("plain tofu init via oci_mirror, then apply", func(t *testing.T) {
		out := mustTofu(t, tofu, plain, rcEnv, "init", "-input=false")
		if strings.Contains(strings.ToLower(out), "incomplete lock file") {
			t.Errorf("tofu init warned about the lock:\n%s", out)
		}
		mustTofu(t, tofu, plain, rcEnv, "apply", "-auto-approve", "-input=false")
		expectPyOutputs(t, tofu, plain, rcEnv, "Hello")
		if got := lockHashes(t, filepath.Join(plain, ".terraform.lock.hcl"), "example.com/acme/pyhello"); !reflect.DeepEqual(got, hashes) {
			t.Errorf("after tofu init the lock has %v, want every platform's %v", got, hashes)
		}
	})
	t.Run("schema equals tofu providers schema -json", func(t *testing.T) {
		pySchemaMatchesTofu(t, f, tofu, plain, rcEnv)
	})
	t.Run("oprov init, then tofu apply", func(t *testing.T) {
		dir := f.freshCopy(t)
		mustOprov(t, append(f.env, "OPROV_TOFU="+tofu), "init", "-C", dir)
		mustTofu(t, tofu, dir, f.env, "apply", "-auto-approve", "-input=false")
		expectPyOutputs(t, tofu, dir, f.env, "Hello")
	})
	t.Run("OPROV_TOFU=terraform", func(t *testing.T) {
		terraform := peers.Require(t, "terraform")
		dir := f.freshCopy(t)
		mustOprov(t, append(f.env, "OPROV_TOFU="+terraform), "init", "-C", dir)
		mustTofu(t, terraform, dir, f.env, "apply", "-auto-approve", "-input=false")
		expectPyOutputs(t, terraform, dir, f.env, "Hello")
	})
	t.Run("read-only HOME", func(t *testing.T) {
		// As root every directory is writable, so the HOME that cannot hold ~/.cache is a file.
		home := filepath.Join(t.TempDir(), "home")
		writeFile(t, home, "")
		os.Chmod(home, 0o444)
		env := append(append([]string{}, rcEnv...), "HOME="+home, "TF_LOG_PROVIDER=debug", "TF_LOG_PATH="+filepath.Join(t.TempDir(), "tofu.log"))
		mustTofu(t, tofu, plain, env, "apply", "-auto-approve", "-input=false", "-replace=pyhello_greeting.world")
		expectPyOutputs(t, tofu, plain, env, "Hello")
		log, _ := os.ReadFile(env[len(env)-1][len("TF_LOG_PATH="):])
		if !strings.Contains(string(log), "HOME ("+home+") has no writable .cache: running with HOME=") {
			t.Errorf("tofu's log does not show the launcher replacing the read-only HOME")
		}
	})
	t.Run("no compatible python3", func(t *testing.T) {
		pyLauncherFailsClearly(t, tofu, plain, rcEnv)
	})
	t.Run("copy carries it with its signature", func(t *testing.T) {
		dst := f.reg.Host + "/copies/acme/pyhello"
		mustOprov(t, f.env, "copy", f.repo+":1.0.0", dst)
		mustOprov(t, f.env, "verify", dst+":1.0.0", "--key", filepath.Join(f.keys, "cosign.pub"), "--all-platforms")
	})
}

// pySchemaMatchesTofu: oprov schema of the pushed version equals tofu's entry for it.
func pySchemaMatchesTofu(t *testing.T, f *loaderFixture, tofu, dir string, env []string) {
	const addr = "example.com/acme/pyhello"
	var fromTofu map[string]any
	tofuJSON(t, tofu, dir, env, &fromTofu, "providers", "schema", "-json")
	want := fromTofu["provider_schemas"].(map[string]any)[addr]
	if want == nil {
		t.Fatalf("tofu's schema has no %s", addr)
	}
	r := mustOprov(t, f.env, "schema", f.repo+":1.0.0", "--address", addr, "--key", filepath.Join(f.keys, "cosign.pub"), "-o", "json")
	var mine map[string]any
	decodeJSON(t, r.Stdout, &mine)
	if got := mine["provider_schemas"].(map[string]any)[addr]; !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("oprov schema differs from tofu's:\n--- oprov\n%s\n--- tofu\n%s", g, w)
	}
	if mine["format_version"] != fromTofu["format_version"] {
		t.Errorf("format_version %v, tofu's %v", mine["format_version"], fromTofu["format_version"])
	}
}

// pyLauncherFailsClearly runs tofu plan on an initialised pyhello configuration with a PATH that
// has no python3, then one whose python3 is 3.10: the launcher's one line reaches the user.
func pyLauncherFailsClearly(t *testing.T, tofu, dir string, env []string) {
	empty, fake := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(fake, "python3"), "#!/bin/sh\necho '3.10 cp310 cpython 0'\n")
	os.Chmod(filepath.Join(fake, "python3"), 0o755)
	for _, tc := range []struct{ name, path, says string }{
		{"no python3 on PATH", empty, "(no python3 on PATH)"},
		{"python3 outside the packaged range", fake, "(python3 is 3.10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tofuRun(t, tofu, dir, append(env, "PATH="+tc.path), "plan", "-input=false")
			line := "terraform-provider-pyhello: no compatible Python: it needs CPython " + strings.Join(pyVersions, ", ") + " as python3 on PATH " + tc.says
			if err == nil || !strings.Contains(out, line) {
				t.Errorf("tofu plan: err %v; want a failure showing %q:\n%s", err, line, out)
			}
		})
	}
}

// pySourceConfig copies examples/pyhello beside pyConfig as a provider kept as source.
func pySourceConfig(t *testing.T) (cfg, src string, env []string) {
	t.Helper()
	cfg = t.TempDir()
	src = filepath.Join(cfg, "providers", "pyhello")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(repoRoot, "examples", "pyhello"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(pyConfig, "      version = \"~> 1.0\"\n", "", 1))
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/pyhello\" {\n  source = \"./providers/pyhello\"\n}\n")
	env = append(pyEnv(t), "OPROV_CACHE_DIR="+filepath.Join(t.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME="+t.TempDir())
	return cfg, src, env
}

// TestRunPythonSourceProvider: a provider kept as a Python project runs under oprov run with no
// registry; a second run reuses its venv, and an edit to the source rebuilds it.
func TestRunPythonSourceProvider(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	cfg, src, env := pySourceConfig(t)
	apply := []string{"run", "-v", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false"}

	start := time.Now()
	r := mustOprov(t, env, apply...)
	first := time.Since(start)
	if !strings.Contains(r.Stderr, "(source, venv built") {
		t.Errorf("first run did not build the venv:\n%s", r.Stderr)
	}
	expectPyOutputs(t, tofu, cfg, env, "Hello")
	schema := mustOprov(t, env, "schema", src, "--address", "example.com/acme/pyhello", "-o", "json")
	if !strings.Contains(schema.Stdout, `"pyhello_greeting"`) || strings.Contains(schema.Stderr, "into a venv with pip") {
		t.Errorf("oprov schema of the source directory (reusing run's venv):\n%s%s", schema.Stdout, schema.Stderr)
	}
	start = time.Now()
	r = mustOprov(t, env, apply...)
	second := time.Since(start)
	if !strings.Contains(r.Stderr, "(source, cached venv") || strings.Contains(r.Stderr, "into a venv with pip") {
		t.Errorf("second run rebuilt an unchanged provider:\n%s", r.Stderr)
	}
	t.Logf("oprov run -- tofu apply: first run (venv built) %s, second run (venv reused) %s", first.Round(time.Millisecond), second.Round(time.Millisecond))

	code, _ := os.ReadFile(filepath.Join(src, "pyhello", "provider.py"))
	edited := strings.Replace(string(code), `DEFAULT_GREETING = "Hello"`, `DEFAULT_GREETING = "Howdy"`, 1)
	if edited == string(code) {
		t.Fatal("examples/pyhello/pyhello/provider.py no longer sets DEFAULT_GREETING")
	}
	writeFile(t, filepath.Join(src, "pyhello", "provider.py"), edited)
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.NewReplacer("      version = \"~> 1.0\"\n", "", `name = "oprov"`, `name = "source"`).Replace(pyConfig))
	r = mustOprov(t, env, apply...)
	if !strings.Contains(r.Stderr, "(source, venv built") {
		t.Errorf("an edited provider was not rebuilt:\n%s", r.Stderr)
	}
	pyUntouched(t, src)
	var outputs map[string]struct{ Value string }
	tofuJSON(t, tofu, cfg, env, &outputs, "output", "-json")
	if outputs["message"].Value != "Howdy, source!" || outputs["data_message"].Value != "Howdy, tofu!" {
		t.Errorf("after the edit, outputs are %v, want the edited provider's Howdy", outputs)
	}
}

// TestPythonSourceFailures: a project without the console script, and a machine without python3,
// each fail with a message that names the cause and the fix; nothing is left in the cache's builds.
func TestPythonSourceFailures(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	t.Run("console script missing", func(t *testing.T) {
		cfg, src, env := pySourceConfig(t)
		proj, _ := os.ReadFile(filepath.Join(src, "pyproject.toml"))
		writeFile(t, filepath.Join(src, "pyproject.toml"), strings.Replace(string(proj), "terraform-provider-pyhello = ", "pyhello-cli = ", 1))
		r := oprov(t, env, "run", "-C", cfg, "--", tofu, "plan", "-input=false")
		want := "no console script terraform-provider-pyhello (it declares pyhello-cli)"
		if r.Code != 125 || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "[project.scripts]") {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 125 (oprov failed under run) and %q with the fix", r.Code, r.Stderr, want)
		}
		r = oprov(t, env, "schema", src)
		if r.Code != 1 || !strings.Contains(r.Stderr, want) {
			t.Errorf("schema: exit %d, stderr:\n%s", r.Code, r.Stderr)
		}
	})
	t.Run("no python3 on PATH", func(t *testing.T) {
		cfg, _, env := pySourceConfig(t)
		r := oprov(t, append(env, "PATH="+t.TempDir()), "run", "-C", cfg, "--", tofu, "plan", "-input=false")
		if r.Code != 125 || !strings.Contains(r.Stderr, "needs Python 3 with pip: put python3 on PATH, or set OPROV_PYTHON") {
			t.Errorf("exit %d, stderr:\n%s", r.Code, r.Stderr)
		}
	})
}

// TestPythonPackage: the zips hold the launcher, what every claimed CPython version shares once in
// lib/common, and a set per version with the compiled modules for its platform and version; a
// three-version zip repeats only the version-specific files of a one-version zip; packaging again gives the same bytes.
func TestPythonPackage(t *testing.T) {
	dist, first := pyhelloRelease(t)
	t.Logf("packaging for %d platforms x %d CPython versions took %s", len(pyPlatforms), len(pyVersions), pyPackDur.Round(time.Second))
	for _, p := range first.Packages {
		t.Logf("zip size %s: %.1f MiB", p.Platform, float64(p.Size)/(1<<20))
		pyCheckLayout(t, p.Path, p.Platform)
	}
	pyUntouched(t, filepath.Join(repoRoot, "examples", "pyhello"))
	again, _, err := packagePyhello(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range again.Packages {
		a, _ := os.ReadFile(first.Packages[i].Path)
		b, _ := os.ReadFile(p.Path)
		if p.ZH != first.Packages[i].ZH || !bytes.Equal(a, b) {
			t.Errorf("%s: packaging twice gave %s then %s", p.Platform, first.Packages[i].ZH, p.ZH)
		}
	}
	one, _, err := packagePyhello(t, t.TempDir(), "--python-versions", "3.12")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range one.Packages {
		three := first.Packages[i]
		ratio := float64(three.Size) / float64(p.Size)
		t.Logf("zip size %s: %.1f MiB for CPython %s, %.1f MiB for 3.12 alone: %.2fx", p.Platform, float64(three.Size)/(1<<20), strings.Join(pyVersions, ", "), float64(p.Size)/(1<<20), ratio)
		// Only the newest version's set is whole; the others hold their compiled extensions as
		// deltas against it, and what all share is stored once: three versions stay well
		// under 1.5 one version (2.2x to 2.5x before deltas; the target is 1.4x).
		if three.Size > p.Size*3/2 {
			t.Errorf("%s: the three-version zip is %d bytes, more than 1.5 times the one-version zip (%d)", p.Platform, three.Size, p.Size)
		}
	}
	sums1, _ := os.ReadFile(filepath.Join(dist, "terraform-provider-pyhello_1.0.0_SHA256SUMS"))
	sums2, _ := os.ReadFile(filepath.Join(filepath.Dir(again.Packages[0].Path), "terraform-provider-pyhello_1.0.0_SHA256SUMS"))
	if !bytes.Equal(sums1, sums2) || len(sums1) == 0 {
		t.Errorf("SHA256SUMS differ:\n%s\n%s", sums1, sums2)
	}
}

// pyCheckLayout checks one zip: the launcher (mode 0755) and, for each claimed version, lib/cpXY
// with the project, tf, and grpc's extension built for that CPython version and platform.
func pyCheckLayout(t *testing.T, path, platform string) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
		if f.Name == "terraform-provider-pyhello_v1.0.0" && f.Mode().Perm() != 0o755 {
			t.Errorf("%s: launcher mode %v", platform, f.Mode())
		}
		if strings.HasSuffix(f.Name, ".pyc") || strings.Contains(f.Name, "/bin/") || strings.HasSuffix(f.Name, "direct_url.json") {
			t.Errorf("%s: %s should not be packaged", platform, f.Name)
		}
	}
	if !names["terraform-provider-pyhello_v1.0.0"] {
		t.Errorf("%s: no launcher", platform)
	}
	osName := map[string]string{"linux": "linux-gnu", "darwin": "darwin"}[strings.Split(platform, "_")[0]]
	// What every version shares is stored once, in lib/common.
	for _, want := range []string{"pyhello/provider.py", "tf/runner.py", "google/protobuf/__init__.py", "cryptography/__init__.py"} {
		if !names["lib/common/"+want] {
			t.Errorf("%s: no lib/common/%s", platform, want)
		}
	}
	for _, v := range pyVersions {
		lib := "lib/cp" + strings.ReplaceAll(v, ".", "") + "/"
		for _, want := range []string{"grpc/__init__.py"} {
			if !names[lib+want] {
				t.Errorf("%s: no %s%s", platform, lib, want)
			}
		}
		for n := range names {
			if strings.HasPrefix(n, lib) && (strings.Contains(n, "/tf/") || strings.Contains(n, "/pyhello/")) {
				t.Errorf("%s: %s is stored per version, not once in lib/common", platform, n)
			}
		}
		// The newest version's set holds grpc's extension; each other one a delta against it,
		// listed in its oprov-deltas.json.
		suffix := `\.so$`
		if v != pyVersions[len(pyVersions)-1] {
			suffix = `\.so\.oprov-delta$`
			if !names[lib+"oprov-deltas.json"] {
				t.Errorf("%s: no %soprov-deltas.json", platform, lib)
			}
		}
		ext := regexp.MustCompile(`^` + regexp.QuoteMeta(lib) + `grpc/_cython/cygrpc\.cpython-` + strings.ReplaceAll(v, ".", "") + `-.*` + osName + suffix)
		found := false
		for n := range names {
			found = found || ext.MatchString(n)
		}
		if !found {
			t.Errorf("%s: no grpc extension for CPython %s (%s)", platform, v, ext)
		}
	}
}

// TestPythonExtensionDeltas: a packaged pyhello run by CPython 3.11, whose grpc extension is
// stored as a delta against 3.13's, rebuilds it once into the user's cache and hands tofu its
// handshake; a rebuilt extension changed in the cache is not loaded but rebuilt; a cache
// directory that is a link to a planted file is passed over for one under TMPDIR; a damaged
// delta stops the launch with a message naming the extension, before any handshake.
func TestPythonExtensionDeltas(t *testing.T) {
	dir, out := pyhelloRelease(t)
	host := runtime.GOOS + "_" + runtime.GOARCH
	var zipPath string
	for _, p := range out.Packages {
		if p.Platform == host {
			zipPath = p.Path
		}
	}
	if zipPath == "" {
		t.Fatalf("no %s package in %s", host, dir)
	}
	exe := extractProvider(t, zipPath, "terraform-provider-pyhello_v1.0.0")
	env := []string{"HOME=" + t.TempDir(), "OPROV_PROVIDER_PYTHON=" + pythonFor(t, "3.11")}
	timeHandshake(t, env, exe)
	built, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(env[0], "HOME="), ".cache", "oprov-python", "ext", "*", "cygrpc.cpython-311-*.so"))
	if len(built) != 1 {
		t.Fatalf("rebuilt extensions %v, want grpc's for 3.11 in the cache", built)
	}
	want, err := os.ReadFile(built[0])
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(want); hex.EncodeToString(sum[:]) != filepath.Base(filepath.Dir(built[0])) {
		t.Errorf("%s does not have the SHA-256 its directory names", built[0])
	}

	// A changed file in the cache: rebuilt, not run.
	if err := os.WriteFile(built[0], []byte("not an extension"), 0o600); err != nil {
		t.Fatal(err)
	}
	timeHandshake(t, env, exe)
	if got, _ := os.ReadFile(built[0]); !bytes.Equal(got, want) {
		t.Errorf("the changed extension in the cache was not rebuilt (%d bytes, want %d)", len(got), len(want))
	}

	// A cache whose directory for the extension is a link elsewhere, to a planted file: not
	// used; the extension is rebuilt in a directory of this user's under TMPDIR instead.
	home, tmpdir, planted := t.TempDir(), t.TempDir(), t.TempDir()
	sha := filepath.Base(filepath.Dir(built[0]))
	if err := os.MkdirAll(filepath.Join(home, ".cache", "oprov-python", "ext"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(planted, filepath.Join(home, ".cache", "oprov-python", "ext", sha)); err != nil {
		t.Fatal(err)
	}
	poison := filepath.Join(planted, filepath.Base(built[0]))
	writeFile(t, poison, "not an extension")
	timeHandshake(t, []string{"HOME=" + home, "TMPDIR=" + tmpdir, env[1]}, exe)
	uid := strconv.Itoa(os.Geteuid())
	if got, err := os.ReadFile(filepath.Join(tmpdir, "oprov-python-"+uid, "ext", sha, filepath.Base(built[0]))); err != nil || !bytes.Equal(got, want) {
		t.Errorf("with the cache's directory a link: no rebuilt extension under TMPDIR (%v)", err)
	}
	if got, _ := os.ReadFile(poison); string(got) != "not an extension" {
		t.Errorf("the file behind the link was written to")
	}

	// A damaged delta, with an empty cache: the launch stops, naming the extension.
	deltas, _ := filepath.Glob(filepath.Join(filepath.Dir(exe), "lib", "cp311", "grpc", "_cython", "*.oprov-delta"))
	if len(deltas) != 1 {
		t.Fatalf("deltas %v, want grpc's for 3.11", deltas)
	}
	data, err := os.ReadFile(deltas[0])
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(deltas[0], 0o644)
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(deltas[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), env[1], "PLUGIN_PROTOCOL_VERSIONS=6",
		"TF_PLUGIN_MAGIC_COOKIE=d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2")
	got, err := cmd.CombinedOutput()
	if err == nil || strings.Count(string(got), "|") >= 4 || !strings.Contains(string(got), "grpc._cython.cygrpc") {
		t.Errorf("with a damaged delta: %v\n%s\nwant a failure naming grpc._cython.cygrpc and no handshake", err, got)
	}
}

// pyUntouched checks that building a project left nothing in it (pip builds in the tree it is
// given: oprov gives it a copy).
func pyUntouched(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && (d.Name() == "build" || d.Name() == "__pycache__" || strings.HasSuffix(d.Name(), ".egg-info")) {
			t.Errorf("building wrote %s into the project", p)
		}
		return nil
	})
}

// startDevProvider starts the packaged pyhello for this machine by hand with the SDK's --dev, its
// stdout a pipe as a debugger's wrapper would have it, and returns the TF_REATTACH_PROVIDERS value
// it prints. The provider is killed when the test ends.
func startDevProvider(t *testing.T, env []string) string {
	t.Helper()
	dist, _ := pyhelloRelease(t)
	host := runtime.GOOS + "_" + runtime.GOARCH
	dir := filepath.Join(t.TempDir(), "pkg")
	if err := unzipTo(filepath.Join(dist, "terraform-provider-pyhello_1.0.0_"+host+".zip"), dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "terraform-provider-pyhello_v1.0.0"), "--dev")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export TF_REATTACH_PROVIDERS="); ok {
				lines <- strings.Trim(v, "'")
				return
			}
		}
		close(lines)
	}()
	select {
	case v, ok := <-lines:
		if !ok {
			t.Fatalf("the provider started with --dev ended without printing its TF_REATTACH_PROVIDERS line (stderr %q)", stderr.String())
		}
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("the provider started with --dev printed no TF_REATTACH_PROVIDERS line to a pipe in 30s (stderr %q)", stderr.String())
	}
	return ""
}

// TestRunJoinsDevProvider: pyhello started by hand with --dev under its launcher prints its
// reattach line to a pipe; with that line in TF_REATTACH_PROVIDERS, oprov run launches
// examples/hello (kept as source) beside it and tofu applies a configuration using both.
func TestRunJoinsDevProvider(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	home := t.TempDir()
	dev := startDevProvider(t, []string{"HOME=" + home})
	if !strings.Contains(dev, `"example.com/acme/pyhello"`) {
		t.Fatalf("--dev printed %q, want pyhello's entry", dev)
	}
	cfg := t.TempDir()
	if err := os.CopyFS(filepath.Join(cfg, "providers", "hello"), os.DirFS(filepath.Join(repoRoot, "examples", "hello"))); err != nil {
		t.Fatal(err)
	}
	both := strings.Replace(pyConfig, "      version = \"~> 1.0\"\n", "", 1)
	both = strings.Replace(both, "terraform {\n  required_providers {\n", "terraform {\n  required_providers {\n    hello = {\n      source = \"example.com/acme/hello\"\n    }\n", 1) +
		"\nresource \"hello_greeting\" \"go\" {\n  name = \"go\"\n}\n\noutput \"go_message\" {\n  value = hello_greeting.go.message\n}\n"
	writeFile(t, filepath.Join(cfg, "main.tf"), both)
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/hello\" {\n  source = \"./providers/hello\"\n}\n")
	env := append(pyEnv(t), "OPROV_CACHE_DIR="+filepath.Join(t.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1", "HOME="+home, "TF_REATTACH_PROVIDERS="+dev)
	r := mustOprov(t, env, "run", "-v", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if strings.Contains(r.Stderr, "launched example.com/acme/pyhello") {
		t.Errorf("oprov run launched pyhello itself instead of using the one started with --dev:\n%s", r.Stderr)
	}
	var outputs map[string]struct{ Value string }
	tofuJSON(t, tofu, cfg, env, &outputs, "output", "-json")
	if outputs["message"].Value != "Hello, oprov!" || outputs["data_message"].Value != "Hello, tofu!" || !strings.Contains(outputs["go_message"].Value, "go") {
		t.Errorf("outputs %v: want pyhello's (from the --dev provider) and hello's (launched by oprov run)", outputs)
	}
}

// TestPythonPins: a project whose requirements.txt pins grpcio and protobuf to versions older
// than the newest in the index gets exactly those versions in every platform's zip; with no grpcio
// wheel for linux_arm64 in the index, packaging fails naming the pin, its version and the
// platform, from requirements.txt and then from a pylock.toml, which is read first. (The tests'
// wheelhouse holds both the newest versions, which tf alone would get, and the pinned ones.)
func TestPythonPins(t *testing.T) {
	env := pyEnv(t)
	wh := filepath.Join(filepath.Dir(peers.Dir()), "python-wheels-1.2.0")
	if old, _ := filepath.Glob(filepath.Join(wh, "grpcio-1.67.1-cp312-*.whl")); len(old) == 0 {
		peers.Missing(t, "grpcio 1.67.1 in the wheelhouse "+wh+" (tests/tools/install.sh python)")
	}
	src := pyhelloWith(t)
	writeFile(t, filepath.Join(src, "requirements.txt"), "grpcio==1.67.1 \\\n    --hash=sha256:00\nprotobuf==5.28.3\n")
	pack := func(env []string) result {
		return oprov(t, env, "package", "--python", src, "--version", "1.0.0", "--platform", "linux_amd64,linux_arm64",
			"--python-versions", "3.12", "--out-dir", t.TempDir(), "-o", "json")
	}
	r := pack(env)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	var out pyPackaged
	decodeJSON(t, r.Stdout, &out)
	for _, p := range out.Packages {
		got := distInfos(t, p.Path)
		for _, want := range []string{"grpcio-1.67.1.dist-info", "protobuf-5.28.3.dist-info"} {
			if !got[want] {
				t.Errorf("%s: no %s among %v", p.Platform, want, got)
			}
		}
	}

	// The same index without grpcio's arm64 wheels.
	partial := t.TempDir()
	entries, _ := os.ReadDir(wh)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "grpcio-") && strings.Contains(e.Name(), "aarch64") {
			continue
		}
		os.Symlink(filepath.Join(wh, e.Name()), filepath.Join(partial, e.Name()))
	}
	r = pack(append(append([]string{}, env...), "PIP_FIND_LINKS="+partial, "PIP_CACHE_DIR="+t.TempDir()))
	want := "requirements.txt pins grpcio==1.67.1, which has no wheel for linux_arm64, CPython 3.12"
	if r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant a failure saying %q", r.Code, r.Stderr, want)
	}

	// A PEP 751 pylock.toml is read before requirements.txt, and named in the same failure.
	writeFile(t, filepath.Join(src, "pylock.toml"), "lock-version = \"1.0\"\n\n[[packages]]\nname = \"grpcio\"\nversion = \"1.67.1\"\n")
	r = pack(append(append([]string{}, env...), "PIP_FIND_LINKS="+partial, "PIP_CACHE_DIR="+t.TempDir()))
	want = "pylock.toml pins grpcio==1.67.1, which has no wheel for linux_arm64, CPython 3.12"
	if r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("with pylock.toml: exit %d, stderr:\n%s\nwant a failure saying %q", r.Code, r.Stderr, want)
	}
}

// unzipTo unpacks the zip at zipPath to dest (which must not exist) with unzip.ExtractIn on a
// root at dest's parent.
func unzipTo(zipPath, dest string) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(filepath.Dir(dest))
	if err != nil {
		return err
	}
	defer root.Close()
	return unzip.ExtractIn(context.Background(), zipPath, root, filepath.Base(dest), unzip.DefaultLimits, nil)
}
