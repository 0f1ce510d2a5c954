package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// BenchmarkServeInit times a warm `tofu init` through `oprov serve` (the server's cache filled and
// the tag resolved) against `tofu init` from a filesystem mirror of the same provider, unpacked
// and packed, alternating, each in a fresh configuration directory.
func BenchmarkServeInit(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	_, args := helloInRegistry(b)
	s := startServe(b, nil, false, args...)
	host := helloPlatforms[0]
	zip := filepath.Join(helloRelease(b), "terraform-provider-hello_1.0.0_"+host+".zip")
	unpacked, packed := b.TempDir(), b.TempDir()
	if err := unzipTo(zip, filepath.Join(unpacked, "example.com", "acme", "hello", "1.0.0", host)); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(zip)
	if err != nil {
		b.Fatal(err)
	}
	writeFile(b, filepath.Join(packed, "example.com", "acme", "hello", filepath.Base(zip)), string(data))
	rcs := map[string]string{"serve": s.CLIConfig, "unpacked": fsMirrorRC(unpacked), "packed": fsMirrorRC(packed)}
	work := b.TempDir()
	for name, rc := range rcs {
		writeFile(b, filepath.Join(work, name+".tfrc"), rc)
	}
	env := func(name string) []string {
		return []string{"TF_CLI_CONFIG_FILE=" + filepath.Join(work, name+".tfrc"), "SSL_CERT_FILE=" + s.CAFile, "HOME=" + work, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"}
	}
	fresh := func() string {
		dir := b.TempDir()
		writeFile(b, filepath.Join(dir, "main.tf"), helloConfig)
		return dir
	}
	timeCmdIn(b, fresh(), env("serve"), tofu, "init", "-input=false") // warm the server
	rounds := max(b.N, 5)
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		for _, name := range []string{"serve", "unpacked", "packed"} {
			times[name] = append(times[name], timeCmdIn(b, fresh(), env(name), tofu, "init", "-input=false"))
		}
	}
	b.StopTimer()
	ms := func(name string) time.Duration { return median(times[name]).Round(time.Millisecond) }
	ratio := func(name string) float64 { return float64(median(times["serve"])) / float64(median(times[name])) }
	b.ReportMetric(ratio("unpacked"), "x-fs-mirror")
	fmt.Printf("\ntofu init of examples/hello (3 platforms), %d rounds (median):\n", rounds)
	fmt.Printf("  through oprov serve (warm) %8s\n", ms("serve"))
	fmt.Printf("  from a filesystem mirror   %8s (unpacked)   ratio serve/mirror %.2fx\n", ms("unpacked"), ratio("unpacked"))
	fmt.Printf("  from a filesystem mirror   %8s (packed zip) ratio serve/mirror %.2fx\n", ms("packed"), ratio("packed"))
}

func fsMirrorRC(dir string) string {
	return fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"example.com/acme/hello\"]\n  }\n  direct {\n    exclude = [\"example.com/acme/hello\"]\n  }\n}\n", dir)
}

// BenchmarkServeArchives times downloading a synthetic 5-platform release's zips (OPROV_BENCH_MB
// MiB each) with curl through `oprov serve`, cold (fetched from the registry, checked, cached,
// then sent) and warm (from the cache), against curl GETting the same blobs from the registry
// directly, all over TLS, and reports the ratios and the server's peak RSS.
func BenchmarkServeArchives(b *testing.B) {
	peers.Require(b, "curl")
	reg := testreg.Start(b, testreg.Options{})
	mb := benchMB()
	dist := b.TempDir()
	_, sums := syntheticRelease(b, dist, mb)
	mustOprov(b, nil, "push", dist, reg.Host+"/providers/acme/bench", "--ca-file", reg.CAFile, "--address", "example.com/acme/bench")
	rounds := max(b.N, 3)
	var direct, cold, warm []time.Duration
	var rss float64
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		direct = append(direct, curlAll(b, reg.CAFile, registryBlobURLs(reg, "providers/acme/bench", sums)))
		s := startServe(b, nil, true, serveFromRegistry(b, reg.Host, reg.CAFile)...) // an empty cache each round
		var urls []string
		for _, p := range benchPlatforms {
			urls = append(urls, s.URL+"example.com/acme/bench/terraform-provider-bench_1.0.0_"+p+".zip")
		}
		cold = append(cold, curlAll(b, s.CAFile, urls))
		warm = append(warm, curlAll(b, s.CAFile, urls))
		s.stop(b, syscall.SIGTERM)
		rss = max(rss, s.peakRSS(b))
	}
	b.StopTimer()
	total := float64(len(sums)*mb) * (1 << 20)
	mbs := func(d []time.Duration) float64 { return total / median(d).Seconds() / 1e6 }
	b.ReportMetric(float64(median(warm))/float64(median(direct)), "x-direct-warm")
	b.ReportMetric(rss, "MiB-peak-rss")
	fmt.Printf("\narchives: %d x %d MiB over TLS, one at a time with curl, %d rounds (median):\n", len(sums), mb, rounds)
	fmt.Printf("  registry blob GET        %9s  %7.0f MB/s\n", median(direct).Round(time.Millisecond), mbs(direct))
	fmt.Printf("  oprov serve, warm cache  %9s  %7.0f MB/s   ratio %.2fx\n", median(warm).Round(time.Millisecond), mbs(warm), float64(median(warm))/float64(median(direct)))
	fmt.Printf("  oprov serve, cold cache  %9s  %7.0f MB/s   ratio %.2fx\n", median(cold).Round(time.Millisecond), mbs(cold), float64(median(cold))/float64(median(direct)))
	fmt.Printf("  oprov serve peak RSS     %7.1f MiB (target < 100 MiB)\n", rss)
}

func registryBlobURLs(reg *testreg.Registry, repo string, sums []string) []string {
	var urls []string
	for _, s := range sums {
		urls = append(urls, reg.URL()+"/v2/"+repo+"/blobs/sha256:"+s)
	}
	return urls
}

// curlAll GETs each URL in turn with curl (trusting ca), discarding the bodies, and gives the time.
func curlAll(b *testing.B, ca string, urls []string) time.Duration {
	b.Helper()
	args := []string{"-sS", "-f", "--cacert", ca}
	for _, u := range urls {
		args = append(args, "-o", "/dev/null", u)
	}
	return timeCmd(b, nil, "curl", args...)
}
