package tests

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// writeSdist writes a source distribution NAME-VERSION.tar.gz of a setuptools project into dir,
// holding files (relative to the project's root) besides pyproject.toml and PKG-INFO.
func writeSdist(t *testing.T, dir, name, version string, files map[string]string) {
	t.Helper()
	root := name + "-" + version
	f, err := os.Create(filepath.Join(dir, root+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	all := map[string]string{
		"pyproject.toml": "[build-system]\nrequires = [\"setuptools>=68\"]\nbuild-backend = \"setuptools.build_meta\"\n\n" +
			"[project]\nname = \"" + name + "\"\nversion = \"" + version + "\"\nrequires-python = \">=3.11\"\n\n[tool.setuptools]\npy-modules = [\"" + name + "\"]\n",
		"PKG-INFO": "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n",
	}
	for k, v := range files {
		all[k] = v
	}
	for path, content := range all {
		if err := tw.WriteHeader(&tar.Header{Name: root + "/" + path, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPythonSdistDependency: pyhello, changed to take its greeting from srcgreet, a pure-Python
// dependency published only as a source distribution, is packaged (srcgreet built into a wheel
// and shipped), pushed, installed by oprov init and applied by real tofu, which greets with
// srcgreet's word.
func TestPythonSdistDependency(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	env := pyEnv(t)
	src := pyhelloWith(t, "srcgreet==0.1.0")
	edit := func(path, old, new string) {
		data, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(data), old) {
			t.Fatalf("%s has no %q (%v)", path, old, err)
		}
		writeFile(t, path, strings.Replace(string(data), old, new, 1))
	}
	edit(filepath.Join(src, "pyhello", "provider.py"), `DEFAULT_GREETING = "Hello"`, `from srcgreet import WORD as DEFAULT_GREETING`)
	links := t.TempDir()
	writeSdist(t, links, "srcgreet", "0.1.0", map[string]string{"srcgreet.py": "WORD = \"Salut\"\n"})
	env = withFindLinks(env, links)

	dist := t.TempDir()
	r := oprov(t, env, "package", "--python", src, "--version", "1.0.0", "--platform", runtime.GOOS+"_"+runtime.GOARCH,
		"--out-dir", dist, "-o", "json")
	if r.Code != 0 {
		t.Fatalf("oprov package --python: exit %d\n%s", r.Code, r.Stderr)
	}
	var out pyPackaged
	decodeJSON(t, r.Stdout, &out)
	if len(out.Packages) != 1 || !zipHas(t, out.Packages[0].Path, "srcgreet.py") {
		t.Fatalf("the zip does not carry srcgreet.py: %+v", out)
	}

	f := &loaderFixture{reg: testreg.Start(t, testreg.Options{}), keys: t.TempDir(), cache: filepath.Join(t.TempDir(), "cache"), cfg: t.TempDir()}
	f.repo = f.reg.Host + "/providers/acme/pyhello"
	f.env = append(env, "OPROV_CACHE_DIR="+f.cache, "SSL_CERT_FILE="+f.reg.CAFile, "COSIGN_PASSWORD=test", "HOME="+t.TempDir())
	mustOprov(t, f.env, "keygen", "--output-key-prefix", filepath.Join(f.keys, "cosign"))
	f.push = pushJSON(t, f.env, dist, f.repo, "--address", "example.com/acme/pyhello", "--sign", "--key", filepath.Join(f.keys, "cosign.key"))
	writeFile(t, filepath.Join(f.cfg, "main.tf"), pyConfig)
	writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", f.reg.Host, "%KEYS%", f.keys).Replace(oprovHCL))
	mustOprov(t, append(f.env, "OPROV_TOFU="+tofu), "init", "-C", f.cfg)
	mustTofu(t, tofu, f.cfg, f.env, "apply", "-auto-approve", "-input=false")
	expectPyOutputs(t, tofu, f.cfg, f.env, "Salut")
}

// zipHas reports whether the zip at path holds a file whose name ends in /base.
func zipHas(t *testing.T, path, base string) bool {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/"+base) {
			return true
		}
	}
	return false
}

// TestPythonCompiledSdistRefused: a dependency published only as a source distribution whose
// wheel is not pure Python (its setup.py declares extension modules, so the wheel is tagged for
// this machine's CPython and platform alone) is refused, naming the package and its version.
func TestPythonCompiledSdistRefused(t *testing.T) {
	env := pyEnv(t)
	src := pyhelloWith(t, "fastthing==1.4.0")
	links := t.TempDir()
	writeSdist(t, links, "fastthing", "1.4.0", map[string]string{
		"fastthing.py": "FAST = True\n",
		// A distribution that says it has extension modules: setuptools tags its wheel for
		// this CPython and platform, as a compiled one, without needing a compiler here.
		"setup.py": "from setuptools import setup\nfrom setuptools.dist import Distribution\n\n" +
			"class Compiled(Distribution):\n    def has_ext_modules(self):\n        return True\n\nsetup(distclass=Compiled)\n",
	})
	r := oprov(t, withFindLinks(env, links), "package", "--python", src, "--version", "1.0.0", "--platform", "linux_amd64",
		"--python-versions", "3.12", "--out-dir", t.TempDir())
	want := "fastthing 1.4.0 is published only as a source distribution, and it compiles"
	if r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant a failure saying %q", r.Code, r.Stderr, want)
	}
}
