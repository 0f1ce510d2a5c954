package plugin

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/sandbox"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "terraform-provider-bad")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Each kind of bad executable gets a clear error within the start timeout.
func TestBadExecutables(t *testing.T) {
	const timeout = 2 * time.Second
	cases := []struct {
		name, body string
		want       []string
	}{
		{"exits at once", "echo 'no such thing' >&2\nexit 3\n", []string{"exit status 3", "no such thing"}},
		{"prints garbage", "echo 'hello there, I am not a plugin'\nsleep 5\n", []string{"garbled the plugin handshake", "hello there"}},
		{"hangs", "sleep 30\n", []string{"no handshake within the start timeout"}},
		{"speaks only protocol 4", "echo \"1|4|unix|/tmp/oprov-nothing.sock|grpc|\"\nsleep 5\n", []string{"protocol oprov does not", "5 and 6"}},
		{"crashes with a message", "echo 'panic: runtime error: boom' >&2\nexit 2\n", []string{"exit status 2", "panic: runtime error: boom"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			p, err := Start(context.Background(), Options{Path: script(t, tc.body), StartTimeout: timeout})
			took := time.Since(start)
			if err == nil {
				p.Stop(context.Background())
				t.Fatal("a bad executable started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if took > timeout+3*time.Second {
				t.Errorf("took %v, well over the %v start timeout", took, timeout)
			}
		})
	}
	if _, err := Start(context.Background(), Options{Path: filepath.Join(t.TempDir(), "missing")}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing executable: %v", err)
	}
	notExec := filepath.Join(t.TempDir(), "f")
	os.WriteFile(notExec, []byte("x"), 0o644)
	if _, err := Start(context.Background(), Options{Path: notExec}); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Errorf("non-executable: %v", err)
	}
}

// With Open, the provider runs from the descriptor Open gave (an ELF executable): a file put in
// its path's place after Open does not run; under a sandbox too, where the exec step is handed
// the descriptor and execs it.
func TestStartRunsTheOpenedExecutable(t *testing.T) {
	t.Run("unsandboxed", func(t *testing.T) { testRunsOpened(t, nil) })
	t.Run("sandboxed", func(t *testing.T) {
		// The exec step with no Landlock or seccomp (best effort): what is run, not how it is
		// confined, is what this checks; the confined run is tests' TestSandbox*.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		testRunsOpened(t, func(o *Options) {
			o.Sandbox, o.SandboxExec = &sandbox.Spec{Name: "test", BestEffort: true, Env: []string{"PATH"}}, self
		})
	})
}

func testRunsOpened(t *testing.T, sandboxed func(*Options)) {
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo program")
	}
	data, err := os.ReadFile(echo)
	if err != nil || !bytes.HasPrefix(data, []byte("\x7fELF")) {
		t.Skip("echo is not an ELF executable here")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "terraform-provider-pinned")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "swapped-ran")
	open := func() (*os.File, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		swap := filepath.Join(dir, "swap")
		os.WriteFile(swap, []byte("#!/bin/sh\necho swapped > '"+marker+"'\n"), 0o755)
		return f, os.Rename(swap, path)
	}
	opts := Options{Path: path, Args: []string{"the-opened-bytes"}, Open: open, StartTimeout: 5 * time.Second}
	if sandboxed != nil {
		sandboxed(&opts)
	}
	p, err := Start(context.Background(), opts)
	if err == nil {
		p.Stop(context.Background())
		t.Fatal("echo started as a provider")
	}
	if _, serr := os.Stat(marker); serr == nil {
		t.Fatalf("the file put in place after Open ran: %v", err)
	}
	if runtime.GOOS == "linux" && !strings.Contains(err.Error(), "the-opened-bytes") {
		t.Errorf("the opened executable did not run: %v", err)
	}
}
