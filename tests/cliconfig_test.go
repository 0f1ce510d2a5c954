package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// TestUserCLIConfigKeptWithTofu: the user's CLI configuration in OpenTofu's documented forms, a
// dev_overrides block with quoted keys in ~/.tofurc and a credentials.tfrc.json in
// ~/.terraform.d, is kept in what install writes, and real tofu init accepts the result and reads
// the override from it. A file that cannot be read stops install before anything is written.
func TestUserCLIConfigKeptWithTofu(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig)
	home := t.TempDir()
	env := append(append([]string{}, f.env...), "HOME="+home, "XDG_CONFIG_HOME=", "TF_CLI_CONFIG_FILE=", "TERRAFORM_CONFIG=")
	devDir := filepath.Join(t.TempDir(), "dev thing")
	writeFile(t, filepath.Join(home, ".tofurc"), fmt.Sprintf(`provider_installation {
  dev_overrides {
    "example.com/dev/thing" = %q
  }
  direct {}
}
`, devDir))
	writeFile(t, filepath.Join(home, ".terraform.d", "credentials.tfrc.json"),
		`{"credentials": {"app.terraform.io": {"token": "token-from-json"}}}`)

	dir := f.freshCopy(t)
	mustOprov(t, env, "install", "-C", dir)
	rc := filepath.Join(dir, ".terraform", "oprov", "cli.tfrc")
	written, err := os.ReadFile(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"example.com/dev/thing"`, devDir, `credentials "app.terraform.io"`, "token-from-json", "filesystem_mirror"} {
		if !strings.Contains(string(written), want) {
			t.Errorf("install's CLI configuration lacks %s:\n%s", want, written)
		}
	}
	out := mustTofu(t, tofu, dir, append(env, "TF_CLI_CONFIG_FILE="+rc), "init", "-input=false")
	if !strings.Contains(out, "example.com/dev/thing") {
		t.Errorf("tofu init did not report the dev override from the written configuration:\n%s", out)
	}
	if !strings.Contains(out, "example.com/acme/hello") {
		t.Errorf("tofu init did not use hello:\n%s", out)
	}

	// A user file that cannot be read: install stops, names it, and writes no configuration.
	broken := filepath.Join(home, ".terraform.d", "broken.tfrc")
	writeFile(t, broken, "provider_installation {\n")
	fresh := f.freshCopy(t)
	r := oprov(t, env, "install", "-C", fresh)
	if r.Code == 0 || !strings.Contains(r.Stderr, broken) {
		t.Errorf("install with an unreadable %s: exit %d\n%s%s", broken, r.Code, r.Stdout, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(fresh, ".terraform", "oprov", "cli.tfrc")); !os.IsNotExist(err) {
		t.Errorf("a CLI configuration was written without the user's: %v", err)
	}
}

// awkwardName holds what Go's %q gets wrong for OpenTofu's CLI configuration reader (HCL 1,
// which copies a ${...} as it stands and cannot end a string inside one): template sequences,
// quotes and backslashes inside ${...}, an unterminated ${, a %{ and a control character.
const awkwardName = "c ${HOME} %{x} \"q\\b\x01 ${a\"b\\c} x${y"

// TestTofuReadsAwkwardPaths: with the cache and the configuration in directories whose names hold
// awkwardName, the CLI configuration and lock file install writes are read by real tofu, which
// installs hello from the filesystem mirror the configuration names. Control: the same path
// written with %q is refused by tofu, or sends it elsewhere.
func TestTofuReadsAwkwardPaths(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig)
	cache := filepath.Join(t.TempDir(), awkwardName, "cache")
	env := append(append([]string{}, f.env...), "OPROV_CACHE_DIR="+cache, "TF_CLI_CONFIG_FILE=", "TERRAFORM_CONFIG=")
	dir := filepath.Join(t.TempDir(), awkwardName)
	if err := os.CopyFS(dir, os.DirFS(f.freshCopy(t))); err != nil {
		t.Fatal(err)
	}
	mustOprov(t, env, "install", "-C", dir)
	rc := filepath.Join(dir, ".terraform", "oprov", "cli.tfrc")
	written, err := os.ReadFile(rc)
	if err != nil {
		t.Fatal(err)
	}
	// Without the links install made, tofu must install hello from the mirror path it read.
	if err := os.RemoveAll(filepath.Join(dir, ".terraform", "providers")); err != nil {
		t.Fatal(err)
	}
	out := mustTofu(t, tofu, dir, append(env, "TF_CLI_CONFIG_FILE="+rc), "init", "-input=false")
	if !strings.Contains(out, "Installed example.com/acme/hello") {
		t.Errorf("tofu init did not install hello from the mirror:\n%s\nconfiguration:\n%s", out, written)
	}
	lock, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
	if err != nil || !strings.Contains(string(lock), `provider "example.com/acme/hello"`) {
		t.Errorf("lock file: %v\n%s", err, lock)
	}

	// Control: the mirror's path as %q writes it.
	entries, err := os.ReadDir(filepath.Join(cache, "mirror"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("mirror roots: %v %v", entries, err)
	}
	root := filepath.ToSlash(filepath.Join(cache, "mirror", entries[0].Name()))
	var bad []string
	for _, line := range strings.Split(string(written), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "path ") {
			line = "    path = " + fmt.Sprintf("%q", root)
		}
		bad = append(bad, line)
	}
	if strings.Join(bad, "\n") == string(written) {
		t.Fatalf("no mirror path in:\n%s", written)
	}
	os.RemoveAll(filepath.Join(dir, ".terraform"))
	if out, err := tofuRun(t, tofu, dir, append(env, "TF_CLI_CONFIG_FILE="+writeRC(t, strings.Join(bad, "\n"))), "init", "-input=false"); err == nil {
		t.Errorf("control: tofu init with the path written by %%q worked, so the check proves nothing:\n%s", out)
	} else {
		t.Logf("control: tofu init with the path written by %%q: %v\n%s", err, lastLines(out, 6))
	}
}

// lastLines gives the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
