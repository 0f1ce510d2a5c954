package module

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/modulepkg"
)

// TestCallNameIsNoPath: a remote module whose module block is named like a path
// ("../../../../.git/hooks") is refused by the walk, before anything is installed: the name would
// become .terraform/modules/vpc.../../../../.git/hooks, the project's own .git/hooks.
func TestCallNameIsNoPath(t *testing.T) {
	w := newWorld(t)
	writeTree(t, w.dir, map[string]string{".git/hooks/pre-commit": "#!/bin/sh\n# the user's hook\n"})
	w.reg.set(func() {
		w.reg.files["/archives/vpc-1.1.0.tar.gz"] = tarGz(t, map[string]string{"main.tf": "module \"../../../../.git/hooks\" {\n  source = \"https://" + w.reg.host() + "/archives/web.zip\"\n}\n"})
	})
	tr, err := w.walk(t)
	if err == nil {
		err = Install(context.Background(), w.dir, tr)
	}
	if got, rerr := os.ReadFile(filepath.Join(w.dir, ".git/hooks/pre-commit")); rerr != nil || !strings.Contains(string(got), "the user's hook") {
		t.Errorf("the project's .git/hooks was touched: %q %v", got, rerr)
	}
	if !errors.Is(err, errCallName) {
		t.Fatalf("got %v, want the module name refused", err)
	}
	for _, part := range []string{`"../../../../.git/hooks"`, filepath.Join(".terraform", "modules", "vpc", "main.tf") + ":1", "identifier"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error does not name %q: %v", part, err)
		}
	}
	if _, err := os.Stat(filepath.Join(w.dir, ".terraform")); err == nil {
		t.Error("a refused walk installed something")
	}
}

// TestCallNamesOfEveryFileKind: a JSON configuration's labels are any string; the root's calls,
// local or remote, are checked as well.
func TestCallNamesOfEveryFileKind(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"json":      {"main.tf.json": `{"module": {"a/b": {"source": "./m"}}}`, "m/main.tf": ""},
		"hcl slash": {"main.tf": "module \"x/y\" {\n  source = \"./m\"\n}\n", "m/main.tf": ""},
		"hcl dots":  {"main.tf": "module \"..\" {\n  source = \"./m\"\n}\n", "m/main.tf": ""},
		"nul":       {"main.tf.json": `{"module": {"a\u0000b": {"source": "./m"}}}`, "m/main.tf": ""},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, files)
			if _, _, err := Local(dir); !errors.Is(err, errCallName) {
				t.Fatalf("Local: %v, want the module name refused", err)
			}
		})
	}
}

// TestLockKeysAreCallPaths: a module lock (it crosses the air gap in a bundle) whose label is a
// path is refused on reading, naming the file and the fix.
func TestLockKeysAreCallPaths(t *testing.T) {
	for _, key := range []string{"../../.git/hooks", "vpc/../../x", "/etc", "vpc..x", "vpc.", "a b"} {
		dir := t.TempDir()
		l, err := ReadLock(dir)
		if err != nil {
			t.Fatal(err)
		}
		l.Entries[key] = &LockEntry{Call: key, Source: "example.com/a/b/c", Version: "1.0.0", Hashes: []string{"h1:x", "zh:y"}}
		if err := l.Write(); err != nil {
			t.Fatal(err)
		}
		_, err = ReadLock(dir)
		if !errors.Is(err, errCallName) || !strings.Contains(err.Error(), LockFileName) || !strings.Contains(err.Error(), "oprov lock") {
			t.Errorf("%q: ReadLock = %v, want the key refused", key, err)
		}
	}
	dir := t.TempDir()
	l, _ := ReadLock(dir)
	l.Entries["vpc.net-2.x_y"] = &LockEntry{Call: "vpc.net-2.x_y", Source: "example.com/a/b/c", Version: "1.0.0", Hashes: []string{"h1:x"}}
	if err := l.Write(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLock(dir); err != nil {
		t.Errorf("a valid key: %v", err)
	}
}

// TestManifestKeysAreCallPaths: modules.json records whose key no call can have are not read.
func TestManifestKeysAreCallPaths(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{".terraform/modules/modules.json": `{"Modules":[{"Key":"","Source":"","Dir":"."},` +
		`{"Key":"vpc","Source":"a/b/c","Dir":".terraform/modules/vpc"},` +
		`{"Key":"../../x","Source":"a/b/c","Dir":".terraform/modules/../../x"},{"Key":"/etc","Source":"a/b/c","Dir":"/etc"}]}`})
	m := readManifest(dir)
	if _, ok := m["vpc"]; !ok || len(m) != 1 {
		t.Errorf("records read: %v, want vpc only", m)
	}
}

// TestInstallStaysInside: whatever key a tree gives (a caller that forgot to check), and
// whatever link a .terraform directory holds, Install writes nothing outside
// .terraform/modules.
func TestInstallStaysInside(t *testing.T) {
	zip, err := modulepkg.Zip(writeModule(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"..", "../outside", "../../outside", "/tmp/oprov-abs", "vpc/../../../outside", "a/b", "a\\b", "a\x00b", "", "."} {
		dir := t.TempDir()
		proj := filepath.Join(dir, "proj")
		writeTree(t, proj, map[string]string{"main.tf": ""})
		tr := &Tree{Modules: []*Resolved{{Call: "module.x", Key: key, Source: "example.com/a/b/c", Kind: KindRegistry, Zip: zip}}}
		err := Install(context.Background(), proj, tr)
		if err == nil {
			t.Errorf("key %q installed", key)
		}
		if left := listAll(t, dir); strings.Join(left, " ") != "proj proj/main.tf" && strings.Join(left, " ") != "proj proj/.terraform proj/.terraform/modules proj/main.tf" {
			t.Errorf("key %q: after Install the directory holds %v", key, left)
		}
		if _, err := os.Stat("/tmp/oprov-abs"); err == nil {
			os.RemoveAll("/tmp/oprov-abs")
			t.Errorf("key %q wrote /tmp/oprov-abs", key)
		}
	}
	// A .terraform (or .terraform/modules) that links out of the project.
	for _, link := range []string{".terraform", ".terraform/modules"} {
		dir := t.TempDir()
		proj, outside := filepath.Join(dir, "proj"), filepath.Join(dir, "outside")
		writeTree(t, outside, map[string]string{"keep.txt": "mine"})
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proj, link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(proj, link)); err != nil {
			t.Fatal(err)
		}
		tr := &Tree{Modules: []*Resolved{{Call: "module.x", Key: "x", Source: "example.com/a/b/c", Kind: KindRegistry, Zip: zip}}}
		if err := Install(context.Background(), proj, tr); err == nil {
			t.Errorf("%s linking outside: installed", link)
		}
		if left := listAll(t, outside); strings.Join(left, " ") != "keep.txt" {
			t.Errorf("%s linking outside: the outside directory holds %v", link, left)
		}
	}
	// A module's own directory replaced by a link: the link goes, what it pointed at stays.
	dir := t.TempDir()
	proj, outside := filepath.Join(dir, "proj"), filepath.Join(dir, "outside")
	writeTree(t, outside, map[string]string{"keep.txt": "mine"})
	writeTree(t, proj, map[string]string{".terraform/modules/modules.json": "{}"})
	if err := os.Symlink(outside, filepath.Join(proj, ".terraform/modules/x")); err != nil {
		t.Fatal(err)
	}
	tr := &Tree{Modules: []*Resolved{{Call: "module.x", Key: "x", Source: "example.com/a/b/c", Kind: KindRegistry, Zip: zip}}}
	if err := Install(context.Background(), proj, tr); err != nil {
		t.Fatal(err)
	}
	if left := listAll(t, outside); strings.Join(left, " ") != "keep.txt" {
		t.Errorf("the outside directory holds %v", left)
	}
	if fi, err := os.Lstat(filepath.Join(proj, ".terraform/modules/x/main.tf")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("x is not installed in place of the link: %v", err)
	}
}

// TestUnpackInStaysInside: the unpacker of module packages, given a name that is no plain
// relative path, or a parent that is a link out of its root, writes nothing outside.
func TestUnpackInStaysInside(t *testing.T) {
	zip, err := modulepkg.Zip(writeModule(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{"../m", "/tmp/oprov-abs-m", "a/../../m", "a\x00b", "", "link/m", "link"} {
		dir := t.TempDir()
		inside, outside := filepath.Join(dir, "inside"), filepath.Join(dir, "outside")
		os.MkdirAll(inside, 0o755)
		os.MkdirAll(outside, 0o755)
		if err := os.Symlink(outside, filepath.Join(inside, "link")); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(inside)
		if err != nil {
			t.Fatal(err)
		}
		_, err = modulepkg.UnpackIn(context.Background(), zip, root, dest, modulepkg.DefaultLimits)
		root.Close()
		if err == nil {
			t.Errorf("%q: unpacked", dest)
		}
		if left := listAll(t, dir); strings.Join(left, " ") != "inside inside/link outside" {
			t.Errorf("%q: the directory holds %v", dest, left)
		}
		if _, err := os.Stat("/tmp/oprov-abs-m"); err == nil {
			os.RemoveAll("/tmp/oprov-abs-m")
			t.Errorf("%q wrote /tmp/oprov-abs-m", dest)
		}
	}
	// modules.json's writer too.
	dir := filepath.Join(t.TempDir(), "r")
	os.Mkdir(dir, 0o755)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, name := range []string{"../modules.json", "/tmp/oprov-abs.json", "a\x00b"} {
		if err := writeFileIn(root, name, []byte("{}")); err == nil {
			t.Errorf("writeFileIn %q: written", name)
		}
	}
	if left := listAll(t, filepath.Dir(dir)); strings.Join(left, " ") != filepath.Base(dir) {
		t.Errorf("beside the root: %v", left)
	}
}

func writeModule(t *testing.T) string {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"main.tf": "output \"x\" { value = 1 }\n", "sub/a.tf": "# a\n"})
	return dir
}

// listAll lists every path under dir (links not followed), relative and slash-separated.
func listAll(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	return out
}
