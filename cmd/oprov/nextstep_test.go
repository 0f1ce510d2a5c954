package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustedRootErrorsNameOprovTrustedRoot: a keyless verification whose --trusted-root is
// missing, empty or not a trusted root says so in one sentence, and sends the user to 'oprov
// trusted-root' (not cosign's command, and not a parser's words); so does one given none.
func TestTrustedRootErrorsNameOprovTrustedRoot(t *testing.T) {
	dir := t.TempDir()
	empty, garbage := filepath.Join(dir, "empty.json"), filepath.Join(dir, "garbage.json")
	writeFile(t, empty, "")
	writeFile(t, garbage, "not json at all")
	blob := filepath.Join(dir, "blob")
	writeFile(t, blob, "data")
	keyless := []string{"--certificate-identity", "ci@example.com", "--certificate-oidc-issuer", "https://issuer.example.com"}
	for name, root := range map[string]string{"missing": filepath.Join(dir, "missing.json"), "empty": empty, "not a trusted root": garbage, "none": ""} {
		for _, cmd := range [][]string{
			{"verify", "127.0.0.1:1/acme/hello:1.0.0"},
			{"verify-blob", blob, "--bundle", blob},
		} {
			args := append(append([]string{}, cmd...), keyless...)
			if root != "" {
				args = append(args, "--trusted-root", root)
			}
			t.Run(name+" "+cmd[0], func(t *testing.T) {
				_, stderr, code := runCLI(t, args...)
				if code != exitUsage || !strings.Contains(stderr, "'oprov trusted-root --to FILE'") || strings.Count(stderr, "\n") != 1 {
					t.Errorf("oprov %s: exit %d, want 2 and one line naming 'oprov trusted-root': %q", strings.Join(args, " "), code, stderr)
				}
				for _, wrong := range []string{"cosign trusted-root", "proto", "failed to"} {
					if strings.Contains(stderr, wrong) {
						t.Errorf("oprov %s says %q: %q", strings.Join(args, " "), wrong, stderr)
					}
				}
			})
		}
	}
}
