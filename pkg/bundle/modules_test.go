package bundle

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/modulepkg"
	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// resolvedModule makes a resolved module call whose package holds main.tf saying body.
func resolvedModule(t *testing.T, call, source, version, body string) *module.Resolved {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"main.tf": body, "sub/vars.tf": "variable \"x\" {}\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	z, err := modulepkg.Zip(dir)
	if err != nil {
		t.Fatal(err)
	}
	return resolvedZip(t, call, source, version, z)
}

func resolvedZip(t *testing.T, call, source, version string, z []byte) *module.Resolved {
	t.Helper()
	h1, zh, err := modulepkg.Hashes(z)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.ReplaceAll(strings.TrimPrefix(call, "module."), ".module.", ".")
	return &module.Resolved{Call: call, Key: key, Source: source, Version: version, H1: h1, ZH: zh, Zip: z}
}

func lockOf(mods ...*module.Resolved) *module.Lock {
	l := &module.Lock{ModuleLock: &tofufiles.ModuleLock{Entries: map[string]*module.LockEntry{}}}
	for _, r := range mods {
		l.Entries[r.Key] = &module.LockEntry{Call: r.Key, Source: r.Source, Version: r.Version, Hashes: []string{r.H1, r.ZH}}
	}
	return l
}

func saveMods(t *testing.T, out string, base *Listing, mods ...*module.Resolved) (*Listing, error) {
	t.Helper()
	return SaveConfig(context.Background(), ConfigOptions{Dir: "cfg", Modules: mods, ModuleLock: lockOf(mods...), Base: base}, out)
}

func loadInto(t *testing.T, tarball, to string) (*LoadReport, error) {
	t.Helper()
	b, err := Open(context.Background(), tarball, ociref.Limits{})
	if err != nil {
		return nil, err
	}
	return Load(context.Background(), b, LoadOptions{To: "oci-layout:" + to})
}

// registryState lists what a load destination holds: each module repository's tags and the
// manifest digest each names.
func registryState(t *testing.T, to string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(to, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "index.json" {
			return err
		}
		data, _ := os.ReadFile(p)
		var idx struct {
			Manifests []struct {
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.Unmarshal(data, &idx); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(to, filepath.Dir(p))
		for _, m := range idx.Manifests {
			if tag := m.Annotations["org.opencontainers.image.ref.name"]; tag != "" {
				out = append(out, rel+":"+tag+"="+m.Digest)
			}
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// Remote modules of every kind go into the bundle as module packages under the repository their
// source gives, listed with their hashes; load pushes them there, where each is a module package
// whose zip is the one saved and whose provenance names its source.
func TestModulesSaveAndLoad(t *testing.T) {
	mods := []*module.Resolved{
		resolvedModule(t, "module.net", "registry.example.com/acme/net/aws", "1.2.0", "# net\n"),
		resolvedModule(t, "module.net.module.git", "git::https://git.example.com/org/repo.git//modules/a?ref=v1", strings.Repeat("ab", 20), "# git\n"),
		resolvedModule(t, "module.arch", "https://files.example.com/m/arch.zip", "", "# http\n"),
	}
	out := filepath.Join(t.TempDir(), "b.tar")
	l, err := saveMods(t, out, nil, mods...)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Modules) != 3 || l.Modules[0].Repository != "modules/registry.example.com/acme/net/aws" || l.Modules[0].Tag != "1.2.0" ||
		l.Modules[1].Repository != "modules/git/git.example.com/org/repo" || l.Modules[1].Tag != strings.Repeat("ab", 20) ||
		!strings.HasPrefix(l.Modules[2].Tag, "zh-") || l.Modules[0].VersionFrom != "module lock" {
		t.Fatalf("listing: %+v", l.Modules)
	}
	to := t.TempDir()
	rep, err := loadInto(t, out, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Printable.Modules) != 3 {
		t.Errorf("printable modules: %+v", rep.Printable.Modules)
	}
	for i, m := range l.Modules {
		dst, err := ociref.NewClient(ociref.Options{}).Open(context.Background(), ociref.Ref{Layout: filepath.Join(to, m.Repository)}, false)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modulepkg.Resolve(context.Background(), dst, m.Tag)
		if err != nil {
			t.Fatalf("%s: %v", m.Call, err)
		}
		zip, err := f.FetchZip(context.Background(), dst, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", m.Call, err)
		}
		if !bytes.Equal(zip, mods[i].Zip) || f.Manifest.Digest.String() != m.Manifest {
			t.Errorf("%s: loaded package differs from the saved one", m.Call)
		}
		if f.Parsed.Annotations[modulepkg.AnnotationSource] == "" || mods[i].Version != "" && f.Parsed.Annotations[modulepkg.AnnotationVersion] != mods[i].Version {
			t.Errorf("%s: provenance %v", m.Call, f.Parsed.Annotations)
		}
	}
	src := rep.Printable.ModuleSources("oci-layout:" + to)
	if !strings.Contains(src[1].OCISource, "/modules/git/git.example.com/org/repo//modules/a?digest=sha256:") {
		t.Errorf("printed source %s", src[1].OCISource)
	}
}

// A module whose zip leaves its directory, and one whose package no longer hashes to what the
// module lock records, are refused before anything is written, naming the call and both hashes.
func TestModulesSaveRefusals(t *testing.T) {
	good := resolvedModule(t, "module.net", "registry.example.com/acme/net/aws", "1.2.0", "# net\n")
	evil := resolvedZip(t, "module.evil", "registry.example.com/acme/evil/aws", "1.0.0", evilZip(t))
	dir := t.TempDir()
	out := filepath.Join(dir, "b.tar")
	if _, err := saveMods(t, out, nil, good, evil); err == nil || !strings.Contains(err.Error(), "module.evil") || !strings.Contains(err.Error(), "..") {
		t.Errorf("escaping zip: %v", err)
	}
	moved := resolvedModule(t, "module.net", "registry.example.com/acme/net/aws", "1.2.0", "# other bytes\n")
	lock := lockOf(good)
	_, err := SaveConfig(context.Background(), ConfigOptions{Dir: "cfg", Modules: []*module.Resolved{moved}, ModuleLock: lock}, out)
	if err == nil || !strings.Contains(err.Error(), moved.H1) || !strings.Contains(err.Error(), good.H1) || !strings.Contains(err.Error(), "module.net") {
		t.Errorf("moved module: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a refused save left %v", left)
	}
}

func evilZip(t *testing.T) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range []string{"main.tf", "../escape.tf"} {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("# x\n"))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Hostile bundles: a listing whose module hash lies, and a module package whose zip has "../"
// entries (with a listing that tells the truth about it), are refused and nothing is pushed.
func TestModulesLoadRefusesHostileBundles(t *testing.T) {
	mod := resolvedModule(t, "module.net", "registry.example.com/acme/net/aws", "1.2.0", "# net\n")
	liar := writeModuleBundle(t, mod, func(l *Listing) { l.Modules[0].H1 = "h1:" + strings.Repeat("A", 43) + "=" })
	evil := writeModuleBundle(t, resolvedZip(t, "module.evil", "registry.example.com/acme/evil/aws", "1.0.0", evilZip(t)), nil)
	moved := writeModuleBundle(t, mod, func(l *Listing) { l.Modules[0].Repository = "modules/registry.example.com/acme/other/aws" })
	for name, c := range map[string]struct{ path, want string }{"lying hash": {liar, "the bundle was changed"}, "escaping zip": {evil, ".."},
		"repository not its source's": {moved, "not \"modules/registry.example.com/acme/net/aws\""}} {
		to := t.TempDir()
		_, err := loadInto(t, c.path, to)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was pushed") {
			t.Errorf("%s: %v", name, err)
		}
		if left, _ := os.ReadDir(to); len(left) != 0 {
			t.Errorf("%s: the refused load pushed %v", name, left)
		}
	}
}

// writeModuleBundle writes a configuration bundle of one module as save would, but without
// save's checks, its listing changed by edit: what a hostile party could hand over.
func writeModuleBundle(t *testing.T, r *module.Resolved, edit func(*Listing)) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hostile.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	tl, err := newTarLayout(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	l := &Listing{Format: listingFormat}
	m, err := putModule(ctx, tl, r, nil, map[string]string{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Modules = append(l.Modules, *m)
	if edit != nil {
		edit(l)
	}
	data, _ := json.Marshal(l)
	if err := tl.addFile(listingName, data); err != nil {
		t.Fatal(err)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// After one module's new version, a delta holds that version's blobs only (its zip and
// manifest), and loading it on top of the first bundle gives the same registry as loading a full
// bundle of the new configuration.
func TestModulesDelta(t *testing.T) {
	net1 := resolvedModule(t, "module.net", "registry.example.com/acme/net/aws", "1.2.0", "# net 1.2.0\n")
	net2 := resolvedModule(t, "module.net", "registry.example.com/acme/net/aws", "1.3.0", "# net 1.3.0\n")
	git := resolvedModule(t, "module.git", "git::https://git.example.com/org/repo.git?ref=v1", strings.Repeat("cd", 20), "# git\n")
	dir := t.TempDir()
	first, err := saveMods(t, filepath.Join(dir, "first.tar"), nil, net1, git)
	if err != nil {
		t.Fatal(err)
	}
	delta, err := saveMods(t, filepath.Join(dir, "delta.tar"), first, net2, git)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := saveMods(t, filepath.Join(dir, "again.tar"), delta, net2, git); err == nil || !strings.Contains(err.Error(), "nothing changed") {
		t.Errorf("a delta of nothing: %v", err)
	}
	held := map[string]bool{}
	names := tarBlobs(t, filepath.Join(dir, "delta.tar"))
	for _, n := range names {
		held[n] = true
	}
	if len(names) != 2 || !held[modulepkg.LayerDescriptor(net2.Zip).Digest.Encoded()] || !held[strings.TrimPrefix(delta.Modules[0].Manifest, "sha256:")] {
		t.Errorf("the delta holds blobs %v, want only net 1.3.0's zip and manifest", names)
	}
	if delta.Modules[1].InBundle || !delta.Modules[0].InBundle {
		t.Errorf("delta listing: %+v", delta.Modules)
	}
	stepwise, full := t.TempDir(), t.TempDir()
	for _, tb := range []string{"first.tar", "delta.tar"} {
		if _, err := loadInto(t, filepath.Join(dir, tb), stepwise); err != nil {
			t.Fatalf("%s: %v", tb, err)
		}
	}
	if _, err := saveMods(t, filepath.Join(dir, "full.tar"), nil, net2, git); err != nil {
		t.Fatal(err)
	}
	if _, err := loadInto(t, filepath.Join(dir, "full.tar"), full); err != nil {
		t.Fatal(err)
	}
	got, wantState := registryState(t, stepwise), registryState(t, full)
	// The stepwise registry also keeps net 1.2.0, as a registry keeps what it was given.
	var kept []string
	for _, s := range got {
		if !strings.Contains(s, ":1.2.0=") {
			kept = append(kept, s)
		}
	}
	if strings.Join(kept, "\n") != strings.Join(wantState, "\n") || len(wantState) != 2 {
		t.Errorf("base + delta gives\n%s\nthe full load\n%s", strings.Join(got, "\n"), strings.Join(wantState, "\n"))
	}
}

// tarBlobs lists the blobs a tarball holds (their hex digests).
func tarBlobs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if hex, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok && hex != "" {
			out = append(out, hex)
		}
	}
	return out
}

// Under a policy, a module whose destination a trust rule covers must carry a signature that
// verifies: the unsigned package is refused and nothing is pushed. A module no rule covers is
// loaded on its hashes (checked against the listing).
func TestModulesLoadUnderPolicy(t *testing.T) {
	mod := resolvedModule(t, "module.net", "registry.example.com/acme/net/aws", "1.2.0", "# net\n")
	out := filepath.Join(t.TempDir(), "b.tar")
	l, err := saveMods(t, out, nil, mod)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(sign.PasswordEnv, "test-password")
	_, pubPath, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "k"), sign.EnvPassword(nil))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sign.LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, covered := range []bool{true, false} {
		to := t.TempDir()
		pattern := "registry.example.com/other/*"
		if covered {
			pattern = ociref.Ref{Layout: filepath.Join(to, l.Modules[0].Repository)}.Repo()
		}
		p := &sign.Policy{Path: "p.hcl", Mode: sign.ModeEnforce, Rules: []*sign.Rule{{Name: "r", Repositories: []string{pattern}, Keys: []sign.PublicKey{pub}, Mode: sign.ModeEnforce}}}
		b, err := Open(context.Background(), out, ociref.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Load(context.Background(), b, LoadOptions{To: "oci-layout:" + to, Policy: p})
		left, _ := os.ReadDir(to)
		switch {
		case covered && (err == nil || !strings.Contains(err.Error(), "not signed") || len(left) != 0):
			t.Errorf("covered by a rule, unsigned: err = %v, pushed %v", err, left)
		case !covered && (err != nil || len(rep.Printable.Modules) != 1):
			t.Errorf("covered by no rule: err = %v", err)
		}
	}
}

// FuzzModuleRepository: whatever a source address says, the repository a module goes to is a
// valid repository path below modules/ (never "..", an empty part or a leading "/"), and its tag
// a valid tag, or the address is refused.
func FuzzModuleRepository(f *testing.F) {
	for _, s := range []string{"registry.example.com/acme/net/aws", "127.0.0.1:8443/a/b/c//sub", "git::https://h.example/o/r.git//m?ref=v1",
		"git::ssh://git@h.example:22/o/../r.git", "https://h.example/../../x.zip", "oci://h.example/r?digest=sha256:" + strings.Repeat("a", 64), "./local", "s3::https://x"} {
		f.Add(s, "1.0.0")
	}
	f.Fuzz(func(t *testing.T, source, version string) {
		repo, err := moduleRepository(source)
		if err != nil {
			return
		}
		if err := checkRepository(repo); err != nil || !strings.HasPrefix(repo, "modules/") {
			t.Fatalf("%q goes to repository %q: %v", source, repo, err)
		}
		s, _ := module.ParseSource(source)
		if tag, err := moduleTag(s.Kind.String(), version, "zh:"+strings.Repeat("0", 64)); err == nil {
			if err := checkTag(repo, tag); err != nil {
				t.Fatalf("%q %q: tag %q: %v", source, version, tag, err)
			}
		}
	})
}
