package tests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testreg"
)

// messageCase is one ordinary mistake and what oprov must say about it: its cause and its fix.
type messageCase struct {
	name       string
	args       func(t *testing.T) []string
	code       int
	cause, fix string
}

// TestMessagesNameCauseAndFix makes the mistakes a newcomer makes, each seen in practice, and
// checks that the one line oprov prints names the cause and the fix, with the right exit code.
func TestMessagesNameCauseAndFix(t *testing.T) {
	reg := testreg.Start(t, testreg.Options{})
	for _, tc := range append(referenceMessages(reg), configMessages()...) {
		t.Run(tc.name, func(t *testing.T) {
			r := oprov(t, []string{"SSL_CERT_FILE=" + reg.CAFile, "HOME=" + t.TempDir()}, tc.args(t)...)
			if r.Code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", r.Code, tc.code, r.Stderr)
			}
			for _, want := range []string{tc.cause, tc.fix} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.Stderr)
				}
			}
			if strings.HasPrefix(r.Stderr, "oprov: oprov ") || strings.Count(r.Stderr, "\n") != 1 {
				t.Errorf("want one 'oprov: ...' line without a doubled prefix, got:\n%s", r.Stderr)
			}
		})
	}
}

// args makes a case's arguments from fixed words.
func args(words ...string) func(*testing.T) []string {
	return func(*testing.T) []string { return words }
}

// referenceMessages are mistakes in what names a repository, a file or a flag's value.
func referenceMessages(reg *testreg.Registry) []messageCase {
	return []messageCase{
		{"a repository that does not exist", args("inspect", reg.Host+"/providers/acme/nothing-here"), 11,
			"no repository providers/acme/nothing-here on " + reg.Host, "'oprov push' creates a repository"},
		{"schema of a missing file", args("schema", "./terraform-provider-missing"), 2,
			"schema ./terraform-provider-missing: no such file", "give the path of a provider executable or source directory, or REPO:VERSION"},
		{"a reference with https://", args("inspect", "https://"+reg.Host+"/providers/acme/hello"), 2,
			"leave out https://", "write " + reg.Host + "/providers/acme/hello"},
		{"a reference with capitals", args("pull", reg.Host+"/Providers/Acme/Hello:1.0.0"), 2,
			"repository names are lowercase", "write " + reg.Host + "/providers/acme/hello:1.0.0"},
		{"save --to into a missing directory", func(t *testing.T) []string {
			return []string{"save", reg.Host + "/providers/acme/hello:1.0.0", "--to", filepath.Join(t.TempDir(), "missing", "p.tar")}
		}, 2, "no such directory", "create it, or write the tarball elsewhere"},
		{"-C naming a missing directory", func(t *testing.T) []string {
			return []string{"install", "-C", filepath.Join(t.TempDir(), "infra")}
		}, 2, "-C: no such directory", "give the directory that holds oprov.hcl"},
		{"--concurrency 0", func(t *testing.T) []string {
			return []string{"push", t.TempDir(), reg.Host + "/providers/acme/hello", "--concurrency", "0"}
		}, 2, `invalid argument "0" for "--concurrency" flag`, "give at least 1"},
		{"mirror from an origin that cannot be reached", args("mirror", "127.0.0.1:1/acme/hello", "--to", reg.Host+"/m/hello"), 3,
			"cannot reach the origin 127.0.0.1:1: connection refused", "carry the result over with 'oprov save' and 'oprov load'"},
		{"a missing argument", args("push", "dist"), 2, "push wants release files and a repository", "see 'oprov push --help'"},
	}
}

// configMessages are mistakes in oprov.hcl and in a policy file: each points at its file:line.
func configMessages() []messageCase {
	const tf = "terraform {\n  required_providers {\n    hello = { source = \"example.com/acme/hello\" }\n  }\n}\n"
	config := func(hcl string, files map[string]string) func(*testing.T) []string {
		return func(t *testing.T) []string {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "main.tf"), tf)
			writeFile(t, filepath.Join(dir, "oprov.hcl"), hcl)
			for name, content := range files {
				writeFile(t, filepath.Join(dir, name), content)
			}
			return []string{"lock", "-C", dir}
		}
	}
	mirror := func(template, extra string) string {
		return "oci_mirror {\n  repository_template = \"" + template + "\"\n  include = [\"example.com/acme/*\"]\n\n" + extra + "\n}\n"
	}
	badMode := "trust \"acme\" {\n  providers = [\"example.com/acme/*\"]\n  keys = [\"k.pub\"]\n  mode = \"enforcing\"\n}\n"
	return []messageCase{
		{"policy naming a missing file", config(mirror("r.example/p/${namespace}/${type}", `  policy = "missing.hcl"`), nil), 1,
			`oprov.hcl:5: oci_mirror policy "missing.hcl": there is no file`, "the path is relative to oprov.hcl"},
		{"a bad mode in a policy file", config(mirror("r.example/p/${namespace}/${type}", `  policy = "pol.hcl"`), map[string]string{"pol.hcl": badMode}), 1,
			`pol.hcl:4: trust "acme": mode "enforcing"`, `want "enforce" (refuse what no trusted key signed) or "warn"`},
		{"a repository_template without ${type}", config(mirror("r.example/p/${namespace}/hello", ""), nil), 1,
			"oprov.hcl:2: oci_mirror: repository_template \"r.example/p/${namespace}/hello\" has no ${type}", "add ${type}"},
	}
}
