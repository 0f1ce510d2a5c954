package module

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		in, kind, pkg, full, sub string
	}{
		{"./net", "local", "./net", "./net", ""},
		{"../x/../y", "local", "../y", "../y", ""},
		{"hashicorp/consul/aws", "registry", "registry.opentofu.org/hashicorp/consul/aws", "registry.opentofu.org/hashicorp/consul/aws", ""},
		{"example.com/ns/vpc/aws//modules/sub", "registry", "example.com/ns/vpc/aws", "example.com/ns/vpc/aws//modules/sub", "modules/sub"},
		{"127.0.0.1:8443/ns/vpc/aws", "registry", "127.0.0.1:8443/ns/vpc/aws", "127.0.0.1:8443/ns/vpc/aws", ""},
		{"git::https://example.com/net.git?ref=v1.2.0", "git", "git::https://example.com/net.git?ref=v1.2.0", "git::https://example.com/net.git?ref=v1.2.0", ""},
		{"git::https://example.com/net.git//modules/a?ref=v1", "git", "git::https://example.com/net.git?ref=v1", "git::https://example.com/net.git//modules/a?ref=v1", "modules/a"},
		{"git::ssh://git@example.com/net.git", "git", "git::ssh://git@example.com/net.git", "git::ssh://git@example.com/net.git", ""},
		{"git::git@example.com:org/net.git?ref=main", "git", "git::git@example.com:org/net.git?ref=main", "git::git@example.com:org/net.git?ref=main", ""},
		{"https://example.com/net.git?ref=v2", "git", "git::https://example.com/net.git?ref=v2", "git::https://example.com/net.git?ref=v2", ""},
		{"https://example.com/m/net.zip", "http", "https://example.com/m/net.zip", "https://example.com/m/net.zip", ""},
		{"https://example.com/m/net?archive=tar.gz", "http", "https://example.com/m/net?archive=tar.gz", "https://example.com/m/net?archive=tar.gz", ""},
		{"https://example.com/m/net.tgz//sub", "http", "https://example.com/m/net.tgz", "https://example.com/m/net.tgz//sub", "sub"},
		{"oci://example.com/mods/net?tag=1.0.0", "oci", "oci://example.com/mods/net?tag=1.0.0", "oci://example.com/mods/net?tag=1.0.0", ""},
		{"oci://example.com/mods/net//sub?digest=sha256:ab", "oci", "oci://example.com/mods/net?digest=sha256%3Aab", "oci://example.com/mods/net//sub?digest=sha256%3Aab", "sub"},
	} {
		s, err := ParseSource(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if s.Kind.String() != tc.kind || s.Package() != tc.pkg || s.String() != tc.full || s.Subdir != tc.sub {
			t.Errorf("%s: got %s %q %q %q, want %s %q %q %q", tc.in, s.Kind, s.Package(), s.String(), s.Subdir, tc.kind, tc.pkg, tc.full, tc.sub)
		}
		// The full address parses back to itself: the lock and modules.json can be compared.
		again, err := ParseSource(s.String())
		if err != nil || again.String() != s.String() {
			t.Errorf("%s: %q does not parse back to itself: %q %v", tc.in, s.String(), again.String(), err)
		}
	}
}

func TestParseSourceRefuses(t *testing.T) {
	for _, in := range []string{
		"", "git::ext::sh -c touch% /tmp/pwned", "git::file:///etc", "git::https://example.com/x.git?ref=--upload-pack=evil",
		"git::https://example.com/x.git//../../etc?ref=v1", "https://example.com/x.zip//..", "s3::https://s3.amazonaws.com/b/x.zip",
		"oci://example.com/x?tag=1&digest=sha256:ab", "oci://example.com", "oci://example.com/x?foo=1",
		"ftp://example.com/x.zip", "https://user:pw@example.com/x.zip", "hashicorp/consul", "github.com/hashicorp/example",
		"git::https://example.com/x.git?ref=a&ref=b", "file::/etc",
	} {
		if s, err := ParseSource(in); err == nil {
			t.Errorf("%q: parsed as %s %q, want an error", in, s.Kind, s.String())
		} else if !errors.Is(err, errSource) {
			t.Errorf("%q: %v is not errSource", in, err)
		}
	}
}

// FuzzParseSource: any input parses or is refused; a parsed address has no subdirectory that
// leaves its package, names no disallowed git transport, and its canonical form (String) parses
// back to the same Source, kind included.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"./a", "ns/n/s", "h.io/ns/n/s//x", "git::https://h/r.git//a?ref=v1", "https://h/a.zip?archive=zip",
		"oci://h/r?tag=1", "git::git@h:o/r.git", "../..", "https://h/x//../y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSource(in)
		if err != nil {
			return
		}
		if s.Subdir == ".." || strings.HasPrefix(s.Subdir, "../") || strings.HasPrefix(s.Subdir, "/") {
			t.Fatalf("%q: subdirectory %q leaves the package", in, s.Subdir)
		}
		if s.Kind == KindGit && (strings.HasPrefix(s.URL, "ext::") || strings.HasPrefix(s.URL, "file:") || strings.HasPrefix(s.URL, "-") || strings.HasPrefix(s.Ref, "-")) {
			t.Fatalf("%q: git URL %q ref %q allowed", in, s.URL, s.Ref)
		}
		// The canonical form is what the lock and modules.json record: read back, it must be the
		// same source, kind and all, or a lock would judge another package than was fetched.
		again, err := ParseSource(s.String())
		if err != nil {
			t.Fatalf("%q: %q does not parse: %v", in, s.String(), err)
		}
		if again != s {
			t.Fatalf("%q: %s %q parses back to another source: %s %q (%+v, want %+v)", in, s.Kind, s.String(), again.Kind, again.String(), again, s)
		}
	})
}

func TestOtherGetters(t *testing.T) {
	for _, in := range []string{"s3::https://s3.amazonaws.com/b/x.zip", "github.com/hashicorp/example", "hg::http://example.com/r", "bitbucket.org/a/b"} {
		if _, err := ParseSource(in); !errors.Is(err, errOtherGetter) {
			t.Errorf("%q: %v, want errOtherGetter", in, err)
		}
	}
	for _, in := range []string{"git::ext::sh -c x", "file::/etc", "git::file:///etc"} {
		if _, err := ParseSource(in); err == nil || errors.Is(err, errOtherGetter) {
			t.Errorf("%q: %v, want a refusal", in, err)
		}
	}
}
