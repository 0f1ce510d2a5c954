// Package tests holds oprov's end-to-end tests: the real oprov binary against real peers (the
// distribution registry, tofu, terraform, cosign) on 127.0.0.1.
package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	oprovBin string // the oprov binary under test, built once by TestMain
	rssWrap  string // tests/testkit/rsswrap, for measuring peak RSS
	repoRoot string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	wd, _ := os.Getwd()
	repoRoot = filepath.Dir(wd)
	dir, err := os.MkdirTemp("", "oprov-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := shareGoCaches(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	oprovBin, rssWrap = filepath.Join(dir, "oprov"), filepath.Join(dir, "rsswrap")
	for out, pkg := range map[string]string{oprovBin: "./cmd/oprov", rssWrap: "./tests/testkit/rsswrap"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir = repoRoot
		// As the README installs it: a static executable (see TestBinaryIsStatic).
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, msg)
			return 1
		}
	}
	code := m.Run()
	stopSSHD()
	for _, d := range []string{helloDir, counterDir, recorderCache, hostileCache, pyDist} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	return code
}

// shareGoCaches sets GOCACHE, GOMODCACHE and GOPATH, where they are not set, to what go uses
// now, for this process and every child. Tests give oprov a HOME of their own; a provider oprov
// builds from source (go build) would otherwise compile every dependency from nothing, in a
// build cache and a module cache under that HOME, and download every module again (about six
// minutes for TestOneRegistrationPerName alone on the 2-core machine). Go's caches are keyed by
// content, so sharing them changes no result.
func shareGoCaches() error {
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH"}
	out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		return fmt.Errorf("go env: %w", err)
	}
	values := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(values) != len(names) {
		return fmt.Errorf("go env %s gave %q", strings.Join(names, " "), out)
	}
	for i, name := range names {
		if os.Getenv(name) == "" && values[i] != "" {
			if err := os.Setenv(name, values[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// result is what one oprov run did.
type result struct {
	Stdout, Stderr string
	Code           int
}

// oprov runs the oprov binary with extra environment variables ("K=V") and arguments.
func oprov(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(oprovBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running oprov: %v", err)
	}
	return r
}

// mustOprov runs oprov and fails the test unless it exits 0.
func mustOprov(t testing.TB, env []string, args ...string) result {
	t.Helper()
	r := oprov(t, env, args...)
	if r.Code != 0 {
		t.Fatalf("oprov %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r
}

func decodeJSON(t testing.TB, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decoding JSON output: %v\n%s", err, s)
	}
}

// helloPlatforms are the platforms the tests build examples/hello for: the host's (which tofu
// installs) and two others.
var helloPlatforms = func() []string {
	host := runtime.GOOS + "_" + runtime.GOARCH
	out := []string{host}
	for _, p := range []string{"linux_amd64", "darwin_arm64", "windows_amd64"} {
		if p != host && len(out) < 3 {
			out = append(out, p)
		}
	}
	return out
}()

var (
	helloOnce   sync.Once
	helloDir    string
	helloErr    error
	helloHashes = map[string]packagedHashes{} // by platform
)

type packagedHashes struct {
	Platform string `json:"platform"`
	ZH       string `json:"zh"`
	H1       string `json:"h1"`
}

// helloRelease packages examples/hello 1.0.0 once per test run and returns its dist directory.
// Tests must not modify it: copy what they change.
func helloRelease(t testing.TB) string {
	t.Helper()
	helloOnce.Do(func() {
		helloDir, helloErr = os.MkdirTemp("", "oprov-hello-dist-")
		if helloErr != nil {
			return
		}
		r := oprov(t, nil, "package", "--go", filepath.Join(repoRoot, "examples", "hello"), "--version", "1.0.0",
			"--platform", strings.Join(helloPlatforms, ","), "--out-dir", helloDir, "-o", "json")
		if r.Code != 0 {
			helloErr = fmt.Errorf("oprov package: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			return
		}
		var out struct{ Packages []packagedHashes }
		if helloErr = json.Unmarshal([]byte(r.Stdout), &out); helloErr != nil {
			return
		}
		for _, p := range out.Packages {
			helloHashes[p.Platform] = p
		}
	})
	if helloErr != nil {
		t.Fatal(helloErr)
	}
	return helloDir
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// exec_with_stdin runs oprov with the given standard input.
func exec_with_stdin(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(oprovBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	counterOnce sync.Once
	counterDir  string
	counterErr  error
)

// counterRelease packages examples/counter (protocol 5) 1.0.0 for this machine, once.
func counterRelease(t testing.TB) string {
	t.Helper()
	counterOnce.Do(func() {
		if counterDir, counterErr = os.MkdirTemp("", "oprov-counter-dist-"); counterErr != nil {
			return
		}
		r := oprov(t, nil, "package", "--go", filepath.Join(repoRoot, "examples", "counter"), "--version", "1.0.0",
			"--platform", helloPlatforms[0], "--out-dir", counterDir)
		if r.Code != 0 {
			counterErr = fmt.Errorf("oprov package: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})
	if counterErr != nil {
		t.Fatal(counterErr)
	}
	return counterDir
}
