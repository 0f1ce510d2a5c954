package loader_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

func TestInstall(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	host := testfix.Host()
	dir := w.project(t, map[string]string{"hello": "~> 1.0", "other": ">= 0.1"}, "")

	res, err := open(t, dir).Install(ctx, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Locked) != 2 || !res.Network || !slices.Equal(res.Unmanaged, []string{"registry.opentofu.org/hashicorp/random"}) {
		t.Errorf("locked %+v, network %v, unmanaged %v", res.Locked, res.Network, res.Unmanaged)
	}
	if len(res.Installed) != 2 {
		t.Fatalf("installed %+v", res.Installed)
	}
	for i, want := range []*testfix.Release{w.rels["hello"]["1.1.0"], w.rels["other"]["0.1.0"]} {
		in := res.Installed[i]
		if in.Version != want.Version || in.Platform != host.String() || in.Zip != want.Zip(host).String() || in.FromCache {
			t.Errorf("installed %+v, want %s %s zip %s", in, want.Type, want.Version, want.Zip(host))
		}
		if in.Auth.Method != "cosign" || len(in.Auth.Keys) != 1 {
			t.Errorf("%s: authentication %+v", in.Addr, in.Auth)
		}
		if got := executable(t, in); got != testfix.ExecutableContent(want.Type, want.Version, host) {
			t.Errorf("%s: unpacked executable holds %q", in.Addr, got)
		}
	}
	if e := readLock(t, dir, hello); e == nil || !slices.Equal(e.Hashes, w.rels["hello"]["1.1.0"].LockHashes()) {
		t.Errorf("the install's lock entry %+v", e)
	}

	// Warm cache, complete lock: nothing asked of the registry.
	before := w.reg.Requests()
	res, err = open(t, dir).Install(ctx, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	if n := w.reg.Requests() - before; n != 0 || res.Network || len(res.Locked) != 0 {
		t.Errorf("a warm install cost %d requests %v (network %v, locked %v)", n, w.reg.RequestsSince(before), res.Network, res.Locked)
	}
	for _, in := range res.Installed {
		if !in.FromCache || in.Auth.Method != "cosign" {
			t.Errorf("%s: from cache %v, auth %+v", in.Addr, in.FromCache, in.Auth)
		}
	}

	// A cold cache with the lock: fetched and checked against the lock, not locked again.
	opts := w.opts()
	opts.Cache = testfix.Cache(t)
	lockBefore := readFile(t, dir, config.LockFileName)
	res, err = open(t, dir).Install(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Locked) != 0 || res.Installed[0].FromCache || res.Installed[0].Zip != w.rels["hello"]["1.1.0"].Zip(host).String() {
		t.Errorf("cold cache: %+v", res)
	}
	if readFile(t, dir, config.LockFileName) != lockBefore {
		t.Error("an install with a complete lock rewrote it")
	}
}

// Install makes packages for the platform it is asked for.
func TestInstallForAnotherPlatform(t *testing.T) {
	w := newWorld(t)
	win := manifest.Platform{OS: "windows", Arch: "amd64"}
	opts := w.opts()
	opts.Host = win
	res, err := open(t, w.project(t, map[string]string{"hello": "1.0.0"}, "")).Install(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	in := res.Installed[0]
	if in.Platform != win.String() || in.Zip != w.rels["hello"]["1.0.0"].Zip(win).String() {
		t.Errorf("installed %+v", in)
	}
	if got := executable(t, in); got != testfix.ExecutableContent("hello", "1.0.0", win) {
		t.Errorf("executable holds %q", got)
	}
}

// A lock whose hashes disagree with what the registry serves is refused, and nothing is
// unpacked, for any provider.
func TestInstallRefusesLockMismatch(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	host := testfix.Host()
	v10, v11 := w.rels["hello"]["1.0.0"], w.rels["hello"]["1.1.0"]
	var zhs []string
	for _, p := range testfix.Platforms() {
		zhs = append(zhs, v11.ZH(p))
	}
	otherOK := lockBlock(other, "0.1.0", ">= 0.1", w.rels["other"]["0.1.0"].LockHashes()...)
	for name, hashes := range map[string][]string{
		"zh: of another release":         v10.LockHashes(),
		"right zh:, another release h1:": append(slices.Clone(zhs), v10.H1(host)),
		"h1: alone, of another release":  {v10.H1(host)},
		"zh: alone, of another release":  {v10.ZH(host)},
	} {
		t.Run(name, func(t *testing.T) {
			lock := otherOK + "\n" + lockBlock(hello, "1.1.0", "~> 1.0", hashes...)
			dir := w.project(t, map[string]string{"hello": "~> 1.0", "other": ">= 0.1"}, lock)
			opts := w.opts()
			opts.Cache = testfix.Cache(t)
			_, err := open(t, dir).Install(ctx, opts)
			if !errors.Is(err, loader.ErrLockMismatch) || !strings.Contains(err.Error(), hello) {
				t.Fatalf("err = %v, want a lock mismatch for %s", err, hello)
			}
			if got := unpacked(t, opts.Cache.Dir); len(got) != 0 {
				t.Errorf("unpacked after a refusal: %v", got)
			}
			if readFile(t, dir, config.LockFileName) != lock {
				t.Error("a refused install changed the lock file")
			}
		})
	}

	// A lock that records no hash at all for a version it pins is relocked, not trusted.
	dir := w.project(t, map[string]string{"hello": "~> 1.0"}, lockBlock(hello, "1.0.0", "~> 1.0"))
	res, err := open(t, dir).Install(ctx, w.opts())
	if err != nil || len(res.Locked) != 1 || res.Installed[0].Version != "1.0.0" {
		t.Errorf("an entry with no hashes: %v %+v", err, res)
	}
}

// A tag moved since the cache saw it: a lock made from the new release is met by asking the
// registry again; the cache's old answer is not installed.
func TestInstallMovedTag(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	host := testfix.Host()
	dir := w.project(t, map[string]string{"hello": "1.1.0"}, "")
	if _, err := open(t, dir).Install(ctx, w.opts()); err != nil {
		t.Fatal(err)
	}
	moved := w.rels["hello"]["1.1.0"].Republished(t)
	w.push(t, moved)

	// The old lock and the old cache agree: installed with no request.
	before := w.reg.Requests()
	if _, err := open(t, dir).Install(ctx, w.opts()); err != nil || w.reg.Requests() != before {
		t.Fatalf("old lock, old cache: %v, %d requests", err, w.reg.Requests()-before)
	}
	// A cold cache finds the registry disagreeing with the lock.
	cold := w.opts()
	cold.Cache = testfix.Cache(t)
	if _, err := open(t, dir).Install(ctx, cold); !errors.Is(err, loader.ErrLockMismatch) {
		t.Errorf("moved tag, old lock: %v", err)
	}
	// A lock of the new release, with the old cache: the second look installs the new one.
	testfix.WriteFiles(t, dir, map[string]string{config.LockFileName: lockBlock(hello, "1.1.0", "1.1.0", moved.LockHashes()...)})
	res, err := open(t, dir).Install(ctx, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	if in := res.Installed[0]; in.Zip != moved.Zip(host).String() || executable(t, in) != testfix.ExecutableContent("hello", "1.1.0", host)+"# republished\n" {
		t.Errorf("installed %+v, want the republished zip %s", in, moved.Zip(host))
	}
}

// An index whose dev.oprov.h1 annotation lies about its package is refused before anything is
// unpacked, whether the lock was made from that index or from the zips.
func TestInstallRefusesLyingIndex(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	host := testfix.Host()
	liar := testfix.NewRelease(t, "liar", "1.0.0")
	honest := liar.LockHashes()
	liar.LieAboutH1(host, w.rels["hello"]["1.0.0"].H1(host))
	w.push(t, liar)

	dir := w.project(t, map[string]string{"liar": "1.0.0"}, "")
	_, err := open(t, dir).Install(ctx, w.opts())
	if err == nil || !strings.Contains(err.Error(), "does not describe its own package") {
		t.Errorf("lock from the lying index: %v", err)
	}
	if got := unpacked(t, w.cache.Dir); len(got) != 0 {
		t.Errorf("unpacked: %v", got)
	}

	testfix.WriteFiles(t, dir, map[string]string{config.LockFileName: lockBlock("example.com/acme/liar", "1.0.0", "1.0.0", honest...)})
	opts := w.opts()
	opts.Cache = testfix.Cache(t)
	if _, err := open(t, dir).Install(ctx, opts); err == nil {
		t.Error("lock from the zips: the lying index was installed")
	}
	if got := unpacked(t, opts.Cache.Dir); len(got) != 0 {
		t.Errorf("unpacked: %v", got)
	}
}

// A zip changed in the cache after it was checked in is never unpacked by the next command.
func TestInstallTamperedCachedZip(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	host := testfix.Host()
	rel := w.rels["hello"]["1.1.0"]
	dir := w.project(t, map[string]string{"hello": "1.1.0"}, "")
	res, err := open(t, dir).Install(ctx, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	zips := testfix.FilesWithDigest(t, w.cache.Dir, rel.Zip(host))
	if len(zips) != 1 {
		t.Fatalf("the cache holds the zip %d times: %v", len(zips), zips)
	}
	// Another well-formed package of the same name, in its place; and the unpacked copy gone,
	// so the next install must use the zip.
	evil := rel.Republished(t)
	data, err := os.ReadFile(evil.ZipPath(host))
	if err != nil {
		t.Fatal(err)
	}
	testfix.Overwrite(t, zips[0], data)
	if err := os.RemoveAll(res.Installed[0].MirrorRoot); err != nil {
		t.Fatal(err)
	}

	opts := w.opts()
	opts.Cache = testfix.Reopen(t, w.cache) // the next command
	res, err = open(t, dir).Install(ctx, opts)
	switch {
	case err != nil:
		if !strings.Contains(err.Error(), "changed on disk") {
			t.Errorf("the refusal does not say what happened: %v", err)
		}
		if got := unpacked(t, w.cache.Dir); len(got) != 0 {
			t.Errorf("unpacked from a damaged zip: %v", got)
		}
	default: // a cache may also fetch the damaged entry again; then the real bytes are installed
		if got := executable(t, res.Installed[0]); got != testfix.ExecutableContent("hello", "1.1.0", host) {
			t.Errorf("the tampered zip was unpacked: %q", got)
		}
	}
}

// An oci_mirror block's policy file decides: in warn mode an unsigned version is installed with
// a warning, in enforce mode it is refused and nothing is unpacked.
func TestInstallUnderPolicyFile(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.repos["hello"].Push(t, testfix.NewRelease(t, "hello", "3.0.0"))
	for _, mode := range []string{"warn", "enforce"} {
		t.Run(mode, func(t *testing.T) {
			dir := w.projectTrusting(t, map[string]string{"hello": "3.0.0"}, "", `policy = "trust.hcl"`)
			testfix.WriteFiles(t, dir, map[string]string{"trust.hcl": "mode = \"" + mode + "\"\ntrust \"acme\" {\n  providers = [\"example.com/acme/*\"]\n  keys = [\"" + w.key.PubPath + "\"]\n}\n"})
			var log bytes.Buffer
			opts := w.opts()
			opts.Cache, opts.Log = testfix.Cache(t), &log
			res, err := open(t, dir).Install(ctx, opts)
			if mode == "enforce" {
				if err == nil || !strings.Contains(err.Error(), "3.0.0") {
					t.Errorf("enforce: %v", err)
				}
				if got := unpacked(t, opts.Cache.Dir); len(got) != 0 {
					t.Errorf("unpacked after a refusal: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a := res.Installed[0].Auth; a.Warning == "" || a.Method != "none" || a.Rule != "acme" {
				t.Errorf("warn: authentication %+v", a)
			}
			if n := strings.Count(log.String(), "warning"); n != 1 {
				t.Errorf("warn mode warned %d times about one version in one install: %q", n, log.String())
			}
			// ... and again in the next command, which answers from the cache.
			log.Reset()
			if res, err = open(t, dir).Install(ctx, opts); err != nil || !res.Installed[0].FromCache || res.Installed[0].Auth.Warning == "" || strings.Count(log.String(), "warning") != 1 {
				t.Errorf("warm install in warn mode: %v, %+v, log %q", err, res, log.String())
			}
		})
	}
	dir := w.projectTrusting(t, map[string]string{"hello": "3.0.0"}, "", `policy = "missing.hcl"`)
	if _, err := loader.Open(dir); err == nil || !strings.Contains(err.Error(), "there is no file") {
		t.Errorf("a missing policy file: %v", err)
	}
}

// What install hands OpenTofu: a CLI configuration that installs the managed providers from the
// unpacked packages (keeping the user's own settings), and links in .terraform/providers.
func TestInstallCLIConfigAndLinks(t *testing.T) {
	w := newWorld(t)
	host := testfix.Host()
	dir := w.project(t, map[string]string{"hello": "1.0.0"}, "")
	user := filepath.Join(t.TempDir(), "user.tfrc")
	testfix.WriteFiles(t, filepath.Dir(user), map[string]string{filepath.Base(user): "plugin_cache_dir = \"/somewhere\"\nprovider_installation {\n  direct {\n    exclude = [\"example.com/x/y\"]\n  }\n}\n"})
	t.Setenv("TF_CLI_CONFIG_FILE", user)
	p := open(t, dir)
	res, err := p.Install(context.Background(), w.opts())
	if err != nil {
		t.Fatal(err)
	}
	path, _, err := p.WriteCLIConfig(res, "tofu")
	if err != nil {
		t.Fatal(err)
	}
	cfg := readFile(t, filepath.Dir(path), filepath.Base(path))
	for _, want := range []string{`plugin_cache_dir = "/somewhere"`, filepath.ToSlash(res.Installed[0].MirrorRoot), `include = ["` + hello + `"]`, `"example.com/x/y"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the CLI configuration lacks %s:\n%s", want, cfg)
		}
	}
	if errs := p.LinkProviders(res); len(errs) != 0 {
		t.Fatal(errs)
	}
	link := filepath.Join(dir, ".terraform", "providers", "example.com", "acme", "hello", "1.0.0", host.String())
	exe := filepath.Join(link, filepath.Base(res.Installed[0].Executable))
	if data, _ := os.ReadFile(exe); string(data) != testfix.ExecutableContent("hello", "1.0.0", host) {
		t.Errorf("the linked package holds %q", data)
	}
}

// An unpacked package changed in the cache is refused, not launched, by the next command; the
// same holds when its zip is gone too.
func TestInstallTamperedUnpacked(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	dir := w.project(t, map[string]string{"hello": "1.1.0"}, "")
	ls, err := open(t, dir).Launchables(ctx, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	exe := ls[0].Executable
	if err := os.Chmod(exe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*cache.Cache{w.cache, testfix.Reopen(t, w.cache)} {
		opts := w.opts()
		opts.Cache = c
		ls, err := open(t, dir).Launchables(ctx, opts)
		if err == nil {
			t.Errorf("launchables over a changed package: %+v", ls)
		} else if !errors.Is(err, cache.ErrDamaged) {
			t.Errorf("the refusal does not say what happened: %v", err)
		}
	}
}
