package tests

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// BenchmarkReplay measures, side by side in one run, on 200 recorder_thing resources: 'oprov run
// -- tofu apply' with and without --record (from an empty state each time, alternating); the
// replayed 'tofu plan' against the same plan with the real provider; and the recording's size
// per call.
func BenchmarkReplay(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	recorderOnce.Do(func() { recorderCache, _ = os.MkdirTemp("", "oprov-recorder-cache-") })
	env := []string{"OPROV_CACHE_DIR=" + recorderCache, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + b.TempDir()}
	dir := b.TempDir()
	copyDir(b, filepath.Join(repoRoot, "tests", "providers", "recorder"), filepath.Join(dir, "recorder"))
	n, rounds := 200, max(b.N, 5)
	if os.Getenv("OPROV_BENCH_MB") != "" { // the smoke run in tests/run.sh: keep it short
		n, rounds = 20, 1
	}
	writeFile(b, filepath.Join(dir, "main.tf"), manyThings(n))
	writeFile(b, filepath.Join(dir, "oprov.hcl"), "provider \"example.com/acme/recorder\" {\n  source = \"./recorder\"\n}\n")
	mustOprov(b, env, "run", "-C", dir, "--", tofu, "version") // build the provider once
	rec := filepath.Join(b.TempDir(), "calls.jsonl")
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		os.Remove(filepath.Join(dir, "terraform.tfstate"))
		times["apply"] = append(times["apply"], timeCmd(b, env, oprovBin, "run", "-C", dir, "--", tofu, "apply", "-auto-approve", "-input=false"))
		os.Remove(filepath.Join(dir, "terraform.tfstate"))
		times["record"] = append(times["record"], timeCmd(b, env, oprovBin, "run", "-C", dir, "--record", rec, "--", tofu, "apply", "-auto-approve", "-input=false"))
	}
	for i := 0; i < rounds; i++ {
		times["plan"] = append(times["plan"], timeCmd(b, env, oprovBin, "run", "-C", dir, "--", tofu, "plan", "-input=false"))
		times["replay"] = append(times["replay"], timeCmd(b, env, oprovBin, "run", "-C", dir, "--replay", rec, "--", tofu, "plan", "-input=false"))
	}
	b.StopTimer()
	st, err := os.Stat(rec)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(rec)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	calls, byCall := 0, map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"call":"`) {
			calls++
			name := sc.Text()[strings.Index(sc.Text(), `"call":"`)+8:]
			byCall[name[:strings.IndexByte(name, '"')]] += len(sc.Text()) + 1
		}
	}
	recordRatio := float64(median(times["record"])) / float64(median(times["apply"]))
	replayRatio := float64(median(times["replay"])) / float64(median(times["plan"]))
	b.ReportMetric(recordRatio, "x-record")
	b.ReportMetric(replayRatio, "x-replay-plan")
	b.ReportMetric(float64(st.Size())/float64(calls), "bytes/call")
	fmt.Printf("\n%d resources, %d rounds (median):\n", n, rounds)
	fmt.Printf("  oprov run -- tofu apply: %v; with --record: %v; ratio %.3fx (target <= 1.05x)\n",
		median(times["apply"]).Round(time.Millisecond), median(times["record"]).Round(time.Millisecond), recordRatio)
	fmt.Printf("  tofu plan with the provider: %v; replayed: %v; ratio %.3fx\n",
		median(times["plan"]).Round(time.Millisecond), median(times["replay"]).Round(time.Millisecond), replayRatio)
	fmt.Printf("  recording: %d bytes, %d calls, %.0f bytes per call", st.Size(), calls, float64(st.Size())/float64(calls))
	for name, n := range byCall {
		fmt.Printf("; %s %d", name, n)
	}
	fmt.Println()
}
