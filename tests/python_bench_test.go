package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/tests/testkit/peers"
)

// extractProvider unpacks a release zip for this machine and returns its executable.
func extractProvider(b testing.TB, zipPath, exe string) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "pkg")
	if err := unzipTo(zipPath, dir); err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, exe)
}

// timeGroupStart is how long one provider takes from launch to ready as oprov launches it: in a
// launch group for oprov run (reattach, with the relay for a provider serving TLS on its own),
// or with automatic mutual TLS as oprov schema does.
func timeGroupStart(b *testing.B, exe string, reattach bool) time.Duration {
	ctx := context.Background()
	start := time.Now()
	g, err := plugin.StartGroup(ctx, []plugin.Member{{Addr: "example.com/acme/x", Options: plugin.Options{Path: exe, ForReattach: reattach}}})
	if err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	g.Stop()
	return d
}

// BenchmarkPythonLaunch compares launch-to-ready of pyhello (the packaged launcher, CPython and
// the tf SDK) with examples/hello (Go), both from their release zips for this machine.
func BenchmarkPythonLaunch(b *testing.B) {
	host := runtime.GOOS + "_" + runtime.GOARCH
	hello := extractProvider(b, filepath.Join(helloRelease(b), "terraform-provider-hello_1.0.0_"+host+".zip"), "terraform-provider-hello_v1.0.0")
	pyDir, _ := pyhelloRelease(b)
	py := extractProvider(b, filepath.Join(pyDir, "terraform-provider-pyhello_1.0.0_"+host+".zip"), "terraform-provider-pyhello_v1.0.0")
	rounds := max(b.N, 10)
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		for _, reattach := range []bool{true, false} {
			for name, exe := range map[string]string{"hello": hello, "pyhello": py} {
				key := fmt.Sprintf("%s/%v", name, reattach)
				times[key] = append(times[key], timeGroupStart(b, exe, reattach))
			}
		}
	}
	b.StopTimer()
	fmt.Printf("\nlaunch to ready, %d rounds (median):\n", rounds)
	for _, mode := range []struct {
		reattach bool
		label    string
	}{{true, "as oprov run (reattach; pyhello through the proxy)"}, {false, "as oprov schema (automatic mTLS)"}} {
		h, p := median(times[fmt.Sprintf("hello/%v", mode.reattach)]), median(times[fmt.Sprintf("pyhello/%v", mode.reattach)])
		fmt.Printf("  examples/hello %8s   pyhello %8s   ratio %.1fx   [%s]\n", h.Round(100*time.Microsecond), p.Round(time.Millisecond), float64(p)/float64(h), mode.label)
		if mode.reattach {
			b.ReportMetric(float64(p.Milliseconds()), "ms-pyhello-launch")
		}
	}
}

// installProviderDevMode installs pyhello the way the tf SDK documents: the project into a venv,
// then tf.runner.install_provider zips its console script into a plugin directory. It returns
// that directory.
func installProviderDevMode(b *testing.B, env []string) string {
	b.Helper()
	work := b.TempDir()
	venv, plugins := filepath.Join(work, "venv"), filepath.Join(work, "plugins")
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	// pip builds in the tree it is given (build/, *.egg-info): give it a copy, so the example is
	// left as it is for the tests that check that building leaves nothing in a project.
	src := filepath.Join(work, "pyhello")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(repoRoot, "examples", "pyhello"))); err != nil {
		b.Fatal(err)
	}
	run("python3", "-m", "venv", venv)
	run(filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "-q", src)
	run(filepath.Join(venv, "bin", "python"), "-c", `import sys; from pathlib import Path; from tf.runner import install_provider
install_provider("example.com", "acme", "pyhello", "1.0.0", Path(sys.argv[1]), Path(sys.argv[2]))`, plugins, filepath.Join(venv, "bin", "terraform-provider-pyhello"))
	return plugins
}

// BenchmarkPythonRunPlan compares `oprov run -- tofu plan` with pyhello kept as source (venv in
// the cache, launched by oprov, handed over through the relay) with plain `tofu plan` on the same
// configuration initialised from pyhello installed by tf's install_provider (tofu launches it).
func BenchmarkPythonRunPlan(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	env := append(pyEnv(b), "OPROV_CACHE_DIR="+filepath.Join(b.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME="+b.TempDir())
	src := b.TempDir()
	if err := os.CopyFS(filepath.Join(src, "providers", "pyhello"), os.DirFS(filepath.Join(repoRoot, "examples", "pyhello"))); err != nil {
		b.Fatal(err)
	}
	writeFile(b, filepath.Join(src, "main.tf"), pyConfig)
	writeFile(b, filepath.Join(src, "oprov.hcl"), "provider \"example.com/acme/pyhello\" {\n  source = \"./providers/pyhello\"\n}\n")
	mustOprov(b, env, "run", "-C", src, "--", tofu, "apply", "-auto-approve", "-input=false")

	dev := b.TempDir()
	writeFile(b, filepath.Join(dev, "main.tf"), pyConfig)
	mustTofu(b, tofu, dev, env, "init", "-input=false", "-plugin-dir="+installProviderDevMode(b, env))
	mustTofu(b, tofu, dev, env, "apply", "-auto-approve", "-input=false")
	rounds := max(b.N, 7)
	var plain, run []time.Duration
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		plain = append(plain, timeCmdIn(b, dev, env, tofu, "plan", "-input=false"))
		run = append(run, timeCmd(b, env, oprovBin, "run", "-C", src, "--", tofu, "plan", "-input=false"))
	}
	b.StopTimer()
	ratio := float64(median(run)) / float64(median(plain))
	b.ReportMetric(ratio, "x-install-provider-plan")
	fmt.Printf("\nplan of pyhello, %d rounds (median):\n", rounds)
	fmt.Printf("  tofu plan (install_provider package) %8s   oprov run -- tofu plan (kept as source) %8s   ratio %.2fx\n",
		median(plain).Round(time.Millisecond), median(run).Round(time.Millisecond), ratio)
}

// pythonFor finds CPython minor version v (python3.X on PATH, else in pyenv's versions) and
// gives the interpreter's real path.
func pythonFor(b testing.TB, v string) string {
	b.Helper()
	var candidates []string
	if p, err := exec.LookPath("python" + v); err == nil {
		candidates = append(candidates, p)
	}
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		root = filepath.Join(os.Getenv("HOME"), ".pyenv")
	}
	found, _ := filepath.Glob(filepath.Join(root, "versions", v+".*", "bin", "python"+v))
	for _, p := range append(candidates, found...) {
		// The interpreter's own path, not a pyenv shim (a shell script that costs ~100 ms a start).
		out, err := exec.Command(p, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)").Output()
		if got, exe, _ := strings.Cut(strings.TrimSpace(string(out)), " "); err == nil && got == v && exe != "" {
			return exe
		}
	}
	peers.Missing(b, "CPython "+v+" (python"+v+" on PATH or in pyenv)")
	return ""
}

// timeHandshake starts exe with env and gives the time until its plugin handshake line (a line
// with "|", as go-plugin reads it) is on its stdout; the provider is then killed.
func timeHandshake(b testing.TB, env []string, exe string) time.Duration {
	b.Helper()
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), "PLUGIN_PROTOCOL_VERSIONS=6", "TF_PLUGIN_MAGIC_COOKIE=d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Count(sc.Text(), "|") >= 4 {
			return time.Since(start)
		}
	}
	b.Fatalf("%s gave no handshake line (stderr %q)", exe, stderr.String())
	return 0
}

// BenchmarkPythonPackagedVsVenv times launch to handshake of pyhello packaged (the launcher, run
// with each CPython version in turn) against the same project pip-installed into a venv of that
// version (the form `oprov run` builds for a provider kept as source), side by side in one run,
// after one warm-up launch of each (the packaged form compiles its bytecode into the user's
// cache then; pip compiled the venv's when installing). Target: packaged at most 1.2x venv.
func BenchmarkPythonPackagedVsVenv(b *testing.B) {
	env := pyEnv(b)
	host := runtime.GOOS + "_" + runtime.GOARCH
	pyDir, _ := pyhelloRelease(b)
	packaged := extractProvider(b, filepath.Join(pyDir, "terraform-provider-pyhello_1.0.0_"+host+".zip"), "terraform-provider-pyhello_v1.0.0")
	home := b.TempDir()
	src := filepath.Join(b.TempDir(), "pyhello")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(repoRoot, "examples", "pyhello"))); err != nil {
		b.Fatal(err)
	}
	type form struct{ exe, python string }
	forms := map[string][2]form{}
	for _, v := range pyVersions {
		py := pythonFor(b, v)
		venv := filepath.Join(b.TempDir(), "venv")
		for _, args := range [][]string{{py, "-m", "venv", venv}, {filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "-q", src}} {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %v\n%s", args, err, out)
			}
		}
		forms[v] = [2]form{{packaged, py}, {filepath.Join(venv, "bin", "terraform-provider-pyhello"), ""}}
	}
	launch := func(f form) time.Duration {
		e := []string{"HOME=" + home}
		if f.python != "" {
			e = append(e, "OPROV_PROVIDER_PYTHON="+f.python)
		}
		return timeHandshake(b, e, f.exe)
	}
	for _, v := range pyVersions {
		launch(forms[v][0])
		launch(forms[v][1])
	}
	times := map[string][2][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, v := range pyVersions {
			t := times[v]
			t[0] = append(t[0], launch(forms[v][0]))
			t[1] = append(t[1], launch(forms[v][1]))
			times[v] = t
		}
	}
	b.StopTimer()
	fmt.Printf("\npyhello launch to handshake, %d rounds (median), packaged vs venv, interleaved:\n", b.N)
	fmt.Printf("  %-8s %10s %10s %8s\n", "CPython", "packaged", "venv", "ratio")
	worst := 0.0
	for _, v := range pyVersions {
		p, w := median(times[v][0]), median(times[v][1])
		ratio := float64(p) / float64(w)
		worst = max(worst, ratio)
		fmt.Printf("  %-8s %10s %10s %7.2fx   (target <= 1.2x)\n", v, p.Round(time.Millisecond), w.Round(time.Millisecond), ratio)
	}
	b.ReportMetric(worst, "x-worst-packaged/venv")
}
