package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testreg"
)

// BenchmarkLockBytes counts the bytes of registry responses 'oprov lock' reads for a synthetic
// 5-platform release (OPROV_BENCH_MB MiB each, default 100), counted from OPROV_DEBUG_HTTP: once
// as oprov publishes it (each platform's h1: on the index) and once with those annotations
// removed (as ORAS or a hand-made index has none), where every zip must be downloaded.
func BenchmarkLockBytes(b *testing.B) {
	reg := testreg.Start(b, testreg.Options{})
	mb := benchMB()
	dist := b.TempDir()
	syntheticRelease(b, dist, mb)
	env := []string{"SSL_CERT_FILE=" + reg.CAFile, "HOME=" + b.TempDir(), "TF_CLI_CONFIG_FILE="}
	for _, ns := range []string{"annotated", "plain"} {
		mustOprov(b, env, "push", dist, reg.Host+"/providers/"+ns+"/bench")
	}
	rewriteIndex(b, reg, "providers/plain/bench", "1.0.0", withoutH1)
	b.ResetTimer()
	bytes := map[string]int64{}
	for _, ns := range []string{"annotated", "plain"} {
		cfg := b.TempDir()
		writeFile(b, filepath.Join(cfg, "main.tf"), fmt.Sprintf("terraform {\n  required_providers {\n    bench = { source = \"example.com/%s/bench\" }\n  }\n}\n", ns))
		writeFile(b, filepath.Join(cfg, "oprov.hcl"), strings.ReplaceAll("oci_mirror {\n  repository_template = \"%HOST%/providers/${namespace}/${type}\"\n  include = [\"example.com/*/*\"]\n}\n", "%HOST%", reg.Host))
		run := append(append([]string{}, env...), "OPROV_DEBUG_HTTP=1", "OPROV_CACHE_DIR="+filepath.Join(b.TempDir(), "cache"))
		r := mustOprov(b, run, "lock", "-C", cfg)
		tr := traceOf(r.Stderr)
		bytes[ns] = tr.Bytes
		if n := len(lockHashes(b, filepath.Join(cfg, ".terraform.lock.hcl"), "example.com/"+ns+"/bench")); n != 2*len(benchPlatforms) {
			b.Fatalf("lock of %s holds %d hashes, want %d", ns, n, 2*len(benchPlatforms))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(bytes["annotated"]), "bytes-lock")
	fmt.Printf("\nbytes read by 'oprov lock' of a %d x %d MiB release (all platforms locked):\n", len(benchPlatforms), mb)
	fmt.Printf("  h1: recorded on the index    %12d bytes (target < 1 MB)\n", bytes["annotated"])
	fmt.Printf("  without h1: (ORAS, by hand)  %12d bytes (every zip downloaded)\n", bytes["plain"])
}
