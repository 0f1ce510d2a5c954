package tests

import (
	"archive/zip"
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
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/internal/peers"
	"github.com/oprov/oprov/tests/internal/testreg"
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
	var sumsFile strings.Builder
	for i, p := range benchPlatforms {
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
			post := exec.Command("curl", "-sS", "-f", "--cacert", reg.CAFile, "-X", "POST", "-D", "-", "-o", "/dev/null",
				reg.URL()+"/v2/"+repo+"/blobs/uploads/")
			hdrs, err := post.Output()
			if err != nil {
				errs <- fmt.Errorf("curl POST: %v", err)
				return
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
			put := exec.Command("curl", "-sS", "-f", "--cacert", reg.CAFile, "-X", "PUT", "-H", "Content-Type: application/octet-stream",
				"-T", paths[i], "-o", "/dev/null", loc+sep+"digest=sha256:"+sums[i])
			if out, err := put.CombinedOutput(); err != nil {
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

// timedPush runs oprov push and gives its wall time and peak RSS in MiB.
func timedPush(t testing.TB, args ...string) (time.Duration, float64) {
	t.Helper()
	cmd := exec.Command(oprovBin, append([]string{"push"}, args...)...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oprov push: %v\n%s", err, out)
	}
	d := time.Since(start)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return d, float64(ru.Maxrss) / 1024 // Maxrss is in KiB on Linux
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
		d, r := timedPush(b, dir, fmt.Sprintf("%s/bench/oprov%d", reg.Host, i), "--ca-file", reg.CAFile, "--concurrency", strconv.Itoa(concurrency))
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
