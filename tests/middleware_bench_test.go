package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

const threeRules = `audit {
  path = "audit.jsonl"
}
rule "keep-things" {
  deny    = "resource.type == 'recorder_thing' && action == 'delete'"
  message = "things are deleted by hand"
}
rule "owner-tag" {
  warn    = "action in ['create', 'update'] && !('owner' in planned.tags)"
  message = "tag every thing with its owner"
}
rule "no-replace" {
  warn    = "action == 'replace'"
  message = "this replaces a thing"
}
`

// manyThings is a configuration of n recorder_thing resources.
func manyThings(n int) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    recorder = { source = "example.com/acme/recorder" }
  }
}
resource "recorder_thing" "t" {
  count  = %d
  name   = "thing-${count.index}"
  tags   = { owner = "platform" }
  secret = "s"
}
`, n)
}

// BenchmarkMiddlewareApply times 'oprov run -- tofu apply' of 200 resources with an audit and three
// rules against the same run without middleware, alternating, from an empty state each time.
func BenchmarkMiddlewareApply(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	recorderOnce.Do(func() { recorderCache, _ = os.MkdirTemp("", "oprov-recorder-cache-") })
	env := []string{"OPROV_CACHE_DIR=" + recorderCache, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + b.TempDir()}
	dirs := map[string]string{}
	for name, extra := range map[string]string{"plain": "", "middleware": threeRules} {
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
		for _, name := range []string{"plain", "middleware"} {
			os.Remove(filepath.Join(dirs[name], "terraform.tfstate"))
			times[name] = append(times[name], timeCmd(b, env, oprovBin, "run", "-C", dirs[name], "--", tofu, "apply", "-auto-approve", "-input=false"))
		}
	}
	b.StopTimer()
	ratio := float64(median(times["middleware"])) / float64(median(times["plain"]))
	b.ReportMetric(ratio, "x-middleware")
	fmt.Printf("\n'oprov run -- tofu apply' of 200 resources, %d rounds (median): with audit and three rules %v, without %v: ratio %.2fx (target <= 1.10x)\n",
		rounds, median(times["middleware"]).Round(time.Millisecond), median(times["plain"]).Round(time.Millisecond), ratio)
}
