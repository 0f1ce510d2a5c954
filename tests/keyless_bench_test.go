package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/internal/sigstack"
	"github.com/oprov/oprov/tests/internal/testreg"
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
	d := pushJSON(b, nil, helloRelease(b), R, "--ca-file", reg.CAFile, "--address", "example.com/acme/hello").IndexDigest
	tok, err := st.Issuer.Token(releaseWorkflow)
	if err != nil {
		b.Fatal(err)
	}
	env := []string{"SSL_CERT_FILE=" + reg.CAFile, "HOME=" + st.Dir}
	timeCmd(b, env, st.Cosign3, "sign", "--signing-config", st.SigningConfig, "--trusted-root", st.TrustedRoot, "--identity-token", tok, "--yes", R+"@"+d)
	st.Stop()

	rounds := b.N
	if rounds > 1 && rounds < 5 {
		rounds = 5
	}
	id := []string{"--trusted-root", st.TrustedRoot, "--certificate-identity", releaseWorkflow.Subject(), "--certificate-oidc-issuer", st.Issuer.URL}
	b.ResetTimer()
	var o, c []time.Duration
	for i := 0; i < rounds; i++ {
		o = append(o, timeCmd(b, env, oprovBin, append([]string{"verify", R + ":1.0.0"}, id...)...))
		c = append(c, timeCmd(b, env, st.Cosign3, append(append([]string{"verify"}, id...), "--insecure-ignore-tlog", "--insecure-ignore-sct", R+":1.0.0")...))
	}
	ratio := float64(median(o)) / float64(median(c))
	b.ReportMetric(ratio, "x-cosign-keyless")
	fmt.Printf("\nkeyless verify of a 3-platform examples/hello (cosign v3 bundle, TSA time, offline), %d rounds (median):\n", rounds)
	fmt.Printf("  cosign v3 verify %6s   oprov verify %6s   ratio oprov/cosign %.2fx (target <= 1.0x)\n",
		median(c).Round(time.Millisecond), median(o).Round(time.Millisecond), ratio)
}
