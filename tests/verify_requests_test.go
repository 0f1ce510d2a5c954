package tests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testreg"
)

// TestVerifyRefusesUnsignedBeforeAnyZip: verify judges signatures before it fetches any zip, so an
// unsigned 100 MiB release (5 platforms x 20 MiB), checked with --all-platforms, is refused after
// a few small requests and not one blob download.
func TestVerifyRefusesUnsignedBeforeAnyZip(t *testing.T) {
	reg := testreg.Start(t, testreg.Options{})
	dist := t.TempDir()
	syntheticRelease(t, dist, 20)
	env := []string{"SSL_CERT_FILE=" + reg.CAFile, "HOME=" + t.TempDir(), "COSIGN_PASSWORD=test"}
	repo := reg.Host + "/providers/acme/bench"
	mustOprov(t, env, "push", dist, repo)
	keys := t.TempDir()
	mustOprov(t, env, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))

	verify := []string{"verify", repo + ":1.0.0", "--key", filepath.Join(keys, "cosign.pub"), "--all-platforms"}
	debug := append(env, "OPROV_DEBUG_HTTP=1")
	r := oprov(t, debug, verify...)
	if r.Code != 12 || !strings.Contains(r.Stderr, "not signed") {
		t.Fatalf("verify of an unsigned release: exit %d, stderr %q", r.Code, r.Stderr)
	}
	n, kinds := requestsIn(r.Stderr)
	if kinds["GET blobs"] != 0 || n > 12 {
		t.Errorf("refusing an unsigned release took %d requests %v; want a few, and no blob fetched", n, kinds)
	}
	// Control: the same command on a signed version does fetch every zip, so the count above
	// would have seen them.
	mustOprov(t, env, "sign", repo+":1.0.0", "--key", filepath.Join(keys, "cosign.key"))
	_, kinds = requestsIn(mustOprov(t, debug, verify...).Stderr)
	if kinds["GET blobs"] < 5 {
		t.Errorf("verifying the signed release fetched %d blobs, want every zip: %v", kinds["GET blobs"], kinds)
	}
}
