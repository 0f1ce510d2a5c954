package tests

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/sigstack"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// BenchmarkKeylessVerifyVsCosign times oprov verify of a keyless-signed examples/hello version
// (cosign v3's bundle referrer, checked offline against the trusted root: chain, TSA time,
// identity; then every manifest and this machine's zip) against cosign v3 verify of the same,
// with the same trusted root and identity, alternating, and reports the median ratio. The
// Sigstore services are stopped before timing: both verify offline.
func BenchmarkKeylessVerifyVsCosign(b *testing.B) {
	st := sigstack.Start(b)
	reg := testreg.Start(b, testreg.Options{})
	const repo = "providers/acme/hello"
	R := reg.Host + "/" + repo
	env := []string{"SSL_CERT_FILE=" + reg.CAFile, "HOME=" + st.Dir}
	sign := func(dist string, version string) {
		d := pushJSON(b, nil, dist, R, "--ca-file", reg.CAFile, "--address", "example.com/acme/hello").IndexDigest
		tok, err := st.Issuer.Token(releaseWorkflow)
		if err != nil {
			b.Fatal(err)
		}
		timeCmd(b, env, st.Cosign3, "sign", "--signing-config", st.SigningConfig, "--trusted-root", st.TrustedRoot, "--identity-token", tok, "--yes", R+"@"+d)
	}
	sign(helloRelease(b), "1.0.0")
	// The same 3 platforms with 1 KiB zips: oprov's digest-chain work (every manifest, this
	// machine's zip, which cosign does not fetch) shrinks to nothing, and what is left to
	// compare is the signature check.
	tiny := b.TempDir()
	for _, p := range helloPlatforms {
		exe := "terraform-provider-hello_v0.0.1"
		if strings.HasPrefix(p, "windows_") {
			exe += ".exe"
		}
		writeTinyZip(b, filepath.Join(tiny, "terraform-provider-hello_0.0.1_"+p+".zip"), exe)
	}
	sign(tiny, "0.0.1")
	st.Stop()

	rounds := b.N
	if rounds > 1 && rounds < 5 {
		rounds = 5
	}
	id := []string{"--trusted-root", st.TrustedRoot, "--certificate-identity", releaseWorkflow.Subject(), "--certificate-oidc-issuer", st.Issuer.URL}
	b.ResetTimer()
	fmt.Printf("\nkeyless verify (cosign v3 bundle, TSA time, offline, same trusted root and identity), %d rounds (median):\n", rounds)
	for _, v := range []struct{ version, what string }{{"1.0.0", "examples/hello, 6 MiB zips"}, {"0.0.1", "1 KiB zips"}} {
		var o, sigOnly, c []time.Duration
		for i := 0; i < rounds; i++ {
			o = append(o, timeCmd(b, env, oprovBin, append([]string{"verify", R + ":" + v.version}, id...)...))
			sigOnly = append(sigOnly, timeCmd(b, env, oprovBin, append([]string{"verify", R + ":" + v.version, "--no-zips"}, id...)...))
			c = append(c, timeCmd(b, env, st.Cosign3, append(append([]string{"verify"}, id...), "--insecure-ignore-tlog", "--insecure-ignore-sct", R+":"+v.version)...))
		}
		ratio := float64(median(o)) / float64(median(c))
		b.ReportMetric(ratio, "x-cosign-keyless-"+v.version)
		sigRatio := float64(median(sigOnly)) / float64(median(c))
		b.ReportMetric(sigRatio, "x-cosign-keyless-sigcheck-"+v.version)
		fmt.Printf("  %-26s cosign v3 verify %6s   oprov verify %6s   ratio oprov/cosign %.2fx\n",
			v.what, median(c).Round(time.Millisecond), median(o).Round(time.Millisecond), ratio)
		fmt.Printf("  %-26s signature check (--no-zips) %6s   ratio oprov/cosign %.2fx (target <= 1.0x); zip check %s apart\n",
			"", median(sigOnly).Round(time.Millisecond), sigRatio, (median(o) - median(sigOnly)).Round(time.Millisecond))
	}
}

// writeTinyZip writes a release zip holding a 1 KiB stand-in executable.
func writeTinyZip(b *testing.B, path, exe string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: exe, Method: zip.Deflate, ExternalAttrs: 0o755 << 16, CreatorVersion: 3 << 8})
	if err == nil {
		_, err = w.Write(bytes.Repeat([]byte{'x'}, 1024))
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
}
