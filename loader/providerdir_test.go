package loader

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLinkProviders(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	host := hostPlatform().String()
	other := "plan9_386"
	// installed is a package unpacked under the mirror root cache/root, as the cache lays it out.
	installed := func(addr, version, platform, root string) Installed {
		root = filepath.Join(cache, root)
		return Installed{Addr: addr, Version: version, Platform: platform, MirrorRoot: root, Dir: filepath.Join(root, addr, version, platform)}
	}
	res := &InstallResult{Installed: []Installed{
		installed("example.com/acme/hello", "1.0.0", host, "a"),
		installed("example.com/acme/other", "2.0.0", other, "b"),
	}}
	p := &Project{Dir: dir}
	link := filepath.Join(dir, ".terraform", "providers", "example.com", "acme", "hello", "1.0.0", host)
	want := filepath.Join(cache, "a", "example.com", "acme", "hello", "1.0.0", host)
	readLink := func() string {
		t.Helper()
		got, err := os.Readlink(link)
		if err != nil {
			t.Fatalf("no link: %v", err)
		}
		return got
	}

	if errs := p.LinkProviders(res); len(errs) != 0 {
		t.Fatal(errs)
	}
	if got := readLink(); got != want {
		t.Errorf("link points at %s, want %s", got, want)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".terraform", "providers", "example.com", "acme", "other")); err == nil {
		t.Error("a package for another platform was linked")
	}

	// A link to another package (an older cache entry) is replaced; nothing is left beside it.
	res.Installed[0] = installed("example.com/acme/hello", "1.0.0", host, "c")
	if errs := p.LinkProviders(res); len(errs) != 0 {
		t.Fatal(errs)
	}
	if got := readLink(); !strings.HasPrefix(got, filepath.Join(cache, "c")) {
		t.Errorf("stale link kept: %s", got)
	}
	if entries, _ := os.ReadDir(filepath.Dir(link)); len(entries) != 1 {
		t.Errorf("the version directory holds %d entries, want only the link", len(entries))
	}

	// tofu's own copy is left to tofu.
	os.Remove(link)
	if err := os.Mkdir(link, 0o755); err != nil {
		t.Fatal(err)
	}
	if errs := p.LinkProviders(res); len(errs) != 0 {
		t.Fatal(errs)
	}
	if st, err := os.Lstat(link); err != nil || !st.IsDir() {
		t.Errorf("tofu's directory was replaced: %v %v", st, err)
	}

	// TF_DATA_DIR moves tofu's data directory, relative to the configuration: the link follows.
	t.Setenv("TF_DATA_DIR", "data")
	if errs := p.LinkProviders(res); len(errs) != 0 {
		t.Fatal(errs)
	}
	if _, err := os.Readlink(filepath.Join(dir, "data", "providers", "example.com", "acme", "hello", "1.0.0", host)); err != nil {
		t.Errorf("TF_DATA_DIR was not followed: %v", err)
	}
	t.Setenv("TF_DATA_DIR", "")

	// What cannot be linked is reported, naming the provider.
	blocked := &Project{Dir: t.TempDir()}
	writeTestFile(t, filepath.Join(blocked.Dir, ".terraform"), "not a directory")
	errs := blocked.LinkProviders(res)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "example.com/acme/hello 1.0.0") {
		t.Errorf("errors = %v, want one naming the provider", errs)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLinkProvidersRefusesDataDirLinkOut: a configuration whose .terraform is a link to a
// directory outside it gets no provider linked there, and the error says why.
func TestLinkProvidersRefusesDataDirLinkOut(t *testing.T) {
	t.Setenv("TF_DATA_DIR", "")
	dir, cache, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(dir, ".terraform")); err != nil {
		t.Fatal(err)
	}
	host := hostPlatform().String()
	root := filepath.Join(cache, "a")
	res := &InstallResult{Installed: []Installed{{Addr: "example.com/acme/hello", Version: "1.0.0", Platform: host,
		MirrorRoot: root, Dir: filepath.Join(root, "example.com", "acme", "hello", "1.0.0", host)}}}
	errs := (&Project{Dir: dir}).LinkProviders(res)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "leading out of the configuration") {
		t.Errorf("errors: %v", errs)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("the provider directory was made through the link, in %s: %v", elsewhere, entries)
	}
	// A .terraform link that stays inside the configuration is followed.
	os.Remove(filepath.Join(dir, ".terraform"))
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	os.Symlink("data", filepath.Join(dir, ".terraform"))
	if errs := (&Project{Dir: dir}).LinkProviders(res); len(errs) != 0 {
		t.Errorf("a link inside the configuration: %v", errs)
	}
}
