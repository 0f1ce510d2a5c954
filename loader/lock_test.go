package loader_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

func TestOpen(t *testing.T) {
	w := newWorld(t)
	dir := w.project(t, map[string]string{"hello": "~> 1.0", "other": ">= 0.1"}, randomBlock)
	p := open(t, dir)
	var managed []string
	for _, pv := range p.Managed {
		managed = append(managed, pv.Addr())
		if pv.Mirror == nil || pv.Mirror.Policy == nil {
			t.Errorf("%s: no mirror block or no policy from public_keys", pv.Addr())
		}
	}
	if !slices.Equal(managed, []string{hello, other}) {
		t.Errorf("managed %v", managed)
	}
	if len(p.Unmanaged) != 1 || p.Unmanaged[0].Addr.String() != "registry.opentofu.org/hashicorp/random" || len(p.Local) != 0 {
		t.Errorf("unmanaged %v, local %v", p.Unmanaged, p.Local)
	}
	if e := p.Lock.Entries["registry.opentofu.org/hashicorp/random"]; e == nil || e.Version != "3.6.0" {
		t.Errorf("lock entry of random: %+v", e)
	}

	for name, c := range map[string]struct {
		files map[string]string
		want  string
	}{
		"no oprov.hcl":    {map[string]string{config.FileName: ""}, "no oprov.hcl"},
		"nothing matches": {map[string]string{config.FileName: strings.ReplaceAll(readFile(t, dir, config.FileName), "example.com/acme/*", "example.com/nobody/*")}, "matches an oci_mirror or provider block"},
		"kept not required": {map[string]string{config.FileName: readFile(t, dir, config.FileName) + "provider \"example.com/acme/tiny\" {\n  source = \"./tiny\"\n}\n"},
			"is kept as source but the configuration does not require it"},
		"broken lock":  {map[string]string{config.LockFileName: "provider {"}, "fix or delete the lock file"},
		"broken .tf":   {map[string]string{"bad.tf": "terraform {"}, "bad.tf"},
		"bad template": {map[string]string{config.FileName: strings.ReplaceAll(readFile(t, dir, config.FileName), "/providers/", "/UPPER/")}, "repository_template gives"},
	} {
		d := t.TempDir()
		for _, name := range []string{config.FileName, "main.tf", config.LockFileName} {
			testfix.WriteFiles(t, d, map[string]string{name: readFile(t, dir, name)})
		}
		for f, content := range c.files {
			if content == "" {
				os.Remove(filepath.Join(d, f))
				continue
			}
			testfix.WriteFiles(t, d, map[string]string{f: content})
		}
		if _, err := loader.Open(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestLockAll(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	dir := w.project(t, map[string]string{"hello": "~> 1.0", "other": ">= 0.1"}, randomBlock)
	changes, err := open(t, dir).LockAll(ctx, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 {
		t.Fatalf("changes %+v", changes)
	}
	n := len(testfix.Platforms())
	if c := changes[0]; c.Addr != hello || c.Version != "1.1.0" || c.Previous != "" || c.Platforms != n || c.Hashes != 2*n {
		t.Errorf("hello: %+v, want 1.1.0 (the newest ~> 1.0) with %d platforms", c, n)
	}
	if c := changes[1]; c.Addr != other || c.Version != "0.1.0" {
		t.Errorf("other: %+v", c)
	}
	e := readLock(t, dir, hello)
	if e == nil || e.Version != "1.1.0" || e.Constraints != "~> 1.0" || !slices.Equal(e.Hashes, w.rels["hello"]["1.1.0"].LockHashes()) {
		t.Errorf("lock entry %+v, want every platform's h1: and zh: of 1.1.0 %v", e, w.rels["hello"]["1.1.0"].LockHashes())
	}
	if !strings.HasPrefix(readFile(t, dir, config.LockFileName), randomBlock) {
		t.Errorf("the entry oprov does not manage changed:\n%s", readFile(t, dir, config.LockFileName))
	}

	// A locked version that still meets the constraints stays, unless upgrading.
	testfix.WriteFiles(t, dir, map[string]string{config.LockFileName: randomBlock + lockBlock(hello, "1.0.0", "~> 1.0", "h1:stale=")})
	changes, err = open(t, dir).LockAll(ctx, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	if changes[0].Version != "1.0.0" || changes[0].Previous != "" {
		t.Errorf("kept: %+v", changes[0])
	}
	if e := readLock(t, dir, hello); !slices.Equal(e.Hashes, w.rels["hello"]["1.0.0"].LockHashes()) {
		t.Errorf("the kept version's hashes were not refreshed: %v", e.Hashes)
	}
	opts := w.opts()
	opts.Upgrade = true
	changes, err = open(t, dir).LockAll(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if changes[0].Version != "1.1.0" || changes[0].Previous != "1.0.0" {
		t.Errorf("upgrade: %+v", changes[0])
	}

	// Named platforms only.
	opts = w.opts()
	linux := manifest.Platform{OS: "linux", Arch: "amd64"}
	opts.Platforms = []manifest.Platform{linux}
	changes, err = open(t, dir).LockAll(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	rel := w.rels["hello"]["1.1.0"]
	if e := readLock(t, dir, hello); changes[0].Platforms != 1 || !slices.Equal(e.Hashes, []string{rel.H1(linux), rel.ZH(linux)}) {
		t.Errorf("one platform: %+v, hashes %v", changes[0], e.Hashes)
	}
}

func TestLockAllRefusals(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	dir := w.project(t, map[string]string{"hello": ">= 5.0"}, "")
	_, err := open(t, dir).LockAll(ctx, w.opts())
	if err == nil || !strings.Contains(err.Error(), `meets ">= 5.0"`) || !strings.Contains(err.Error(), "1.0.0") || !strings.Contains(err.Error(), "2.0.0") {
		t.Errorf("no version meets: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, config.LockFileName)); err == nil {
		t.Error("a failed lock wrote the lock file")
	}

	// A version not signed by the trusted key is not locked.
	w.repos["hello"].Push(t, testfix.NewRelease(t, "hello", "3.0.0"))
	dir = w.project(t, map[string]string{"hello": "~> 3.0"}, "")
	if _, err := open(t, dir).LockAll(ctx, w.opts()); err == nil || !strings.Contains(err.Error(), "3.0.0") ||
		!strings.Contains(err.Error(), "pin a version") || !strings.Contains(err.Error(), "ask the publisher of "+w.reg.Host+"/providers/acme/hello") {
		t.Errorf("an unsigned version: %v, want what to pin and whom to ask", err)
	}
	if _, err := os.Stat(filepath.Join(dir, config.LockFileName)); err == nil {
		t.Error("a refused version was locked")
	}
}

// An index with no h1: annotations is locked from its zips, hashed as they are fetched.
func TestLockWithoutH1Annotations(t *testing.T) {
	w := newWorld(t)
	rel := testfix.NewRelease(t, "bare", "1.0.0")
	honest := rel.LockHashes()
	for _, p := range testfix.Platforms() {
		rel.LieAboutH1(p, "")
	}
	w.push(t, rel)
	dir := w.project(t, map[string]string{"bare": "1.0.0"}, "")
	if _, err := open(t, dir).LockAll(context.Background(), w.opts()); err != nil {
		t.Fatal(err)
	}
	if e := readLock(t, dir, "example.com/acme/bare"); !slices.Equal(e.Hashes, honest) {
		t.Errorf("hashes %v, want %v", e.Hashes, honest)
	}
}

// TestLockSkipsVersionsThePolicyRefuses: the version locked is the newest that meets the
// constraints and passes the policy, as 'oprov serve' offers; the newer one refused is named on
// the log with why.
func TestLockSkipsVersionsThePolicyRefuses(t *testing.T) {
	w := newWorld(t)
	w.repos["hello"].Push(t, testfix.NewRelease(t, "hello", "1.2.0")) // unsigned
	dir := w.project(t, map[string]string{"hello": "~> 1.0"}, "")
	var log strings.Builder
	opts := w.opts()
	opts.Log = &log
	changes, err := open(t, dir).LockAll(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if changes[0].Version != "1.1.0" {
		t.Errorf("locked %s, want 1.1.0 (1.2.0 is not signed)", changes[0].Version)
	}
	if !strings.Contains(log.String(), "chose 1.1.0; skipped the newer 1.2.0: not signed") {
		t.Errorf("the log does not say why 1.2.0 was skipped: %q", log.String())
	}
}
