package tests

import (
	"archive/zip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// launchCheckBase is the commit before the launch check skipped unchanged files by their
// fingerprint (the cache then hashed every unpacked file on every use): the "build before this
// change" it is measured against; OPROV_BENCH_BASE overrides it.
const launchCheckBase = "e525fbf"

// buildOprovAt builds oprov as it was at a commit of this repository (git archive, then go build),
// into dir.
func buildOprovAt(b *testing.B, rev, dir string) string {
	b.Helper()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %q | tar -x -C %q", repoRoot, rev, src))
	if out, err := archive.CombinedOutput(); err != nil {
		b.Fatalf("git archive %s (set OPROV_BENCH_BASE to a commit this clone has): %v\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "oprov-"+rev)
	build := exec.Command("go", "build", "-o", bin, "./cmd/oprov")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building oprov at %s: %v\n%s", rev, err, out)
	}
	return bin
}

// paddedRelease copies a release, adding to every zip a file of padMB incompressible MiB (as a
// provider that ships data beside its executable), and writes its SHA256SUMS anew.
func paddedRelease(b *testing.B, dist string, padMB int) string {
	b.Helper()
	out := b.TempDir()
	pad := make([]byte, padMB<<20)
	rand.Read(pad)
	zips, _ := filepath.Glob(filepath.Join(dist, "*.zip"))
	var sums strings.Builder
	for _, src := range zips {
		dest := filepath.Join(out, filepath.Base(src))
		zr, err := zip.OpenReader(src)
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(dest)
		if err != nil {
			b.Fatal(err)
		}
		zw := zip.NewWriter(f)
		for _, e := range zr.File {
			if err := zw.Copy(e); err != nil {
				b.Fatal(err)
			}
		}
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: "padding.bin", Method: zip.Store})
		w.Write(pad)
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		zr.Close()
		data, _ := os.ReadFile(dest)
		sum := sha256.Sum256(data)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), filepath.Base(dest))
	}
	writeFile(b, filepath.Join(out, "terraform-provider-hello_1.0.0_SHA256SUMS"), sums.String())
	return out
}

// BenchmarkLaunchCheck measures what checking the cache's unpacked package on every use costs:
// warm `oprov init` and warm `oprov run -- tofu plan` with this build against the build before
// the check (OPROV_BENCH_BASE, default launchCheckBase), alternating, each with a warm cache of
// its own, for examples/hello padded to about 30 MB unpacked (3 platforms, signed, lock present);
// and the check itself (dirhash of the unpacked package) per provider.
func BenchmarkLaunchCheck(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	base := os.Getenv("OPROV_BENCH_BASE")
	if base == "" {
		base = launchCheckBase
	}
	oldBin := buildOprovAt(b, base, b.TempDir())
	f := newLoaderFixtureOf(b, helloConfig, paddedRelease(b, helloRelease(b), 12))
	env := append(append([]string{}, f.env...), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "OPROV_TOFU="+tofu)
	mustOprov(b, env, "lock", "-C", f.cfg)
	type build struct {
		name, bin, cache string
		env              []string
		runDir           string
		init, run        []time.Duration
	}
	builds := []*build{{name: "this build", bin: oprovBin}, {name: "before (" + base + ")", bin: oldBin}}
	for _, bd := range builds {
		bd.cache = filepath.Join(b.TempDir(), "cache")
		bd.env = append(append([]string{}, env...), "OPROV_CACHE_DIR="+bd.cache)
		bd.runDir = f.freshCopy(b)
		timeCmd(b, bd.env, bd.bin, "init", "-C", f.freshCopy(b)) // fill its cache
		timeCmd(b, bd.env, bd.bin, "run", "-C", bd.runDir, "--", tofu, "apply", "-auto-approve", "-input=false")
	}
	pkgs, _ := filepath.Glob(filepath.Join(builds[0].cache, "mirror", "*", "*", "*", "*", "*", "*"))
	if len(pkgs) != 1 {
		b.Fatalf("want one unpacked package, found %v", pkgs)
	}
	rounds := b.N
	if rounds < 7 {
		rounds = 7
	}
	// tofu init from a filesystem mirror of the same unpacked package: what plain tofu does.
	rc := filepath.Join(b.TempDir(), "fsmirror.tfrc")
	writeFile(b, rc, fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(pkgs[0])))))))
	tofuEnv := append(append([]string{}, env...), "TF_CLI_CONFIG_FILE="+rc)
	// Plain tofu plan on a copy tofu initialised itself from that mirror: what oprov run wraps.
	tofuDir := f.freshCopy(b)
	timeCmd(b, tofuEnv, tofu, "-chdir="+tofuDir, "init", "-input=false")
	timeCmd(b, tofuEnv, tofu, "-chdir="+tofuDir, "apply", "-auto-approve", "-input=false")
	var hashes, tofuInit, tofuPlan []time.Duration
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		order := builds
		if i%2 == 1 {
			order = []*build{builds[1], builds[0]}
		}
		for _, bd := range order {
			bd.init = append(bd.init, timeCmd(b, bd.env, bd.bin, "init", "-C", f.freshCopy(b)))
			bd.run = append(bd.run, timeCmd(b, bd.env, bd.bin, "run", "-C", bd.runDir, "--", tofu, "plan", "-input=false"))
		}
		tofuInit = append(tofuInit, timeCmd(b, tofuEnv, tofu, "-chdir="+f.freshCopy(b), "init", "-input=false"))
		tofuPlan = append(tofuPlan, timeCmd(b, tofuEnv, tofu, "-chdir="+tofuDir, "plan", "-input=false"))
		start := time.Now()
		if _, err := dirhash.HashDir(pkgs[0], "", dirhash.Hash1); err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, time.Since(start))
	}
	b.StopTimer()
	size := int64(0)
	filepath.Walk(pkgs[0], func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return nil
	})
	now, old := builds[0], builds[1]
	// The median of each round's own ratio: the two builds of a round ran back to back, under the
	// same load, so a busy machine moves both.
	initRatio, runRatio := pairedRatio(now.init, old.init), pairedRatio(now.run, old.run)
	mirrorRatio, planRatio := pairedRatio(now.init, tofuInit), pairedRatio(now.run, tofuPlan)
	b.ReportMetric(initRatio, "x-warm-init")
	b.ReportMetric(mirrorRatio, "x-init-vs-fsmirror")
	b.ReportMetric(runRatio, "x-run-plan")
	b.ReportMetric(planRatio, "x-run-vs-tofu-plan")
	ms := func(d []time.Duration) time.Duration { return median(d).Round(time.Millisecond) }
	fmt.Printf("\nlaunch check: examples/hello padded to %.1f MiB unpacked (3 platforms, signed, lock present), median of %d alternating rounds:\n", float64(size)/(1<<20), rounds)
	fmt.Printf("  warm oprov init          %8s   before %8s   ratio %.2fx (median of the rounds' ratios; target <= 1.05x)\n", ms(now.init), ms(old.init), initRatio)
	fmt.Printf("  warm oprov run -- plan   %8s   before %8s   ratio %.2fx (median of the rounds' ratios; target <= 1.05x)\n", ms(now.run), ms(old.run), runRatio)
	fmt.Printf("  warm oprov init          %8s   tofu init from a filesystem mirror %8s   ratio %.2fx (target <= 1.0x)\n", ms(now.init), ms(tofuInit), mirrorRatio)
	fmt.Printf("  warm oprov run -- plan   %8s   tofu plan on a copy tofu initialised %8s   ratio %.2fx (target <= 1.1x)\n", ms(now.run), ms(tofuPlan), planRatio)
	fmt.Printf("  the check itself (h1: of the unpacked package): %s per provider\n", median(hashes).Round(100*time.Microsecond))
}

// pairedRatio is the median of a[i]/b[i].
func pairedRatio(a, b []time.Duration) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = float64(a[i]) / float64(b[i])
	}
	sort.Float64s(r)
	return r[len(r)/2]
}
