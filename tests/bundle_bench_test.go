package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testmodreg"
	origin "github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// BenchmarkSaveConfigVsTofuMirror saves a configuration of 5 providers x 2 platforms, each from
// its own origin registry on 127.0.0.1 (GPG-signed SHA256SUMS), with oprov save --config,
// alternating with tofu providers mirror of the same configuration. Provider i's zips hold
// OPROV_BENCH_MB/5 + i MiB (at least 1 + i), so no two providers share a blob.
func BenchmarkSaveConfigVsTofuMirror(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	ca := testreg.NewCA(b, b.TempDir())
	mb := benchMB() / 5
	if mb < 1 {
		mb = 1
	}
	platforms := []string{"linux_amd64", "darwin_arm64"}
	cfg := b.TempDir()
	var reqs strings.Builder
	total := 0
	for i := 0; i < 5; i++ {
		dist := b.TempDir()
		syntheticReleaseOf(b, dist, mb+i, platforms)
		total += 2 * (mb + i)
		org := origin.Start(b, ca, dist, fmt.Sprintf("ns%d", i), "bench", "1.0.0")
		fmt.Fprintf(&reqs, "    p%d = {\n      source  = %q\n      version = \"1.0.0\"\n    }\n", i, org.Address())
	}
	writeFile(b, filepath.Join(cfg, "main.tf"), "terraform {\n  required_providers {\n"+reqs.String()+"  }\n}\n")
	env := []string{"SSL_CERT_FILE=" + ca.File, "HOME=" + b.TempDir(), "TF_CLI_CONFIG_FILE=", "CHECKPOINT_DISABLE=1"}
	rounds := b.N
	if rounds < 3 {
		rounds = 3
	}
	out := b.TempDir()
	var tofuT, oprovT []time.Duration
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		mirror := filepath.Join(out, fmt.Sprintf("tofu%d", i))
		cmd := []string{"-chdir=" + cfg, "providers", "mirror"}
		for _, p := range platforms {
			cmd = append(cmd, "-platform="+p)
		}
		tofuT = append(tofuT, timeCmd(b, env, tofu, append(cmd, mirror)...))
		tarball := filepath.Join(out, fmt.Sprintf("oprov%d.tar", i))
		args := []string{"save", "--config", cfg, "--to", tarball}
		for _, p := range platforms {
			args = append(args, "--platform", p)
		}
		oprovT = append(oprovT, timeCmd(b, env, oprovBin, args...))
		if st, err := os.Stat(tarball); err != nil || st.Size() < int64(total)<<20 {
			b.Fatalf("the bundle is smaller than the %d MiB of zips it should hold (%v)", total, err)
		}
		os.RemoveAll(mirror)
		os.Remove(tarball)
		os.Remove(tarball + ".listing.json")
	}
	b.StopTimer()
	ratio := float64(median(oprovT)) / float64(median(tofuT))
	b.ReportMetric(ratio, "x-tofu")
	fmt.Printf("\nconfiguration of 5 providers x 2 platforms (%d MiB of zips) from 5 local origins, %d rounds (median):\n", total, rounds)
	fmt.Printf("  tofu providers mirror %8s   oprov save --config %8s (OCI layout, signatures checked and kept)   ratio %.2fx (target <= 1.2x)\n",
		median(tofuT).Round(time.Millisecond), median(oprovT).Round(time.Millisecond), ratio)
}

// BenchmarkSaveConfigModulesVsTofuInit saves a configuration calling 10 registry modules from a
// module registry on 127.0.0.1 (each 40 files of 4 KiB, a module's size) with oprov save
// --config, which fetches, zips, hashes and checks each against the module lock and writes the
// bundle, alternating with tofu init of the same configuration in a fresh copy (which downloads
// and unpacks them into .terraform/modules).
func BenchmarkSaveConfigModulesVsTofuInit(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	ca := testreg.NewCA(b, b.TempDir())
	reg := testmodreg.Start(b, ca)
	var root strings.Builder
	for i := 0; i < 10; i++ {
		files := map[string]string{}
		for f := 0; f < 40; f++ {
			files[fmt.Sprintf("f%02d.tf", f)] = fmt.Sprintf("locals {\n  v%02d = %d\n}\n%s", f, i, strings.Repeat("# "+strings.Repeat("x", 125)+"\n", 32))
		}
		addr := reg.Add(fmt.Sprintf("acme/m%d/aws", i), "1.0.0", moduleZip(b, files))
		fmt.Fprintf(&root, "module \"m%d\" {\n  source  = %q\n  version = \"~> 1.0\"\n}\n", i, addr)
	}
	cfg := b.TempDir()
	writeFile(b, filepath.Join(cfg, "main.tf"), root.String())
	lockModules(b, cfg, ca.File)
	env := []string{"SSL_CERT_FILE=" + ca.File, "HOME=" + b.TempDir(), "TF_CLI_CONFIG_FILE=", "CHECKPOINT_DISABLE=1"}
	rounds := max(b.N, 9)
	out := b.TempDir()
	var tofuT, oprovT []time.Duration
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		work := filepath.Join(out, fmt.Sprintf("tofu%d", i))
		writeFile(b, filepath.Join(work, "main.tf"), root.String())
		tofuT = append(tofuT, timeCmdIn(b, work, env, tofu, "init", "-input=false", "-backend=false"))
		tarball := filepath.Join(out, fmt.Sprintf("oprov%d.tar", i))
		oprovT = append(oprovT, timeCmd(b, env, oprovBin, "save", "--config", cfg, "--to", tarball))
		if _, err := os.Stat(filepath.Join(work, ".terraform", "modules", "m9", "f39.tf")); err != nil {
			b.Fatalf("tofu init installed no module: %v", err)
		}
		os.RemoveAll(work)
		os.Remove(tarball)
		os.Remove(tarball + ".listing.json")
	}
	b.StopTimer()
	// The median of each round's own ratio: the two ran back to back, under the same load.
	ratio := pairedRatio(oprovT, tofuT)
	b.ReportMetric(ratio, "x-tofu")
	fmt.Printf("\nconfiguration of 10 registry modules (40 files of 4 KiB each) from a module registry on 127.0.0.1, %d rounds (median):\n", rounds)
	fmt.Printf("  tofu init %8s   oprov save --config %8s (fetched, zipped, hashed, checked against the module lock, bundled)   ratio %.2fx (median of the rounds' ratios; target <= 1.0x)\n",
		median(tofuT).Round(time.Millisecond), median(oprovT).Round(time.Millisecond), ratio)
}
