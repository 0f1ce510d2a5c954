package loader_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

func TestFetchRef(t *testing.T) {
	ctx := context.Background()
	host := testfix.Host()
	key := testfix.SharedKey(t, 0)
	repo := testfix.Layout(t, filepath.Join(t.TempDir(), "layout"))
	signed, unsigned := testfix.NewRelease(t, "hello", "1.2.0"), testfix.NewRelease(t, "hello", "1.3.0")
	idx := repo.PushSigned(t, signed, key)
	repo.Push(t, unsigned)
	addr := testfix.Addr(t, "example.com/acme/hello")
	policy := testfix.Policy(sign.ModeEnforce, key)
	opts := loader.Options{Cache: testfix.Cache(t)}

	exe, err := loader.FetchRef(ctx, repo.Ref.WithReference("1.2.0"), addr, policy, opts)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(exe); string(data) != testfix.ExecutableContent("hello", "1.2.0", host) {
		t.Errorf("%s holds %q", exe, data)
	}
	// By digest: the version is read from the zip's name.
	byDigest, err := loader.FetchRef(ctx, repo.Ref.WithReference(idx.Digest.String()), addr, policy, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(byDigest, string(filepath.Separator)+"1.2.0"+string(filepath.Separator)) {
		t.Errorf("by digest: %s names no version 1.2.0", byDigest)
	}
	// Unsigned: refused under the policy, and nothing of it unpacked; fetched with none.
	if _, err := loader.FetchRef(ctx, repo.Ref.WithReference("1.3.0"), addr, policy, opts); err == nil {
		t.Error("an unsigned version passed the policy")
	}
	for _, p := range unpacked(t, opts.Cache.Dir) {
		if strings.Contains(p, "1.3.0") {
			t.Errorf("unpacked after a refusal: %s", p)
		}
	}
	if _, err := loader.FetchRef(ctx, repo.Ref.WithReference("1.3.0"), addr, nil, opts); err != nil {
		t.Errorf("with no policy: %v", err)
	}
	// A cached zip changed on disk is not unpacked under another name.
	zips := testfix.FilesWithDigest(t, opts.Cache.Dir, signed.Zip(host))
	if len(zips) != 1 {
		t.Fatalf("zip cached %d times", len(zips))
	}
	bad, err := os.ReadFile(unsigned.ZipPath(host))
	if err != nil {
		t.Fatal(err)
	}
	testfix.Overwrite(t, zips[0], bad)
	renamed := testfix.Addr(t, "example.com/other/hello")
	opts.Cache = testfix.Reopen(t, opts.Cache) // the next command
	if exe, err := loader.FetchRef(ctx, repo.Ref.WithReference("1.2.0"), renamed, policy, opts); err == nil {
		if data, _ := os.ReadFile(exe); string(data) != testfix.ExecutableContent("hello", "1.2.0", host) {
			t.Errorf("the changed zip was unpacked: %q", data)
		}
	} else if !strings.Contains(err.Error(), "changed on disk") {
		t.Errorf("the refusal does not say what happened: %v", err)
	}
}

func TestLaunchables(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go toolchain is needed to build a provider kept as source")
	}
	w := newWorld(t)
	ctx := context.Background()
	host := testfix.Host()
	dir := w.project(t, map[string]string{"hello": "~> 1.0", "tiny": ">= 0.0.0-dev"}, "")
	testfix.GoModule(t, filepath.Join(dir, "tiny"), "tiny")
	mirrorOnly := readFile(t, dir, config.FileName)
	cfg := mirrorOnly + "provider \"example.com/acme/tiny\" {\n  source = \"./tiny\"\n}\n"
	testfix.WriteFiles(t, dir, map[string]string{config.FileName: cfg})

	p := open(t, dir)
	if len(p.Local) != 1 || len(p.Managed) != 1 {
		t.Fatalf("managed %d, local %d", len(p.Managed), len(p.Local))
	}
	ls, err := p.Launchables(ctx, w.opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 {
		t.Fatalf("launchables %+v", ls)
	}
	if l := ls[0]; l.Addr != hello || l.Version != "1.1.0" {
		t.Errorf("managed: %+v", l)
	} else if data, _ := os.ReadFile(l.Executable); string(data) != testfix.ExecutableContent("hello", "1.1.0", host) {
		t.Errorf("%s holds %q", l.Executable, data)
	}
	if l := ls[1]; l.Addr != "example.com/acme/tiny" || l.Version != source.DevVersion || l.What != "source, built" {
		t.Errorf("kept as source: %+v", l)
	} else if out, err := exec.Command(l.Executable).Output(); err != nil || strings.TrimSpace(string(out)) != "tiny "+source.DevVersion {
		t.Errorf("the built provider printed %q (%v)", out, err)
	}
	// The lock holds the managed provider only.
	if e := readLock(t, dir, "example.com/acme/tiny"); e != nil {
		t.Errorf("a provider kept as source was locked: %+v", e)
	}

	// Members carry the executables.
	for i, m := range loader.Members(ls, plugin.Options{ForReattach: true}) {
		if m.Addr != ls[i].Addr || m.Options.Path != ls[i].Executable {
			t.Errorf("member %d: %+v", i, m)
		}
	}

	// Only kept as source: nothing is installed, the registry is not asked.
	testfix.WriteFiles(t, dir, map[string]string{
		"main.tf": "terraform {\n  required_providers {\n    tiny = { source = \"example.com/acme/tiny\" }\n  }\n}\n",
	})
	before := w.reg.Requests()
	ls, err = open(t, dir).Launchables(ctx, w.opts())
	if err != nil || len(ls) != 1 || ls[0].What != "source, cached build" || w.reg.Requests() != before {
		t.Errorf("local only: %v %+v, %d requests", err, ls, w.reg.Requests()-before)
	}

	// A managed provider that cannot be installed stops the launch.
	testfix.WriteFiles(t, dir, map[string]string{
		config.FileName: mirrorOnly,
		"main.tf":       "terraform {\n  required_providers {\n    hello = { source = \"example.com/acme/hello\", version = \">= 9.0\" }\n  }\n}\n",
	})
	if _, err := open(t, dir).Launchables(ctx, w.opts()); err == nil {
		t.Error("launchables of a provider no version of which meets its constraints")
	}
}
