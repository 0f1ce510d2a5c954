package bundle

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/oprov/oprov/manifest"
	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/tfcreds"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/tfcredstest"
)

// benchRelease writes TYPE 1.0.0 for platforms into a new directory: zips holding mb MiB of
// random, stored (incompressible) bytes each, and SHA256SUMS.
func benchRelease(tb testing.TB, typ string, mb int, platforms []string) string {
	tb.Helper()
	dir := tb.TempDir()
	var sums string
	for i, p := range platforms {
		name := fmt.Sprintf("terraform-provider-%s_1.0.0_%s.zip", typ, p)
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		h := sha256.New()
		zw := zip.NewWriter(io.MultiWriter(f, h))
		hdr := &zip.FileHeader{Name: "terraform-provider-" + typ + "_v1.0.0", Method: zip.Store}
		hdr.SetMode(0o755)
		w, err := zw.CreateHeader(hdr)
		if err == nil {
			_, err = io.CopyN(w, rand.NewChaCha8([32]byte{byte(i), typ[len(typ)-1]}), int64(mb)<<20)
		}
		if err == nil {
			err = zw.Close()
		}
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			tb.Fatal(err)
		}
		sums += hex.EncodeToString(h.Sum(nil)) + "  " + name + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-"+typ+"_1.0.0_SHA256SUMS"), []byte(sums), 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// BenchmarkSaveConfigOrigins saves 5 providers x 2 platforms from 5 origins on 127.0.0.1
// (OPROV_BENCH_MB MiB of zips a provider, default 20) in process, for profiling
// (-cpuprofile): the origins run in this process too. tests/ compares the command with tofu.
func BenchmarkSaveConfigOrigins(b *testing.B) {
	tfcredstest.Isolate(b, tfcreds.EnvPrefix)
	mb := 20
	if n, err := strconv.Atoi(os.Getenv("OPROV_BENCH_MB")); err == nil && n > 0 {
		mb = n
	}
	ca := testca.NewCA(b, b.TempDir())
	platforms := []string{"linux_amd64", "darwin_arm64"}
	var ps []manifest.Platform
	for _, p := range platforms {
		pl, _ := manifest.ParsePlatform(p)
		ps = append(ps, pl)
	}
	var wants []Want
	for i := 0; i < 5; i++ {
		typ := fmt.Sprintf("bench%d", i)
		org := testorigin.Start(b, ca, benchRelease(b, typ, mb/2+i, platforms), "ns", typ, "1.0.0")
		addr, err := manifest.ParseProviderAddress(org.Address())
		if err != nil {
			b.Fatal(err)
		}
		wants = append(wants, Want{Addr: addr, Constraints: "1.0.0"})
	}
	out := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tarball := filepath.Join(out, fmt.Sprintf("b%d.tar", i))
		opts := ConfigOptions{Dir: "bench", Wants: wants, Platforms: ps, Registry: ociref.NewClient(ociref.Options{CAFile: ca.File})}
		if _, err := SaveConfig(context.Background(), opts, tarball); err != nil {
			b.Fatal(err)
		}
		os.Remove(tarball)
		os.Remove(tarball + ".listing.json")
	}
}
