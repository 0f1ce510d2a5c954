// Package tfcredstest helps tests that look up origin-registry tokens run apart from the
// machine's own credentials.
package tfcredstest

import (
	"os"
	"strings"
	"testing"
)

// Isolate gives the test an empty home and no token variables (those named with prefix, which is
// tfcreds.EnvPrefix) or CLI configuration of the machine's, and returns that home. The prefix is
// passed in so that tfcreds' own tests can use this without an import cycle.
func Isolate(t testing.TB, prefix string) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("APPDATA", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("TF_CLI_CONFIG_FILE", "")
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, prefix) {
			t.Setenv(name, "")
		}
	}
	return home
}
