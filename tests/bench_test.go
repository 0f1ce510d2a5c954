package tests

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// benchMB is the size of each synthetic platform zip: OPROV_BENCH_MB, default 100.
func benchMB() int {
	if n, err := strconv.Atoi(os.Getenv("OPROV_BENCH_MB")); err == nil && n > 0 {
		return n
	}
	return 100
}

var benchPlatforms = []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64", "windows_amd64"}

// syntheticRelease writes a release of 5 platforms whose zips each hold mb MiB of random,
// incompressible bytes (stored, not deflated), with SHA256SUMS. It returns the zip paths and
// their hex sha256s.
func syntheticRelease(t testing.TB, dir string, mb int) (paths []string, sums []string) {
	t.Helper()
	return syntheticReleaseOf(t, dir, mb, benchPlatforms)
}

// syntheticReleaseOf is syntheticRelease for the given platforms.
func syntheticReleaseOf(t testing.TB, dir string, mb int, platforms []string) (paths []string, sums []string) {
	t.Helper()
	var sumsFile strings.Builder
	for i, p := range platforms {
		name := fmt.Sprintf("terraform-provider-bench_1.0.0_%s.zip", p)
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		zw := zip.NewWriter(io.MultiWriter(f, h))
		exe := "terraform-provider-bench_v1.0.0"
		if strings.HasPrefix(p, "windows") {
			exe += ".exe"
		}
		hdr := &zip.FileHeader{Name: exe, Method: zip.Store}
		hdr.SetMode(0o755)
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.NewChaCha8([32]byte{byte(i)})
		if _, err := io.CopyN(w, rng, int64(mb)<<20); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		sum := hex.EncodeToString(h.Sum(nil))
		fmt.Fprintf(&sumsFile, "%s  %s\n", sum, name)
		paths, sums = append(paths, path), append(sums, sum)
	}
	writeFile(t, filepath.Join(dir, "terraform-provider-bench_1.0.0_SHA256SUMS"), sumsFile.String())
	return paths, sums
}

// curlUpload uploads blobs the plain way: a POST to open an upload, then one PUT of the whole
// file with its digest, `concurrency` blobs at a time.
func curlUpload(t testing.TB, reg *testreg.Registry, repo string, paths, sums []string, concurrency int) time.Duration {
	t.Helper()
	start := time.Now()
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	errs := make(chan error, len(paths))
	for i := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			put, err := curlPutURL(reg, repo, sums[i])
			if err != nil {
				errs <- err
				return
			}
			cmd := exec.Command("curl", "-sS", "-f", "--cacert", reg.CAFile, "-X", "PUT", "-H", "Content-Type: application/octet-stream",
				"-T", paths[i], "-o", "/dev/null", put)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("curl PUT: %v %s", err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return time.Since(start)
}

// timedOprov runs oprov and gives its wall time and peak RSS in MiB (measured through rsswrap).
func timedOprov(t testing.TB, env []string, args ...string) (time.Duration, float64) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "rss")
	cmd := exec.Command(rssWrap, append([]string{out, oprovBin}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oprov %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	d := time.Since(start)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	kib, _ := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	return d, kib / 1024
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkPush5Platforms pushes a synthetic 5-platform release (OPROV_BENCH_MB MiB each, default
// 100) to a local TLS registry, alternating with curl uploading the same blobs at the same
// concurrency into fresh repositories, and reports the wall-time ratio and oprov's peak RSS.
func BenchmarkPush5Platforms(b *testing.B) {
	peers.Require(b, "curl")
	reg := testreg.Start(b, testreg.Options{})
	mb := benchMB()
	dir := b.TempDir()
	paths, sums := syntheticRelease(b, dir, mb)
	const concurrency = 4
	rounds := b.N
	if rounds < 3 {
		rounds = 3
	}
	var curlT, oprovT []time.Duration
	var rss float64
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		curlT = append(curlT, curlUpload(b, reg, fmt.Sprintf("bench/curl%d", i), paths, sums, concurrency))
		d, r := timedOprov(b, nil, "push", dir, fmt.Sprintf("%s/bench/oprov%d", reg.Host, i), "--ca-file", reg.CAFile, "--concurrency", strconv.Itoa(concurrency))
		oprovT = append(oprovT, d)
		if r > rss {
			rss = r
		}
	}
	b.StopTimer()
	total := float64(len(paths)*mb) * (1 << 20)
	ratio := float64(median(oprovT)) / float64(median(curlT))
	b.ReportMetric(ratio, "x-curl")
	b.ReportMetric(rss, "MiB-peak-rss")
	b.ReportMetric(total/median(oprovT).Seconds()/1e6, "MB/s")
	fmt.Printf("\npush of %d x %d MiB over TLS to a local registry, %d rounds (median):\n", len(paths), mb, rounds)
	fmt.Printf("  %-28s %10s\n", "curl POST+PUT (4 at a time)", median(curlT).Round(time.Millisecond))
	fmt.Printf("  %-28s %10s\n", "oprov push (4 at a time)", median(oprovT).Round(time.Millisecond))
	fmt.Printf("  %-28s %10.2fx   (target <= 1.3x)\n", "ratio oprov/curl", ratio)
	fmt.Printf("  %-28s %8.1f MiB (target < 100 MiB)\n", "oprov peak RSS", rss)
}

// timeCmd runs a command and gives its wall time; it fails the benchmark if the command fails.
func timeCmd(b *testing.B, env []string, name string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return time.Since(start)
}

// BenchmarkVerifyVsCosign times oprov verify of a signed examples/hello version (3 platforms:
// signature, every manifest, and this machine's zip fetched and checked; and again with
// --all-platforms) against the stock cosign verify of the same version, which fetches no layers,
// for both signature forms, alternating, and reports the median ratios.
func BenchmarkVerifyVsCosign(b *testing.B) {
	cosign := peers.Require(b, "cosign")
	reg := testreg.Start(b, testreg.Options{})
	keys := b.TempDir()
	writeFile(b, filepath.Join(keys, "empty-root.json"), `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
	pass := []string{"COSIGN_PASSWORD=bench"}
	mustOprov(b, pass, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	R := reg.Host + "/providers/acme/hello"
	ca := []string{"--ca-file", reg.CAFile}
	env := []string{"SSL_CERT_FILE=" + reg.CAFile, "HOME=" + keys}
	forms := []struct {
		name, version string
		signFlags     []string
		cosignVerify  []string
	}{
		{"legacy tag", "1.0.0", []string{"--legacy-tag"}, cosignVerifyLegacy},
		{"bundle", "2.0.0", nil, cosignVerifyBundle},
	}
	rounds := b.N
	if rounds < 5 {
		rounds = 5
	}
	fmt.Printf("\nverify of a signed 3-platform examples/hello on a local TLS registry, %d rounds (median):\n", rounds)
	b.ResetTimer()
	for _, f := range forms {
		dist := helloRelease(b)
		dir := b.TempDir()
		entries, _ := os.ReadDir(dist)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".zip") {
				data, _ := os.ReadFile(filepath.Join(dist, e.Name()))
				writeFile(b, filepath.Join(dir, strings.Replace(e.Name(), "_1.0.0_", "_"+f.version+"_", 1)), string(data))
			}
		}
		mustOprov(b, pass, append(append([]string{"push", dir, R, "--sign", "--key", filepath.Join(keys, "cosign.key")}, f.signFlags...), ca...)...)
		var o, all, sigOnly, c []time.Duration
		for i := 0; i < rounds; i++ {
			// Both tools trust the test CA the same way, through SSL_CERT_FILE.
			verify := []string{"verify", R + ":" + f.version, "--key", filepath.Join(keys, "cosign.pub")}
			o = append(o, timeCmd(b, env, oprovBin, verify...))
			all = append(all, timeCmd(b, env, oprovBin, append(verify, "--all-platforms")...))
			sigOnly = append(sigOnly, timeCmd(b, env, oprovBin, append(verify, "--no-zips")...))
			args := append(append([]string{}, f.cosignVerify...), R+":"+f.version)
			for j, a := range args {
				if a == "cosign.pub" || a == "empty-root.json" {
					args[j] = filepath.Join(keys, a)
				}
			}
			c = append(c, timeCmd(b, env, cosign, args...))
		}
		ratio := float64(median(o)) / float64(median(c))
		sigRatio := float64(median(sigOnly)) / float64(median(c))
		b.ReportMetric(ratio, "x-cosign-"+strings.ReplaceAll(f.name, " ", "-"))
		b.ReportMetric(sigRatio, "x-cosign-sigcheck-"+strings.ReplaceAll(f.name, " ", "-"))
		fmt.Printf("  %-10s signature check (--no-zips) %6s (%.2fx cosign, target <= 1.0x); the zip check costs %s more for this machine's zip\n",
			f.name, median(sigOnly).Round(time.Millisecond), sigRatio, (median(o) - median(sigOnly)).Round(time.Millisecond))
		fmt.Printf("  %-10s cosign verify %6s   oprov verify %6s (%.2fx, target <= 1.0x)   with --all-platforms %6s (%.2fx)\n",
			f.name, median(c).Round(time.Millisecond), median(o).Round(time.Millisecond), ratio,
			median(all).Round(time.Millisecond), float64(median(all))/float64(median(c)))
	}
}

// BenchmarkLoader compares oprov's loader with OpenTofu on examples/hello (signed, 3 platforms,
// lock file present):
//   - warm `oprov init` (cache filled) against plain `tofu init` from a filesystem mirror of the
//     same provider;
//   - cold `oprov install` (empty cache; with the lock, and without it, when it locks every
//     platform first) and `oprov init` against OpenTofu's own `tofu init` through oci_mirror.
//
// Every round uses a fresh copy of the configuration (no .terraform). The warm pair runs in
// its own loop, in alternating order; the cold runs alternate in another.
func BenchmarkLoader(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	f := newLoaderFixture(b, helloConfig)
	mustOprov(b, f.env, "lock", "-C", f.cfg)
	warmEnv := append(append([]string{}, f.env...), "OPROV_TOFU="+tofu)
	mustOprov(b, warmEnv, "install", "-C", f.cfg) // fill the cache

	// A filesystem mirror of the same provider for plain tofu: the cache's unpacked package.
	roots, _ := filepath.Glob(filepath.Join(f.cache, "mirror", "*"))
	if len(roots) != 1 {
		b.Fatalf("expected one mirror root, found %v", roots)
	}
	fsrc := filepath.Join(b.TempDir(), "fs.tfrc")
	writeFile(b, fsrc, fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"example.com/acme/hello\"]\n  }\n  direct {\n    exclude = [\"example.com/acme/hello\"]\n  }\n}\n", roots[0]))
	ocirc := filepath.Join(b.TempDir(), "oci.tfrc")
	writeFile(b, ocirc, mustOprov(b, f.env, "tofurc", "-C", f.cfg).Stdout)
	tofuEnv := append(append([]string{}, f.env...), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")

	rounds := b.N
	if rounds < 5 {
		rounds = 5
	}
	var warmOprov, fsTofu, coldInstall, coldNoLock, coldInit, ociTofu []time.Duration
	b.ResetTimer()
	// The warm pair in a loop of its own (the cold runs below fill new caches, which would
	// evict what a warm run reads), in alternating order.
	for i := 0; i < 2*rounds; i++ {
		warm := func() { warmOprov = append(warmOprov, timeCmd(b, warmEnv, oprovBin, "init", "-C", f.freshCopy(b))) }
		plain := func() {
			fsTofu = append(fsTofu, timeCmdIn(b, f.freshCopy(b), append(tofuEnv, "TF_CLI_CONFIG_FILE="+fsrc), tofu, "init", "-input=false"))
		}
		if i%2 == 0 {
			warm()
			plain()
		} else {
			plain()
			warm()
		}
	}
	for i := 0; i < rounds; i++ {
		noLock := f.freshCopy(b)
		os.Remove(filepath.Join(noLock, ".terraform.lock.hcl"))
		coldNoLock = append(coldNoLock, timeCmd(b, append(append([]string{}, warmEnv...), "OPROV_CACHE_DIR="+filepath.Join(b.TempDir(), "cold0")), oprovBin, "install", "-C", noLock))
		cold := append(append([]string{}, warmEnv...), "OPROV_CACHE_DIR="+filepath.Join(b.TempDir(), "cold"))
		coldInstall = append(coldInstall, timeCmd(b, cold, oprovBin, "install", "-C", f.freshCopy(b)))
		cold2 := append(append([]string{}, warmEnv...), "OPROV_CACHE_DIR="+filepath.Join(b.TempDir(), "cold2"))
		coldInit = append(coldInit, timeCmd(b, cold2, oprovBin, "init", "-C", f.freshCopy(b)))
		ociTofu = append(ociTofu, timeCmdIn(b, f.freshCopy(b), append(tofuEnv, "TF_CLI_CONFIG_FILE="+ocirc), tofu, "init", "-input=false"))
	}
	b.StopTimer()
	warmRatio := float64(median(warmOprov)) / float64(median(fsTofu))
	coldRatio := float64(median(coldInstall)) / float64(median(ociTofu))
	b.ReportMetric(warmRatio, "x-warm-init")
	b.ReportMetric(coldRatio, "x-cold-install")
	ms := func(d []time.Duration) time.Duration { return median(d).Round(time.Millisecond) }
	fmt.Printf("\nloader on examples/hello (signed, 3 platforms, lock present), median of %d warm and %d cold rounds:\n", 2*rounds, rounds)
	fmt.Printf("  warm oprov init %8s   tofu init from a filesystem mirror %8s   ratio %.2fx (target <= 1.05x)\n", ms(warmOprov), ms(fsTofu), warmRatio)
	fmt.Printf("  cold oprov install %5s   tofu init through oci_mirror %14s   ratio %.2fx (target <= 1.0x)\n", ms(coldInstall), ms(ociTofu), coldRatio)
	fmt.Printf("  cold oprov install %5s   without a lock (locks all 3 platforms first)   ratio %.2fx (target <= 1.0x)\n", ms(coldNoLock), float64(median(coldNoLock))/float64(median(ociTofu)))
	fmt.Printf("  cold oprov init %8s   (install + tofu init)                           ratio %.2fx\n", ms(coldInit), float64(median(coldInit))/float64(median(ociTofu)))
}

func timeCmdIn(b *testing.B, dir string, env []string, name string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return time.Since(start)
}

// BenchmarkLaunch measures launch-to-ready for examples/hello (go-plugin handshake, automatic
// mTLS and the health check, through pkg/plugin) against the same binary's bare process start
// (run without the magic cookie, it says it is a plugin and exits), and reports the overhead.
func BenchmarkLaunch(b *testing.B) {
	dist := helloRelease(b)
	exeDir := filepath.Join(b.TempDir(), "hello")
	zipPath := filepath.Join(dist, "terraform-provider-hello_1.0.0_"+helloPlatforms[0]+".zip")
	if err := unzipTo(zipPath, exeDir); err != nil {
		b.Fatal(err)
	}
	exe := filepath.Join(exeDir, "terraform-provider-hello_v1.0.0")
	rounds := b.N
	if rounds < 30 {
		rounds = 30
	}
	ctx := context.Background()
	var bare, launch, plainLaunch []time.Duration
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		start := time.Now()
		exec.Command(exe).Run() // exits 1 at once: no magic cookie
		bare = append(bare, time.Since(start))

		for _, v := range []struct {
			reattach bool
			into     *[]time.Duration
		}{{false, &launch}, {true, &plainLaunch}} {
			start = time.Now()
			p, err := plugin.Start(ctx, plugin.Options{Path: exe, ForReattach: v.reattach})
			if err != nil {
				b.Fatal(err)
			}
			*v.into = append(*v.into, time.Since(start))
			p.Stop(ctx)
		}
	}
	b.StopTimer()
	overhead := median(launch) - median(bare)
	b.ReportMetric(float64(overhead.Microseconds())/1000, "ms-overhead")
	fmt.Printf("\nlaunch of examples/hello, %d rounds (median):\n", rounds)
	fmt.Printf("  bare process start %8s   launch to ready %8s   overhead %.1f ms (target <= 10 ms)   [automatic mTLS, as oprov schema]\n",
		median(bare).Round(10*time.Microsecond), median(launch).Round(10*time.Microsecond), float64(overhead.Microseconds())/1000)
	po := median(plainLaunch) - median(bare)
	b.ReportMetric(float64(po.Microseconds())/1000, "ms-overhead-reattach")
	fmt.Printf("  bare process start %8s   launch to ready %8s   overhead %.1f ms (target <= 10 ms)   [private socket, no TLS, as oprov run]\n",
		median(bare).Round(10*time.Microsecond), median(plainLaunch).Round(10*time.Microsecond), float64(po.Microseconds())/1000)
}

// BenchmarkRunPlan compares `oprov run -- tofu plan` (providers launched by oprov, cache warm)
// with plain `tofu plan` on an already initialised copy of the same configuration.
func BenchmarkRunPlan(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	f := newLoaderFixture(b, helloConfig)
	env := append(append([]string{}, f.env...), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "OPROV_TOFU="+tofu)
	initialised := f.freshCopy(b)
	mustOprov(b, env, "init", "-C", initialised)
	mustTofu(b, tofu, initialised, env, "apply", "-auto-approve", "-input=false")
	viaRun := f.freshCopy(b)
	mustOprov(b, env, "run", "-C", viaRun, "--", tofu, "apply", "-auto-approve", "-input=false")
	rounds := b.N
	if rounds < 7 {
		rounds = 7
	}
	var plain, run []time.Duration
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		plain = append(plain, timeCmdIn(b, initialised, env, tofu, "plan", "-input=false"))
		run = append(run, timeCmd(b, env, oprovBin, "run", "-C", viaRun, "--", tofu, "plan", "-input=false"))
	}
	b.StopTimer()
	ratio := float64(median(run)) / float64(median(plain))
	b.ReportMetric(ratio, "x-tofu-plan")
	fmt.Printf("\nplan of examples/hello, %d rounds (median):\n", rounds)
	fmt.Printf("  tofu plan %8s   oprov run -- tofu plan %8s   ratio %.2fx (target <= 1.15x)\n",
		median(plain).Round(time.Millisecond), median(run).Round(time.Millisecond), ratio)
}

// curlCopy fetches each blob from one registry and uploads it to another with curl (GET piped
// into a POST+PUT), `concurrency` blobs at a time.
func curlCopy(b *testing.B, from, to *testreg.Registry, fromRepo, toRepo string, sums []string, concurrency int) time.Duration {
	b.Helper()
	start := time.Now()
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	errs := make(chan error, len(sums))
	for _, sum := range sums {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			put, err := curlPutURL(to, toRepo, sum)
			if err != nil {
				errs <- err
				return
			}
			script := fmt.Sprintf(`curl -sS -f --cacert %q %q | curl -sS -f --cacert %q -X PUT -H 'Content-Type: application/octet-stream' -T - -o /dev/null %q`,
				from.CAFile, from.URL()+"/v2/"+fromRepo+"/blobs/sha256:"+sum, to.CAFile, put)
			if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkCopy copies a synthetic 5-platform release (OPROV_BENCH_MB MiB each) between two
// local TLS registries with oprov copy, alternating with curl fetching and uploading the same
// blobs at the same concurrency, into fresh repositories each round.
func BenchmarkCopy(b *testing.B) {
	peers.Require(b, "curl")
	ca := testreg.NewCA(b, b.TempDir())
	from := testreg.Start(b, testreg.Options{CA: ca})
	to := testreg.Start(b, testreg.Options{CA: ca})
	mb := benchMB()
	dir := b.TempDir()
	_, sums := syntheticRelease(b, dir, mb)
	env := []string{"SSL_CERT_FILE=" + ca.File}
	mustOprov(b, env, "push", dir, from.Host+"/bench/src")
	rounds := b.N
	if rounds < 3 {
		rounds = 3
	}
	var curlT, oprovT []time.Duration
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		curlT = append(curlT, curlCopy(b, from, to, "bench/src", fmt.Sprintf("bench/curl%d", i), sums, 4))
		oprovT = append(oprovT, timeCmd(b, env, oprovBin, "copy", from.Host+"/bench/src:1.0.0", fmt.Sprintf("%s/bench/oprov%d", to.Host, i), "--concurrency", "4"))
	}
	b.StopTimer()
	ratio := float64(median(oprovT)) / float64(median(curlT))
	b.ReportMetric(ratio, "x-curl")
	total := float64(len(sums)*mb) * (1 << 20)
	fmt.Printf("\ncopy of %d x %d MiB between two local TLS registries, %d rounds (median):\n", len(sums), mb, rounds)
	fmt.Printf("  curl GET|PUT (4 at a time) %8s   oprov copy %8s (%.0f MB/s)   ratio %.2fx (target <= 1.3x)\n",
		median(curlT).Round(time.Millisecond), median(oprovT).Round(time.Millisecond), total/median(oprovT).Seconds()/1e6, ratio)
}

// BenchmarkSaveLoad saves a synthetic 5-platform release into a tarball and loads it into
// another registry, reporting time and peak RSS of each.
func BenchmarkSaveLoad(b *testing.B) {
	ca := testreg.NewCA(b, b.TempDir())
	from := testreg.Start(b, testreg.Options{CA: ca})
	to := testreg.Start(b, testreg.Options{CA: ca})
	mb := benchMB()
	dir := b.TempDir()
	syntheticRelease(b, dir, mb)
	env := []string{"SSL_CERT_FILE=" + ca.File}
	mustOprov(b, env, "push", dir, from.Host+"/bench/src")
	b.ResetTimer()
	tarball := filepath.Join(b.TempDir(), "bench.tar")
	saveT, saveRSS := timedOprov(b, env, "save", from.Host+"/bench/src:1.0.0", "--to", tarball)
	loadT, loadRSS := timedOprov(b, env, "load", tarball, "--to", to.Host+"/airgap")
	b.StopTimer()
	b.ReportMetric(saveRSS, "MiB-save-rss")
	b.ReportMetric(loadRSS, "MiB-load-rss")
	fmt.Printf("\nsave and load of 5 x %d MiB:\n", mb)
	fmt.Printf("  save %8s  peak RSS %5.1f MiB (target < 100 MiB)\n", saveT.Round(time.Millisecond), saveRSS)
	fmt.Printf("  load %8s  peak RSS %5.1f MiB (target < 100 MiB)  (every blob is read and checked before anything is pushed)\n", loadT.Round(time.Millisecond), loadRSS)
}

// curlPutURL opens a blob upload with curl (a POST) and gives the URL to PUT the blob to.
func curlPutURL(reg *testreg.Registry, repo, sum string) (string, error) {
	post := exec.Command("curl", "-sS", "-f", "--cacert", reg.CAFile, "-X", "POST", "-D", "-", "-o", "/dev/null", reg.URL()+"/v2/"+repo+"/blobs/uploads/")
	hdrs, err := post.Output()
	if err != nil {
		return "", fmt.Errorf("curl POST: %v", err)
	}
	var loc string
	for _, line := range strings.Split(string(hdrs), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "location") {
			loc = strings.TrimSpace(v)
		}
	}
	if !strings.HasPrefix(loc, "http") {
		loc = reg.URL() + loc
	}
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	return loc + sep + "digest=sha256:" + sum, nil
}

// BenchmarkSaveVsRegctl saves a synthetic 5-platform release (OPROV_BENCH_MB MiB each) from a
// local TLS registry into a tarball with oprov save, alternating with regctl image export of the
// same index, side by side in one run.
func BenchmarkSaveVsRegctl(b *testing.B) {
	regctl := peers.Require(b, "regctl")
	ca := testreg.NewCA(b, b.TempDir())
	from := testreg.Start(b, testreg.Options{CA: ca})
	mb := benchMB()
	dir := b.TempDir()
	_, sums := syntheticRelease(b, dir, mb)
	home := b.TempDir()
	env := []string{"SSL_CERT_FILE=" + ca.File, "HOME=" + home}
	mustOprov(b, env, "push", dir, from.Host+"/bench/src")
	ref := from.Host + "/bench/src:1.0.0"
	rounds := b.N
	if rounds < 3 {
		rounds = 3
	}
	out := b.TempDir()
	var regT, oprovT []time.Duration
	var regSize, oprovSize int64
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		rt := filepath.Join(out, fmt.Sprintf("regctl%d.tar", i))
		regT = append(regT, timeCmd(b, env, regctl, "image", "export", ref, rt))
		ot := filepath.Join(out, fmt.Sprintf("oprov%d.tar", i))
		oprovT = append(oprovT, timeCmd(b, env, oprovBin, "save", ref, "--to", ot))
		rs, _ := os.Stat(rt)
		os_, _ := os.Stat(ot)
		regSize, oprovSize = rs.Size(), os_.Size()
		os.Remove(rt)
		os.Remove(ot)
	}
	b.StopTimer()
	// Both carried the whole release: neither tarball is much smaller than the zips.
	if min := int64(len(sums)*mb) << 20; regSize < min || oprovSize < min {
		b.Fatalf("a tarball is smaller than the release's zips (%d bytes): regctl %d, oprov %d", min, regSize, oprovSize)
	}
	ratio := float64(median(oprovT)) / float64(median(regT))
	b.ReportMetric(ratio, "x-regctl")
	fmt.Printf("\nsave of %d x %d MiB from a local TLS registry, %d rounds (median):\n", len(sums), mb, rounds)
	fmt.Printf("  regctl image export %8s   oprov save %8s   ratio %.2fx (target <= 1.0x)\n",
		median(regT).Round(time.Millisecond), median(oprovT).Round(time.Millisecond), ratio)
}
