package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testreg"
)

// TestQuickstartWithPushFlags runs scripts/quickstart.sh as the README tells a newcomer to, against
// a TLS registry, with push flags (--sign --key, --concurrency) and a connection flag (--ca-file):
// push gets them all, inspect only the connection flag, and the version it pushed is signed.
func TestQuickstartWithPushFlags(t *testing.T) {
	reg := testreg.Start(t, testreg.Options{})
	work := t.TempDir()
	env := []string{"COSIGN_PASSWORD=test", "HOME=" + t.TempDir()}
	keys := filepath.Join(work, "keys")
	mustOprov(t, env, "keygen", "--output-key-prefix", keys)
	repo := reg.Host + "/providers/acme/hello"

	cmd := exec.Command("bash", filepath.Join(repoRoot, "scripts", "quickstart.sh"), repo,
		"--sign", "--key", keys+".key", "--concurrency", "2", "--ca-file", reg.CAFile)
	cmd.Env = append(os.Environ(), append(env, "QUICKSTART_DIR="+filepath.Join(work, "qs"),
		"GOBIN="+filepath.Join(work, "bin"), "QUICKSTART_PLATFORMS="+helloPlatforms[0])...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"== pushing to " + repo, "Signed: ", "== inspecting", "PLATFORM", helloPlatforms[0]} {
		if !strings.Contains(string(out), want) {
			t.Errorf("quickstart output does not show %q:\n%s", want, out)
		}
	}
	r := mustOprov(t, nil, "verify", repo+":1.0.0", "--key", keys+".pub", "--ca-file", reg.CAFile)
	if !strings.Contains(r.Stdout, "Verified "+repo+":1.0.0") {
		t.Errorf("the quickstart's version does not verify: %s", r.Stdout)
	}
}
