package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/doccheck"
	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// docsExampleOrder is the order the documentation's tested examples run in, one working
// directory for all: a page may use what an earlier one made (the tour's dist and infra, the
// signing page's cosign.pub and policy).
var docsExampleOrder = []string{
	"README.md",
	"docs/publishing.md",
	"docs/signing.md",
	"docs/configuration.md",
	"docs/air-gap.md",
	"docs/serve.md",
	"docs/modules.md",
}

// TestDocsExamples runs every sh block of README.md and docs/ marked <!-- doctest --> as the
// reader would: with bash -eu -o pipefail, oprov built from this tree first on PATH, then the
// peers (tofu, terraform, cosign), REGISTRY a TLS distribution registry on 127.0.0.1 trusted
// through SSL_CERT_FILE, and examples/ of this repository in the working directory. Each page's
// blocks are one script; what a script left running in the background is stopped after it.
func TestDocsExamples(t *testing.T) {
	scripts := docScripts(t)
	peers.Require(t, "tofu")
	reg := testreg.Start(t, testreg.Options{})
	work := t.TempDir()
	dir, home := filepath.Join(work, "run"), filepath.Join(work, "home")
	for _, d := range []string{dir, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(repoRoot, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	env := docsEnv(t, home, reg)
	for _, page := range docsExampleOrder {
		script, ok := scripts[page]
		if !ok {
			t.Errorf("%s has no <!-- doctest --> block, but docsExampleOrder lists it", page)
			continue
		}
		if !t.Run(page, func(t *testing.T) { runDocScript(t, dir, env, page, script) }) {
			t.Fatalf("the examples of %s failed; later pages build on them, so they were not run", page)
		}
	}
}

// docScripts reads the doctest blocks of the hand-written pages, one script per page, and checks
// that every page that has some is in docsExampleOrder.
func docScripts(t *testing.T) map[string]string {
	t.Helper()
	pages, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	pages = append(pages, filepath.Join(repoRoot, "README.md"))
	scripts := map[string]string{}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		for _, blk := range doccheck.Parse(string(b)).Blocks {
			if blk.Lang == "sh" && blk.Marker == "doctest" {
				scripts[rel] += "# " + rel + ":" + strconv.Itoa(blk.Line) + "\n" + blk.Text
			}
		}
	}
	for p := range scripts {
		if !slices.Contains(docsExampleOrder, p) {
			t.Errorf("%s has <!-- doctest --> blocks: add it to docsExampleOrder", p)
		}
	}
	return scripts
}

// docsEnv is the environment of a reader who followed the set-up: nothing of this process's
// configuration (XDG directories, TF_*, DOCKER_CONFIG, OPROV_*) leaks in, but Go's caches are
// shared so that packaging examples/hello does not build its dependencies from nothing.
func docsEnv(t *testing.T, home string, reg *testreg.Registry) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	g := strings.Split(strings.TrimSpace(string(out)), "\n")
	return []string{
		"PATH=" + filepath.Dir(oprovBin) + ":" + peers.Dir() + ":" + os.Getenv("PATH"),
		"HOME=" + home, "TMPDIR=" + os.TempDir(), "LANG=C.UTF-8",
		"REGISTRY=" + reg.Host, "SSL_CERT_FILE=" + reg.CAFile,
		"TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"GOCACHE=" + g[0], "GOMODCACHE=" + g[1], "GOPATH=" + g[2], "GOPROXY=" + g[3], "GOFLAGS=-buildvcs=false",
	}
}

// runDocScript runs one page's script in dir, in a process group of its own that is ended
// afterwards (a server the page started in the background with it).
func runDocScript(t *testing.T, dir string, env []string, page, script string) {
	path := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "out.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eux", "-o", "pipefail", path)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, append(env, "PS4=+ "), log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		time.Sleep(200 * time.Millisecond)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("the examples of %s failed (%v); the last of what they printed (+ lines are the commands):\n%s",
			page, err, tail(string(out), 80))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
