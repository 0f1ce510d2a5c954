// Package peers finds the real programs oprov's end-to-end tests talk to (the distribution
// registry, tofu, terraform, cosign v2 and v3 (cosign3), for keyless signatures fulcio,
// timestamp-server and rekor-server, and for the snapshot release goreleaser and syft), as built
// by tests/tools/install.sh.
//
// A missing peer fails the test when CI is set, and skips it otherwise, with the command that
// installs it.
package peers

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dir is where tests/tools/install.sh puts the peers: $OPROV_TOOLS_DIR/bin, by default
// ~/.cache/oprov-tools/bin.
func Dir() string {
	if d := os.Getenv("OPROV_TOOLS_DIR"); d != "" {
		return filepath.Join(d, "bin")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "oprov-tools", "bin")
}

// Find returns the path of a peer, from the tools directory first and then PATH, or "".
func Find(name string) string {
	p := filepath.Join(Dir(), name)
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p
	}
	if p, err := exec.LookPath(name); err == nil && name != "terraform" && name != "tofu" {
		// tofu and terraform are pinned: a different version on PATH does not stand in for them.
		return p
	}
	return ""
}

// Require returns the path of a peer, or ends the test: a failure under CI, a skip elsewhere.
func Require(t testing.TB, name string) string {
	t.Helper()
	if p := Find(name); p != "" {
		return p
	}
	Missing(t, name+" (not in "+Dir()+")")
	return ""
}

// Missing ends the test for a missing peer: a failure under CI, a skip elsewhere.
func Missing(t testing.TB, what string) {
	t.Helper()
	msg := "missing test peer " + what + ": run tests/tools/install.sh"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
