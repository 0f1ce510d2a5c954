package tests

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/hostile"
	"github.com/oprov/oprov/tests/testkit/testca"
)

// hostileStall is the stall timeout the hostile tests run oprov with: short, so the suite stays
// fast, and the same knob users turn.
const hostileStall = "2s"

// maxHostileRSS is the memory a refused case may take, in MiB: far below what a 1 TB layer, a
// 5,000-platform graph or an endless tag list would need if read.
const maxHostileRSS = 100

// bounded runs oprov under rsswrap with a deadline (a hang fails the test instead of the suite)
// and gives its result, its peak RSS in MiB and how long it took.
func bounded(t *testing.T, env []string, args ...string) (result, float64, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "rss")
	cmd := exec.CommandContext(ctx, rssWrap, append([]string{out, oprovBin}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	// On the deadline, end oprov too, not only the wrapper.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("oprov %s did not end within 90s: it let the registry hold it\n%s", strings.Join(args, " "), stderr.String())
	}
	r := result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no RSS measured: %v\n%s", err, r.Stderr)
	}
	kib, _ := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	return r, kib / 1024, took
}

// noFilesUnder fails the test if any regular file exists under the given directories, except the
// cache's version records (they hold only what the index said), its evidence (whole manifests,
// each checked against its digest, and where they were found) and its empty lock files.
func noFilesUnder(t *testing.T, dirs ...string) {
	t.Helper()
	sep := string(filepath.Separator)
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && !strings.Contains(p, sep+"versions"+sep) && !strings.Contains(p, sep+"evidence"+sep) && !strings.Contains(p, sep+"locks"+sep) {
				t.Errorf("left on disk: %s", p)
			}
			return nil
		})
	}
}

// hostileCase is one misbehaving registry and what oprov must say about it.
type hostileCase struct {
	name    string
	opts    hostile.Options
	command string // "pull", "inspect" or "install"
	want    []string
	check   func(t *testing.T, f *hostile.Front)
}

var hostileCases = []hostileCase{
	{name: "1 TB layer", opts: hostile.Options{Case: hostile.HugeLayer}, command: "pull",
		want: []string{"is 931.3 GiB, over the maximum package size of 2 GiB", "--max-package-size or OPROV_MAX_PACKAGE_SIZE"},
		check: func(t *testing.T, f *hostile.Front) {
			if n := f.Requests("GET blob"); n != 0 {
				t.Errorf("the 1 TB layer was requested %d times: it must be refused before any byte is fetched", n)
			}
		}},
	{name: "1 TB layer through the loader", opts: hostile.Options{Case: hostile.HugeLayer}, command: "install",
		want: []string{"over the maximum package size of 2 GiB", "OPROV_MAX_PACKAGE_SIZE"},
		check: func(t *testing.T, f *hostile.Front) {
			if n := f.Requests("GET blob"); n != 0 {
				t.Errorf("the 1 TB layer was requested %d times", n)
			}
		}},
	{name: "layer that streams past its size", opts: hostile.Options{Case: hostile.LyingLayer}, command: "pull",
		want: []string{"declared 1048576 bytes", "sent more than that (at least 1048577)", "the registry's copy is corrupt"}},
	{name: "1000-byte blob that streams 50 MB", opts: hostile.Options{Case: hostile.Oversized}, command: "pull",
		want: []string{hostile.ZipDigest(), "declared 1000 bytes", "sent more than that (at least 1001)"}, check: stoppedEarly},
	{name: "1000-byte blob that streams 50 MB, copied", opts: hostile.Options{Case: hostile.Oversized}, command: "copy",
		want: []string{hostile.ZipDigest(), "declared 1000 bytes", "sent more than that (at least 1001)"}, check: stoppedEarly},
	{name: "1000-byte blob with other bytes", opts: hostile.Options{Case: hostile.WrongBytes}, command: "pull",
		want: []string{"declared digest " + hostile.ZipDigest(), "the 1000 bytes the registry 127.0.0.1:", "sent hash to sha256:541b3e9daa09b20bf85fa273e5cbd3e80185aa4ec298e765db87742b70138a53"}},
	{name: "5000-platform index", opts: hostile.Options{Case: hostile.ManyPlatforms}, command: "pull",
		want: []string{"the index lists 5000 platform entries, over the limit of 1000", "OPROV_MAX_PLATFORMS"},
		check: func(t *testing.T, f *hostile.Front) {
			if n := f.Requests("GET manifest"); n != 1 {
				t.Errorf("%d manifest requests: only the index may be fetched", n)
			}
		}},
	{name: "endless tag pagination", opts: hostile.Options{Case: hostile.EndlessTags}, command: "inspect",
		want: []string{"the tag list goes on past 1000 pages", "OPROV_MAX_TAG_PAGES"},
		check: func(t *testing.T, f *hostile.Front) {
			if n := f.Requests("GET tags"); n > 1001 {
				t.Errorf("%d tag pages were read", n)
			}
		}},
	{name: "tag pagination loop", opts: hostile.Options{Case: hostile.LoopingTags}, command: "inspect",
		want: []string{"the registry's tag list repeats itself", "a repeated `last` or Link"},
		check: func(t *testing.T, f *hostile.Front) {
			if n := f.Requests("GET tags"); n != 3 {
				t.Errorf("%d tag pages were read, want 3 (the loop is seen on the third)", n)
			}
		}},
	{name: "accepts and never answers", opts: hostile.Options{Case: hostile.Silent}, command: "pull",
		want: []string{"stopped answering: nothing for 2s during the TLS handshake", "--stall-timeout or OPROV_STALL_TIMEOUT"}},
	{name: "accepts and never answers, through the loader", opts: hostile.Options{Case: hostile.Silent}, command: "install",
		want: []string{"stopped answering: nothing for 2s during the TLS handshake"}},
	{name: "reads the request and never answers", opts: hostile.Options{Case: hostile.Mute}, command: "pull",
		want: []string{"stopped answering: nothing for 2s during the wait for the response headers", "OPROV_STALL_TIMEOUT"}},
	{name: "a byte every second", opts: hostile.Options{Case: hostile.Trickle}, command: "pull",
		want: []string{"stopped answering: only", "byte(s) in 2s during the download of the response body", "OPROV_STALL_TIMEOUT"}},
}

// stoppedEarly: a blob that runs past its declared size is not read to its end.
func stoppedEarly(t *testing.T, f *hostile.Front) {
	if n := f.BlobBytesSent(); n >= 50_000_000 {
		t.Errorf("the front sent all %d bytes: the reader must stop just past the declared size", n)
	} else {
		t.Logf("the front got %d bytes out before the reader stopped", n)
	}
}

// TestHostileRegistries: each misbehaving registry is refused within its bound, with a message
// that names the limit and the knob that raises it, in bounded memory, and with nothing written.
func TestHostileRegistries(t *testing.T) {
	ca := testca.NewCA(t, t.TempDir())
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.CA = ca
			c.opts.OS, c.opts.Arch = runtime.GOOS, runtime.GOARCH
			f := hostile.Start(t, c.opts)
			r, rss, took := runHostile(t, f, ca, c.command)
			t.Logf("%s: exit %d after %s, peak RSS %.1f MiB: %s", c.command, r.Code, took.Round(time.Millisecond), rss, strings.TrimSpace(r.Stderr))
			if r.Code != 1 {
				t.Errorf("exit %d, want 1\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("the error does not say %q:\n%s", w, r.Stderr)
				}
			}
			if rss > maxHostileRSS {
				t.Errorf("peak RSS %.1f MiB, over %d MiB", rss, maxHostileRSS)
			}
			if c.check != nil {
				c.check(t, f)
			}
		})
	}
}

// runHostile runs one command against a front, with a fresh cache and output directory that must
// stay empty.
func runHostile(t *testing.T, f *hostile.Front, ca *testca.CA, command string) (result, float64, time.Duration) {
	t.Helper()
	work := t.TempDir()
	cache, out, cfg := filepath.Join(work, "cache"), filepath.Join(work, "out"), filepath.Join(work, "cfg")
	env := []string{"OPROV_STALL_TIMEOUT=" + hostileStall, "OPROV_CACHE_DIR=" + cache, "SSL_CERT_FILE=" + ca.File, "HOME=" + work}
	repo := f.Host + "/providers/acme/hello"
	var args []string
	switch command {
	case "pull":
		args = []string{"pull", repo + ":1.0.0", "--out-dir", out}
	case "inspect":
		args = []string{"inspect", repo}
	case "copy":
		// Into a layout of its own: the layout store makes its directory (and keeps a failed
		// ingest's temporary file) before any blob arrives; what is checked is the message.
		args = []string{"copy", repo + ":1.0.0", "oci-layout:" + filepath.Join(t.TempDir(), "layout")}
	case "install":
		writeFile(t, filepath.Join(cfg, "main.tf"), helloConfig)
		writeFile(t, filepath.Join(cfg, "oprov.hcl"), strings.ReplaceAll(`oci_mirror {
  repository_template = "%HOST%/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
}
`, "%HOST%", f.Host))
		args = []string{"install", "-C", cfg}
	}
	r, rss, took := bounded(t, env, args...)
	noFilesUnder(t, cache, out)
	if command == "install" {
		entries, _ := os.ReadDir(cfg)
		if len(entries) != 2 {
			t.Errorf("install wrote into the configuration directory: %v", entries)
		}
	}
	return r, rss, took
}

// TestInterruptEndsCommand: Ctrl-C (SIGINT) ends a command that a registry holds (waiting for an
// answer that never comes, or in the middle of an endless download) at once, long before any
// stall timeout, and leaves nothing half-written.
func TestInterruptEndsCommand(t *testing.T) {
	ca := testca.NewCA(t, t.TempDir())
	for _, c := range []struct {
		name    string
		opts    hostile.Options
		command string
		ready   func(f *hostile.Front) bool
	}{
		{"waiting for an answer", hostile.Options{Case: hostile.Mute}, "pull", func(f *hostile.Front) bool { return f.Requests("GET manifest") > 0 }},
		{"in an endless download", hostile.Options{Case: hostile.HugeLayer}, "install", func(f *hostile.Front) bool { return f.BlobBytesSent() > 8<<20 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.CA = ca
			c.opts.OS, c.opts.Arch = runtime.GOOS, runtime.GOARCH
			f := hostile.Start(t, c.opts)
			r, after := interruptWhen(t, f, ca, c.command, c.ready)
			t.Logf("ended %s after SIGINT: exit %d: %s", after.Round(time.Millisecond), r.Code, strings.TrimSpace(r.Stderr))
			if r.Code != 130 || !strings.Contains(r.Stderr, "interrupted") {
				t.Errorf("exit %d, want 130 with 'interrupted':\n%s", r.Code, r.Stderr)
			}
			if strings.Contains(r.Stderr, "stopped answering") {
				t.Errorf("the stall timeout ended it, not the interrupt:\n%s", r.Stderr)
			}
		})
	}
}

// interruptWhen starts a command against a front (stall timeout 10 minutes, packages up to 2 TB),
// sends it SIGINT once ready says the front has it, and waits for it to end.
func interruptWhen(t *testing.T, f *hostile.Front, ca *testca.CA, command string, ready func(*hostile.Front) bool) (result, time.Duration) {
	t.Helper()
	work := t.TempDir()
	cache, out, cfg := filepath.Join(work, "cache"), filepath.Join(work, "out"), filepath.Join(work, "cfg")
	env := []string{"OPROV_STALL_TIMEOUT=10m", "OPROV_MAX_PACKAGE_SIZE=2TB", "OPROV_CACHE_DIR=" + cache, "SSL_CERT_FILE=" + ca.File, "HOME=" + work}
	args := []string{"pull", f.Host + "/providers/acme/hello:1.0.0", "--out-dir", out}
	if command == "install" {
		writeFile(t, filepath.Join(cfg, "main.tf"), helloConfig)
		writeFile(t, filepath.Join(cfg, "oprov.hcl"), "oci_mirror {\n  repository_template = \""+f.Host+"/providers/${namespace}/${type}\"\n  include = [\"example.com/acme/*\"]\n}\n")
		args = []string{"install", "-C", cfg}
	}
	cmd := exec.Command(oprovBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); !ready(f); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the front never got the request it waits for\n%s", stderr.String())
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	sent := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("oprov %s did not end within 60s of SIGINT\n%s", command, stderr.String())
	}
	after := time.Since(sent)
	r := result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	}
	noFilesUnder(t, cache, out)
	return r, after
}
