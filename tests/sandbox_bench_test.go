package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/sandbox"
	"github.com/oprov/oprov/tests/testkit/peers"
)

// BenchmarkSandboxLaunch times launch to handshake of tests/providers/hostile, started directly
// and through oprov's sandbox step (the default sandbox's rules), alternating.
func BenchmarkSandboxLaunch(b *testing.B) {
	exe := filepath.Join(b.TempDir(), "terraform-provider-hostile")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Dir = filepath.Join(repoRoot, "tests", "providers", "hostile")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the hostile provider: %v\n%s", err, out)
	}
	spec, err := sandbox.Plan(sandbox.Spec{Name: "bench", Exec: []string{filepath.Dir(exe), "/lib", "/usr/lib"}, Write: []string{"/dev/null"},
		Read: []string{"/etc/ssl", "/etc/localtime"}, Env: []string{"PATH", "HOME"}}, sandbox.Probe())
	if err != nil {
		b.Fatal(err)
	}
	helper := filepath.Join(b.TempDir(), "oprov-sandbox")
	build = exec.Command("go", "build", "-o", helper, "./cmd/oprov-sandbox")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building oprov-sandbox: %v\n%s", err, out)
	}
	start := func(sb *sandbox.Spec, step string) time.Duration {
		t0 := time.Now()
		p, err := plugin.Start(context.Background(), plugin.Options{Path: exe, Sandbox: sb, SandboxExec: step, ForReattach: true})
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		p.Stop(context.Background())
		return took
	}
	rounds := max(b.N, 30)
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		times["plain"] = append(times["plain"], start(nil, ""))
		times["oprov"] = append(times["oprov"], start(&spec, oprovBin))
		times["helper"] = append(times["helper"], start(&spec, helper))
	}
	b.StopTimer()
	diff := median(times["helper"]) - median(times["plain"])
	b.ReportMetric(float64(diff.Microseconds())/1000, "ms-added")
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	fmt.Printf("\nlaunch to handshake, %d rounds (median): direct %v; sandboxed through oprov-sandbox %v (%v more, target <= 5ms); through 'oprov __sandbox-exec' %v (%v more)\n",
		rounds, r(median(times["plain"])), r(median(times["helper"])), r(diff), r(median(times["oprov"])), r(median(times["oprov"])-median(times["plain"])))
}

// BenchmarkSandboxApply times 'oprov run -- tofu apply' of 200 resources of the recorder provider
// under the default sandbox against the same run without one, alternating, from an empty state.
// A third run has a rule that never matches and no sandbox: it goes through the proxy as a
// sandboxed provider always does, so the sandbox's own share of the cost shows apart.
func BenchmarkSandboxApply(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	recorderOnce.Do(func() { recorderCache, _ = os.MkdirTemp("", "oprov-recorder-cache-") })
	env := []string{"OPROV_CACHE_DIR=" + recorderCache, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + b.TempDir()}
	dirs := map[string]string{}
	for name, extra := range map[string]string{"plain": "", "sandboxed": "sandbox \"*\" {}\n",
		"proxied": "rule \"never\" {\n  deny    = \"action == 'never'\"\n  message = \"never\"\n}\n"} {
		dir := b.TempDir()
		copyDir(b, filepath.Join(repoRoot, "tests", "providers", "recorder"), filepath.Join(dir, "recorder"))
		writeFile(b, filepath.Join(dir, "main.tf"), manyThings(200))
		writeFile(b, filepath.Join(dir, "oprov.hcl"), "provider \"example.com/acme/recorder\" {\n  source = \"./recorder\"\n}\n"+extra)
		dirs[name] = dir
	}
	mustOprov(b, env, "run", "-C", dirs["plain"], "--", tofu, "version") // build the provider once
	rounds := max(b.N, 5)
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		for _, name := range []string{"plain", "proxied", "sandboxed"} {
			os.Remove(filepath.Join(dirs[name], "terraform.tfstate"))
			times[name] = append(times[name], timeCmd(b, env, oprovBin, "run", "-C", dirs[name], "--", tofu, "apply", "-auto-approve", "-input=false"))
		}
	}
	b.StopTimer()
	ratio := float64(median(times["sandboxed"])) / float64(median(times["plain"]))
	b.ReportMetric(ratio, "x-sandboxed")
	fmt.Printf("\n'oprov run -- tofu apply' of 200 resources, %d rounds (median): sandboxed %v, without %v: ratio %.3fx (target <= 1.05x); through the proxy without a sandbox %v: ratio %.3fx\n",
		rounds, median(times["sandboxed"]).Round(time.Millisecond), median(times["plain"]).Round(time.Millisecond), ratio,
		median(times["proxied"]).Round(time.Millisecond), float64(median(times["proxied"]))/float64(median(times["plain"])))
}
