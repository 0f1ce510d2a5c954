package tests

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// plantDeadRuns leaves in cache/tmp what n runs killed mid-download leave: each an owner
// directory holding a partial zip of size bytes, and its lock file, which no process holds.
func plantDeadRuns(b *testing.B, cache string, n int, size int64) {
	b.Helper()
	for i := 0; i < n; i++ {
		dir := filepath.Join(cache, "tmp", fmt.Sprintf(".oprov-tmp-%d-%016x", 900000+i, i)) // a dead run's name, in full
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		writeFile(b, dir+".lock", "")
		f, err := os.Create(filepath.Join(dir, "blob-partial"))
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.CopyN(f, zeroReader{}, size)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// BenchmarkTempSweep prints what owned temporary files cost, on a release of 3 platforms x 50
// MiB (OPROV_BENCH_MB if smaller): a warm 'oprov install' (lock present, cache full; it sweeps
// the cache and writes its CLI configuration through a locked temporary file), and the same
// install as the first run after three killed downloads left a zip's size each behind, which it
// clears. With OPROV_BENCH_BASELINE (an oprov built from an earlier commit), that binary's warm
// install too.
func BenchmarkTempSweep(b *testing.B) {
	mb := min(benchMB(), bigMB)
	rel := newBigRelease(b, mb)
	cfg := rel.config(b, rel.reg.Host)
	cache := filepath.Join(b.TempDir(), "cache")
	env := rel.envWith("OPROV_CACHE_DIR=" + cache)
	mustOprov(b, env, "install", "-C", cfg) // lock and fill the cache
	rounds := max(b.N, 7)
	var warm, afterKills, baseline []time.Duration
	base := os.Getenv("OPROV_BENCH_BASELINE")
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		warm = append(warm, timeCmd(b, env, oprovBin, "install", "-C", cfg))
		plantDeadRuns(b, cache, 3, int64(mb)<<20)
		afterKills = append(afterKills, timeCmd(b, env, oprovBin, "install", "-C", cfg))
		if left := treeBytes(filepath.Join(cache, "tmp")); left != 0 {
			b.Fatalf("the install after the kills left %d bytes in tmp/", left)
		}
		if base != "" {
			baseline = append(baseline, timeCmd(b, env, base, "install", "-C", cfg))
		}
	}
	b.StopTimer()
	ms := func(d []time.Duration) time.Duration { return median(d).Round(100 * time.Microsecond) }
	ratio := float64(median(afterKills)) / float64(median(warm))
	b.ReportMetric(ratio, "x-after-kills")
	fmt.Printf("\nowned temporary files, warm 'oprov install' of 3 x %d MiB (lock present), %d rounds (median):\n", mb, rounds)
	fmt.Printf("  warm install %9s   first install after 3 killed downloads (clears 3 x %d MiB) %9s   ratio %.2fx\n", ms(warm), mb, ms(afterKills), ratio)
	if base != "" {
		r := float64(median(warm)) / float64(median(baseline))
		b.ReportMetric(r, "x-vs-baseline")
		fmt.Printf("  baseline warm install %9s   this build / baseline %.2fx\n", ms(baseline), r)
	}
}
