package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

type reattachEntry struct {
	Protocol        string
	ProtocolVersion int
	Pid             int
	Test            bool
	Addr            struct{ Network, String string }
}

// recorder wraps a command so that the TF_REATTACH_PROVIDERS it is given, and its pid, are kept
// in files the test reads afterwards.
func recorder(t *testing.T) (dir string, wrap func(args ...string) []string) {
	dir = t.TempDir()
	script := filepath.Join(dir, "record.sh")
	writeFile(t, script, "#!/bin/sh\nprintf '%s' \"$TF_REATTACH_PROVIDERS\" > \""+dir+"/reattach.json\"\necho $$ > \""+dir+"/pid\"\nexec \"$@\"\n")
	os.Chmod(script, 0o755)
	return dir, func(args ...string) []string { return append([]string{script}, args...) }
}

func readReattach(t *testing.T, dir string) map[string]reattachEntry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "reattach.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]reattachEntry
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("TF_REATTACH_PROVIDERS is not JSON: %v\n%s", err, data)
	}
	return m
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// expectGone checks that no provider process and no socket outlived oprov run.
func expectGone(t *testing.T, reattach map[string]reattachEntry, others ...int) {
	t.Helper()
	for addr, r := range reattach {
		if alive(r.Pid) {
			t.Errorf("%s's process %d is still running", addr, r.Pid)
		}
		if r.Addr.Network == "unix" {
			if _, err := os.Stat(r.Addr.String); err == nil {
				t.Errorf("%s's socket %s was left behind", addr, r.Addr.String)
			}
		}
	}
	for _, pid := range others {
		if alive(pid) {
			t.Errorf("process %d is still running", pid)
		}
	}
}

// TestRunHandsProvidersToTofuAndTerraform: oprov run -- tofu apply, then plan with
// -detailed-exitcode, with OpenTofu 1.12 and Terraform 1.5.7; exit codes pass through and
// nothing is left running.
func TestRunHandsProvidersToTofuAndTerraform(t *testing.T) {
	for _, tool := range []struct {
		name, cfg string
		function  bool
	}{{"tofu", helloConfig + helloFunctionOutput, true}, {"terraform", helloConfig, false}} {
		t.Run(tool.name, func(t *testing.T) {
			bin := peers.Require(t, tool.name)
			f := newLoaderFixture(t, withCounter(tool.cfg))
			mustOprov(t, f.env, "push", counterRelease(t), f.reg.Host+"/providers/acme/counter", "--sign", "--key", filepath.Join(f.keys, "cosign.key"))
			env := append(f.env, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
			rec, wrap := recorder(t)

			mustOprov(t, env, append([]string{"run", "-C", f.cfg, "--"}, wrap(bin, "apply", "-auto-approve", "-input=false")...)...)
			ra := readReattach(t, rec)
			if len(ra) != 2 || ra["example.com/acme/hello"].ProtocolVersion != 6 || !ra["example.com/acme/hello"].Test || ra["example.com/acme/counter"].ProtocolVersion != 5 {
				t.Errorf("TF_REATTACH_PROVIDERS: %+v", ra)
			}
			expectGone(t, ra)
			// With oprov run, every tofu command goes through it.
			out := mustOprov(t, env, "run", "-C", f.cfg, "--", bin, "output", "-json")
			var outputs map[string]struct{ Value string }
			decodeJSON(t, out.Stdout, &outputs)
			if outputs["message"].Value != "Hello, oprov!" || outputs["total"].Value != "3" {
				t.Errorf("outputs: %s", out.Stdout)
			}
			if tool.function && outputs["function_message"].Value != "Hello, function!" {
				t.Errorf("function output: %s", out.Stdout)
			}

			r := oprov(t, env, append([]string{"run", "-C", f.cfg, "--"}, wrap(bin, "plan", "-detailed-exitcode", "-input=false")...)...)
			if r.Code != 0 {
				t.Errorf("plan with no changes: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			expectGone(t, readReattach(t, rec))
			data, _ := os.ReadFile(filepath.Join(f.cfg, "main.tf"))
			writeFile(t, filepath.Join(f.cfg, "main.tf"), strings.Replace(string(data), `name = "oprov"`, `name = "changed"`, 1))
			r = oprov(t, env, append([]string{"run", "-C", f.cfg, "--"}, wrap(bin, "plan", "-detailed-exitcode", "-input=false")...)...)
			if r.Code != 2 {
				t.Errorf("plan with changes: exit %d, want 2 passed through\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			if strings.Contains(r.Stderr, "oprov:") {
				t.Errorf("oprov added an error of its own to a passed-through exit code:\n%s", r.Stderr)
			}
			expectGone(t, readReattach(t, rec))
		})
	}
}

// TestRunSIGTERMLeavesNoOrphans: SIGTERM to oprov mid-apply is passed on, and afterwards no
// provider, no tofu and no socket remain.
func TestRunSIGTERMLeavesNoOrphans(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, strings.Replace(helloConfig, `name = "oprov"`, "name  = \"oprov\"\n  delay = \"60s\"", 1))
	env := append(f.env, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	rec, wrap := recorder(t)
	cmd := exec.Command(oprovBin, append([]string{"run", "-C", f.cfg, "--"}, wrap(tofu, "apply", "-auto-approve", "-input=false", "-no-color")...)...)
	cmd.Env = append(os.Environ(), env...)
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until tofu is creating the slow resource.
	sc := bufio.NewScanner(stdout)
	creating := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Creating...") {
			creating = true
			break
		}
	}
	if !creating {
		cmd.Process.Kill()
		t.Fatalf("tofu never started creating the resource:\n%s", stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		cmd.Process.Kill()
		t.Fatal("oprov run did not end within 45s of SIGTERM")
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("an interrupted apply exited 0")
	}
	pidData, _ := os.ReadFile(filepath.Join(rec, "pid"))
	tofuPid, _ := strconv.Atoi(strings.TrimSpace(string(pidData)))
	expectGone(t, readReattach(t, rec), tofuPid)
}

// goPluginLine is a DEBUG or TRACE line go-plugin logs itself (its client's logger, "provider",
// or its stdio stream's, "provider.stdio"), not one of the provider's (provider.EXECUTABLE).
var goPluginLine = regexp.MustCompile(`(?m)^.*\[(?:DEBUG|TRACE)\] provider(?:\.stdio)?: .*$`)

// TestRunSourceProvider: a provider kept as Go source beside the configuration runs with no
// registry; a second run does not rebuild it, and a source edit does.
func TestRunSourceProvider(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	cfg := t.TempDir()
	src := filepath.Join(cfg, "providers", "hello")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(repoRoot, "examples", "hello"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), helloConfig)
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/hello\" {\n  source = \"./providers/hello\"\n}\n")
	env := []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + t.TempDir()}
	apply := []string{"run", "-v", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false"}

	r := mustOprov(t, env, apply...)
	if !strings.Contains(r.Stderr, "(source, built") {
		t.Errorf("first run did not build the provider:\n%s", r.Stderr)
	}
	// -v shows the provider's own lines, not its SDK's request logs: those are for -vv.
	if strings.Contains(r.Stderr, "Served request") {
		t.Errorf("run -v forwarded the provider SDK's request logs:\n%.2000s", r.Stderr)
	}
	// ...and not go-plugin's own DEBUG and TRACE internals (starting the process, its arguments,
	// the stdio stream): those only with OPROV_DEBUG_PLUGIN (checked on the last run below).
	if l := goPluginLine.FindString(r.Stderr); l != "" {
		t.Errorf("run -v printed go-plugin's own line %q", l)
	}
	expectHelloOutputs(t, tofu, cfg, env, false)
	r = mustOprov(t, env, apply...)
	if !strings.Contains(r.Stderr, "(source, cached build") {
		t.Errorf("second run rebuilt an unchanged provider:\n%s", r.Stderr)
	}
	// Edit the source: the greeting changes, so the rebuilt provider must be the one that runs.
	code, _ := os.ReadFile(filepath.Join(src, "provider.go"))
	writeFile(t, filepath.Join(src, "provider.go"), strings.Replace(string(code), `greeting := "Hello"`, `greeting := "Howdy"`, 1))
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(strings.Replace(helloConfig, "  greeting = \"Hello\"\n", "", 1), `name = "oprov"`, `name = "source"`, 1))
	r = mustOprov(t, append(env, "OPROV_DEBUG_PLUGIN=1"), apply...)
	if !strings.Contains(r.Stderr, "(source, built") {
		t.Errorf("an edited provider was not rebuilt:\n%s", r.Stderr)
	}
	if goPluginLine.FindString(r.Stderr) == "" || !strings.Contains(r.Stderr, "Served request") {
		t.Errorf("OPROV_DEBUG_PLUGIN=1 did not show go-plugin's own lines and the SDK's request logs, so the checks above prove nothing:\n%.2000s", r.Stderr)
	}
	var outputs map[string]struct{ Value string }
	tofuJSON(t, tofu, cfg, env, &outputs, "output", "-json")
	if outputs["message"].Value != "Howdy, source!" {
		t.Errorf("after the edit, message = %q, want the edited provider's %q", outputs["message"].Value, "Howdy, source!")
	}
}
