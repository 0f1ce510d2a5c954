package module

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/progresstest"
)

// world is a configuration calling modules of every remote kind, with the servers that hold them.
type world struct {
	dir  string
	reg  *registry
	git  *gitRepos
	net  string // the git module's commit
	opts Options
}

const netTF = `terraform {
  required_providers {
    random = { source = "hashicorp/random", version = ">= 3.0.0" }
  }
}
output "id" { value = "net" }
`

func newWorld(t *testing.T) *world {
	w := &world{dir: t.TempDir(), reg: newRegistry(t), git: newGitRepos(t)}
	w.net = w.git.commit(t, "net.git", "v1.0.0", map[string]string{"main.tf": netTF, "sub/x.tf": "# sub\n"})
	gitSrc := "git::" + w.git.url("net.git") + "?ref=v1.0.0"
	vpc := func(v string) map[string]string {
		return map[string]string{
			"main.tf": `terraform {
  required_providers {
    null = { source = "hashicorp/null", version = "~> 3.2" }
  }
}
module "net" {
  source = "` + gitSrc + `"
}
module "inner" {
  source = "./inner"
}
output "v" { value = "` + v + `" }
`,
			"inner/main.tf": "output \"inner\" { value = 1 }\n",
		}
	}
	host := w.reg.host()
	w.reg.set(func() {
		w.reg.versions["acme/vpc/aws"] = []string{"1.0.0", "1.1.0", "2.0.0"}
		for _, v := range []string{"1.0.0", "1.1.0", "2.0.0"} {
			w.reg.files["/archives/vpc-"+v+".tar.gz"] = tarGz(t, vpc(v))
		}
		w.reg.location["acme/vpc/aws/1.0.0"] = "/archives/vpc-1.0.0.tar.gz"
		w.reg.location["acme/vpc/aws/1.1.0"] = "../../../../../../archives/vpc-1.1.0.tar.gz"
		w.reg.location["acme/vpc/aws/2.0.0"] = "https://" + host + "/archives/vpc-2.0.0.tar.gz"
		w.reg.files["/archives/web.zip"] = zipOf(t, map[string]string{"main.tf": `terraform {
  required_providers {
    thing = { source = "example.com/acme/thing" }
  }
}
`})
	})
	writeTree(t, w.dir, map[string]string{
		"main.tf": `module "vpc" {
  source  = "` + host + `/acme/vpc/aws"
  version = "~> 1.0"
}
module "net" {
  source = "` + gitSrc + `"
}
module "app" {
  source = "./app"
}
`,
		"app/main.tf": `module "web" {
  source = "https://` + host + `/archives/web.zip"
}
`,
	})
	w.opts = Options{HTTP: w.reg.srv.Client()}
	return w
}

func (w *world) walk(t *testing.T) (*Tree, error) {
	t.Helper()
	return Walk(context.Background(), w.dir, w.opts)
}

func byKey(tr *Tree) map[string]*Resolved {
	m := map[string]*Resolved{}
	for _, r := range tr.Modules {
		m[r.Key] = r
	}
	return m
}

func TestWalkResolvesEveryKind(t *testing.T) {
	w := newWorld(t)
	tr, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	m := byKey(tr)
	var keys []string
	for _, r := range tr.Modules {
		keys = append(keys, r.Key)
	}
	if got := strings.Join(keys, " "); got != "vpc vpc.net net app.web" {
		t.Fatalf("modules %q, want callers before callees in file order", got)
	}
	if v := m["vpc"].Version; v != "1.1.0" {
		t.Errorf("vpc version %s, want 1.1.0 (the newest meeting ~> 1.0)", v)
	}
	if m["net"].Version != w.net || m["vpc.net"].Version != w.net {
		t.Errorf("git commits %s %s, want %s", m["net"].Version, m["vpc.net"].Version, w.net)
	}
	if m["vpc"].Call != "module.vpc" || m["vpc.net"].Call != "module.vpc.module.net" || m["app.web"].Call != "module.app.module.web" {
		t.Errorf("calls %s %s %s", m["vpc"].Call, m["vpc.net"].Call, m["app.web"].Call)
	}
	for _, r := range tr.Modules {
		if !strings.HasPrefix(r.H1, "h1:") || !strings.HasPrefix(r.ZH, "zh:") || len(r.Zip) == 0 {
			t.Errorf("%s: hashes %q %q, %d zip bytes", r.Key, r.H1, r.ZH, len(r.Zip))
		}
		if r.Range.Filename == "" || r.Range.Start.Line == 0 {
			t.Errorf("%s: no call range", r.Key)
		}
	}
	if n := w.git.fetches.Load(); n != 1 {
		t.Errorf("the git module was fetched %d times, want once a walk", n)
	}
	if n := w.reg.hits["/.well-known/terraform.json"]; n != 1 {
		t.Errorf("discovery ran %d times", n)
	}
	if m["net"].H1 != m["vpc.net"].H1 {
		t.Errorf("the same git module hashes differently: %s %s", m["net"].H1, m["vpc.net"].H1)
	}
	for _, p := range []string{"registry.opentofu.org/hashicorp/random", "registry.opentofu.org/hashicorp/null", "example.com/acme/thing"} {
		if tr.Requirements[p] == nil {
			t.Errorf("no requirement of %s (remote modules' required_providers count)", p)
		}
	}
	if m["vpc"].Requires["registry.opentofu.org/hashicorp/null"] == nil || m["vpc"].Requires["registry.opentofu.org/hashicorp/random"] != nil {
		t.Errorf("vpc's own requirements: %v", m["vpc"].Requires)
	}
}

func TestLockKeepsAndInstalls(t *testing.T) {
	w := newWorld(t)
	tr, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := ReadLock(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	lock.Record(tr)
	if err := lock.Write(); err != nil {
		t.Fatal(err)
	}
	// A newer 1.x appears: the lock keeps 1.1.0; -upgrade takes 1.2.0.
	w.reg.set(func() {
		w.reg.versions["acme/vpc/aws"] = append(w.reg.versions["acme/vpc/aws"], "1.2.0")
		w.reg.location["acme/vpc/aws/1.2.0"] = "/archives/vpc-1.0.0.tar.gz"
	})
	if w.opts.Lock, err = ReadLock(w.dir); err != nil {
		t.Fatal(err)
	}
	again, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	if v := byKey(again)["vpc"].Version; v != "1.1.0" {
		t.Errorf("with the lock, vpc is %s, want the locked 1.1.0", v)
	}
	w.opts.Upgrade = true
	up, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	if v := byKey(up)["vpc"].Version; v != "1.2.0" {
		t.Errorf("upgrading, vpc is %s, want 1.2.0", v)
	}
	if err := Install(context.Background(), w.dir, again); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(w.dir, ".terraform/modules/modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var mj struct{ Modules []manifestRecord }
	if err := json.Unmarshal(data, &mj); err != nil {
		t.Fatal(err)
	}
	recs := map[string]manifestRecord{}
	for _, r := range mj.Modules {
		recs[r.Key] = r
	}
	if r := recs["vpc"]; r.Version != "1.1.0" || r.Source != w.reg.host()+"/acme/vpc/aws" || r.Dir != ".terraform/modules/vpc" {
		t.Errorf("modules.json vpc: %+v", r)
	}
	if r := recs["vpc.net"]; r.Version != "" || !strings.HasPrefix(r.Source, "git::http://") {
		t.Errorf("modules.json vpc.net: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(w.dir, ".terraform/modules/vpc/inner/main.tf")); err != nil {
		t.Errorf("vpc's local module is not installed with it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.dir, ".terraform/modules/net/sub/x.tf")); err != nil {
		t.Errorf("the git module's subdirectory is not installed: %v", err)
	}
}

// lockedWorld is a world whose lock records every module.
func lockedWorld(t *testing.T) *world {
	w := newWorld(t)
	tr, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ReadLock(w.dir)
	l.Record(tr)
	if err := l.Write(); err != nil {
		t.Fatal(err)
	}
	w.opts.Lock, _ = ReadLock(w.dir)
	return w
}

// refused walks and wants an error of kind want that names each of parts.
func refused(t *testing.T, w *world, want error, parts ...string) {
	t.Helper()
	_, err := w.walk(t)
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the error does not name %q: %v", p, err)
		}
	}
}

func TestLocksHold(t *testing.T) {
	t.Run("registry serves other bytes for the same version", func(t *testing.T) {
		w := lockedWorld(t)
		e := w.opts.Lock.Entries["vpc"]
		w.reg.set(func() {
			w.reg.files["/archives/vpc-1.1.0.tar.gz"] = tarGz(t, map[string]string{"main.tf": "output \"evil\" { value = 1 }\n"})
		})
		refused(t, w, ErrLockMismatch, "module.vpc", "main.tf:1", w.reg.host()+"/acme/vpc/aws", e.Hashes[0], e.Hashes[1], "got h1:")
	})
	t.Run("git tag moved", func(t *testing.T) {
		w := lockedWorld(t)
		moved := w.git.commit(t, "net.git", "v1.0.0", map[string]string{"evil.tf": "# moved\n"})
		e := w.opts.Lock.Entries["vpc.net"]
		refused(t, w, ErrLockMismatch, "module.vpc.module.net", w.net, moved, e.Hashes[0], e.Hashes[1])
	})
	t.Run("archive with ../ entries", func(t *testing.T) {
		w := lockedWorld(t)
		w.reg.set(func() {
			w.reg.files["/archives/vpc-1.1.0.tar.gz"] = tarGz(t, map[string]string{"main.tf": "", "../../escape.tf": "x"})
		})
		e := w.opts.Lock.Entries["vpc"]
		refused(t, w, errUnsafeArchive, "module.vpc", "../../escape.tf", "sha256:", e.Hashes[0])
		if _, err := os.Stat(filepath.Join(filepath.Dir(w.dir), "escape.tf")); err == nil {
			t.Error("the entry escaped")
		}
	})
	t.Run("constraint the lock no longer meets", func(t *testing.T) {
		w := lockedWorld(t)
		src, _ := os.ReadFile(filepath.Join(w.dir, "main.tf"))
		writeTree(t, w.dir, map[string]string{"main.tf": strings.Replace(string(src), "~> 1.0", ">= 2.0.0", 1)})
		refused(t, w, errUpgrade, "module.vpc", "1.1.0", "--upgrade")
	})
	t.Run("git ref changed", func(t *testing.T) {
		w := lockedWorld(t)
		w.git.commit(t, "net.git", "v1.1.0", nil)
		src, _ := os.ReadFile(filepath.Join(w.dir, "main.tf"))
		writeTree(t, w.dir, map[string]string{"main.tf": strings.Replace(string(src), "ref=v1.0.0\"\n}\nmodule \"app\"", "ref=v1.1.0\"\n}\nmodule \"app\"", 1)})
		refused(t, w, errUpgrade, "module.net", "ref=v1.1.0", "--upgrade")
	})
}

// TestInstalledModulesNeedNoNetwork: modules installed and matching the lock are taken from
// .terraform/modules with every server gone; a changed installed file is fetched again.
func TestInstalledModulesNeedNoNetwork(t *testing.T) {
	w := lockedWorld(t)
	tr, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := Install(context.Background(), w.dir, tr); err != nil {
		t.Fatal(err)
	}
	w.reg.srv.Close()
	w.git.srv.Close()
	w.opts.Installed = w.dir
	again, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again.Modules {
		if !r.FromInstalled || r.H1 != byKey(tr)[r.Key].H1 {
			t.Errorf("%s: from installed %v, %s", r.Key, r.FromInstalled, r.H1)
		}
	}
	writeTree(t, w.dir, map[string]string{".terraform/modules/vpc/main.tf": "# changed on disk\n"})
	if _, err := w.walk(t); err == nil || !strings.Contains(err.Error(), "module.vpc") {
		t.Fatalf("a changed installed module was kept: %v", err)
	}
}

// TestWalkProgress: archive and zip downloads are reported by bytes, never past what was planned.
func TestWalkProgress(t *testing.T) {
	w := newWorld(t)
	p := &progresstest.PlanCheck{T: t}
	w.opts.Progress = p
	if _, err := w.walk(t); err != nil {
		t.Fatal(err)
	}
	w.reg.mu.Lock()
	want := int64(len(w.reg.files["/archives/vpc-1.1.0.tar.gz"]) + len(w.reg.files["/archives/web.zip"]))
	w.reg.mu.Unlock()
	if planned, done := p.Totals(); done != want || planned != want {
		t.Errorf("progress planned %d, moved %d, want %d", planned, done, want)
	}
}

func TestNonLiteralSources(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"main.tf": "variable \"v\" {}\nmodule \"m\" {\n  source = var.v\n}\n" +
		"module \"gh\" {\n  source = \"github.com/hashicorp/example\"\n}\n" +
		"terraform {\n  required_providers {\n    null = { source = \"hashicorp/null\" }\n  }\n}\n"})
	reqs, remote, err := Local(dir)
	if err != nil || remote != 2 || reqs["registry.opentofu.org/hashicorp/null"] == nil {
		t.Fatalf("Local: %v %d %v", reqs, remote, err)
	}
	var log strings.Builder
	tr, err := Walk(context.Background(), dir, Options{Log: &log})
	if err != nil || len(tr.Modules) != 0 || !strings.Contains(log.String(), "not a literal string") || !strings.Contains(log.String(), "main.tf:2") || !strings.Contains(log.String(), "left to tofu init") || !strings.Contains(log.String(), "module.gh") {
		t.Fatalf("Walk: %v, log %q", err, log.String())
	}
}

// TestGitRefs: ?ref= names a tag, a branch or a commit; none means the default branch.
func TestGitRefs(t *testing.T) {
	g := newGitRepos(t)
	first := g.commit(t, "r.git", "v1", map[string]string{"main.tf": "# one\n"})
	g.git(t, filepath.Join(g.root, "r.git"), "branch", "stable")
	second := g.commit(t, "r.git", "", map[string]string{"main.tf": "# two\n"})
	for ref, want := range map[string]string{"?ref=v1": first, "?ref=stable": first, "?ref=" + first: first, "": second, "?ref=main": second} {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"main.tf": "module \"m\" {\n  source = \"git::" + g.url("r.git") + ref + "\"\n}\n"})
		tr, err := Walk(context.Background(), dir, Options{})
		if err != nil {
			t.Errorf("%q: %v", ref, err)
			continue
		}
		if got := tr.Modules[0].Version; got != want {
			t.Errorf("%q: commit %s, want %s", ref, got, want)
		}
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"main.tf": "module \"m\" {\n  source = \"git::" + g.url("r.git") + "?ref=nope\"\n}\n"})
	if _, err := Walk(context.Background(), dir, Options{}); err == nil || !strings.Contains(err.Error(), `no tag, branch or commit "nope"`) {
		t.Errorf("a missing ref: %v", err)
	}
}

// TestWalkWritesAPackageOnce: an archive is unpacked once, and the files it gave are the tree the
// walk reads on (its dot-entries, which the zip leaves out, removed), not unpacked a second time
// from the zip. Before, every file of every package was written twice.
func TestWalkWritesAPackageOnce(t *testing.T) {
	w := newWorld(t)
	files := map[string]string{".hidden/x.tf": "# left out\n", ".y.tf": "# left out\n"}
	for i := 0; i < 40; i++ {
		files[fmt.Sprintf("f%02d.tf", i)] = fmt.Sprintf("locals {\n  v%02d = %d\n}\n", i, i)
	}
	w.reg.set(func() {
		w.reg.versions["acme/flat/aws"] = []string{"1.0.0"}
		w.reg.files["/archives/flat-1.0.0.tar.gz"] = tarGz(t, files)
		w.reg.location["acme/flat/aws/1.0.0"] = "/archives/flat-1.0.0.tar.gz"
	})
	writeTree(t, w.dir, map[string]string{"main.tf": "module \"flat\" {\n  source  = \"" + w.reg.host() + "/acme/flat/aws\"\n  version = \"1.0.0\"\n}\n"})
	tr, written, err := walk(context.Background(), w.dir, w.opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Modules) != 1 || len(tr.Modules[0].Zip) == 0 {
		t.Fatalf("modules %v, want flat zipped", tr.Modules)
	}
	if written.files != len(files) {
		t.Errorf("the walk wrote %d files for a package of %d: want each written once", written.files, len(files))
	}
	zr, err := zip.NewReader(bytes.NewReader(tr.Modules[0].Zip), int64(len(tr.Modules[0].Zip)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 40 {
		t.Errorf("the zip holds %d files, want the 40 that are no dot-entries", len(zr.File))
	}
}
