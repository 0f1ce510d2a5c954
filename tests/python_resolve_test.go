package tests

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// writeWheel writes a pure-Python wheel of NAME VERSION into dir with the wheel tag given
// ("py3-none-any" for every platform and Python): one module NAME.py, METADATA, WHEEL and a
// RECORD with the files' hashes.
func writeWheel(t *testing.T, dir, name, version, tag string) {
	t.Helper()
	info := name + "-" + version + ".dist-info/"
	files := map[string]string{
		name + ".py":      "VERSION = \"" + version + "\"\n",
		info + "METADATA": "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n",
		info + "WHEEL":    "Wheel-Version: 1.0\nGenerator: oprov-tests\nRoot-Is-Purelib: true\nTag: " + tag + "\n",
	}
	var record []string
	for path, content := range files {
		sum := sha256.Sum256([]byte(content))
		record = append(record, path+",sha256="+base64.RawURLEncoding.EncodeToString(sum[:])+","+strconv.Itoa(len(content)))
	}
	sort.Strings(record)
	files[info+"RECORD"] = strings.Join(append(record, info+"RECORD,,"), "\n") + "\n"
	f, err := os.Create(filepath.Join(dir, name+"-"+version+"-"+tag+".whl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for path, content := range files {
		w, err := zw.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(content))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

// pyhelloWith copies examples/pyhello into a temporary directory and adds deps to its
// dependencies, giving the copy's path.
func pyhelloWith(t *testing.T, deps ...string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "pyhello")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(repoRoot, "examples", "pyhello"))); err != nil {
		t.Fatal(err)
	}
	pyproject := filepath.Join(src, "pyproject.toml")
	data, err := os.ReadFile(pyproject)
	if err != nil || !strings.Contains(string(data), `dependencies = ["tf==1.2.0"]`) {
		t.Fatalf("%s: no tf dependency to add to (%v)", pyproject, err)
	}
	if len(deps) > 0 {
		writeFile(t, pyproject, strings.Replace(string(data), `dependencies = ["tf==1.2.0"]`, `dependencies = ["tf==1.2.0", "`+strings.Join(deps, `", "`)+`"]`, 1))
	}
	return src
}

// withFindLinks gives a copy of env whose pip also finds distributions in dirs.
func withFindLinks(env []string, dirs ...string) []string {
	out := append([]string{}, env...)
	for i, kv := range out {
		if v, ok := strings.CutPrefix(kv, "PIP_FIND_LINKS="); ok {
			out[i] = "PIP_FIND_LINKS=" + strings.Join(append([]string{v}, dirs...), " ")
		}
	}
	return out
}

// distInfos gives the NAME-VERSION.dist-info directories a zip holds.
func distInfos(t *testing.T, path string) map[string]bool {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	got := map[string]bool{}
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, ".dist-info/METADATA") {
			got[filepath.Base(filepath.Dir(f.Name))] = true
		}
	}
	return got
}

// TestPythonResolveOnce: pyhello with an unpinned dependency, skewdep, whose newest version (2.0)
// has a wheel for linux_amd64 only and whose 1.0 is pure Python. pip left to itself gives
// linux_amd64 2.0 and darwin_arm64 1.0; oprov resolves once and installs 1.0, the newest that
// every target has, everywhere. With only 2.0 in the index, packaging for both fails naming
// skewdep, its version and the platform that has no wheel. With the default claim and skewdep
// 1.0 a wheel for CPython 3.12 alone, the zips claim 3.12 only, with 1.0: the versions no
// version of skewdep fits everywhere are left out.
func TestPythonResolveOnce(t *testing.T) {
	env := pyEnv(t)
	src := pyhelloWith(t, "skewdep")
	links := t.TempDir()
	writeWheel(t, links, "skewdep", "2.0", "py3-none-manylinux2014_x86_64")
	withLinks := func() []string { return append(withFindLinks(env, links), "PIP_CACHE_DIR="+t.TempDir()) }
	pack := func(env []string) result {
		return oprov(t, env, "package", "--python", src, "--version", "1.0.0", "--platform", "linux_amd64,darwin_arm64",
			"--python-versions", "3.12", "--out-dir", t.TempDir(), "-o", "json")
	}

	// Only 2.0, a linux_amd64 wheel: darwin_arm64 has no version of skewdep at all.
	r := pack(withLinks())
	want := "skewdep==2.0, which the dependencies resolve to, has no wheel for darwin_arm64, CPython 3.12, nor has any older version of skewdep"
	if r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("with skewdep 2.0 for linux alone: exit %d, stderr:\n%s\nwant a failure saying %q", r.Code, r.Stderr, want)
	}

	writeWheel(t, links, "skewdep", "1.0", "py3-none-any")
	r = pack(withLinks())
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	var out pyPackaged
	decodeJSON(t, r.Stdout, &out)
	if len(out.Packages) != 2 {
		t.Fatalf("%d packages, want 2", len(out.Packages))
	}
	for _, p := range out.Packages {
		got := distInfos(t, p.Path)
		if !got["skewdep-1.0.dist-info"] || got["skewdep-2.0.dist-info"] {
			t.Errorf("%s: %v, want skewdep 1.0 (the newest every platform has wheels of) and not 2.0", p.Platform, got)
		}
		if !got["tf-1.2.0.dist-info"] {
			t.Errorf("%s: no tf 1.2.0 among %v", p.Platform, got)
		}
	}

	// The default claim, with skewdep 1.0 for CPython 3.12 alone.
	only312 := t.TempDir()
	writeWheel(t, only312, "skewdep", "2.0", "py3-none-manylinux2014_x86_64")
	writeWheel(t, only312, "skewdep", "1.0", "cp312-none-any")
	r = oprov(t, append(withFindLinks(env, only312), "PIP_CACHE_DIR="+t.TempDir()), "package", "--python", src, "--version", "1.0.0",
		"--platform", "linux_amd64,darwin_arm64", "--out-dir", t.TempDir(), "-o", "json")
	if r.Code != 0 {
		t.Fatalf("default claim: exit %d\n%s", r.Code, r.Stderr)
	}
	decodeJSON(t, r.Stdout, &out)
	for _, p := range out.Packages {
		if got := distInfos(t, p.Path); !got["skewdep-1.0.dist-info"] || got["skewdep-2.0.dist-info"] {
			t.Errorf("default claim, %s: %v, want skewdep 1.0 alone", p.Platform, got)
		}
		if sets := pySets(t, p.Path); !reflect.DeepEqual(sets, []string{"cp312"}) {
			t.Errorf("default claim, %s: sets %v, want cp312 alone (no other version has a skewdep every platform can install)", p.Platform, sets)
		}
	}
}

// pySets gives the CPython version sets (lib/cpXY) a Python provider's zip holds, sorted.
func pySets(t *testing.T, path string) []string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	seen := map[string]bool{}
	for _, f := range zr.File {
		if parts := strings.Split(f.Name, "/"); len(parts) > 2 && parts[0] == "lib" && strings.HasPrefix(parts[1], "cp") {
			seen[parts[1]] = true
		}
	}
	var sets []string
	for s := range seen {
		sets = append(sets, s)
	}
	sort.Strings(sets)
	return sets
}
