package serve

import (
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
)

func TestParsePath(t *testing.T) {
	for path, want := range map[string]request{
		"/example.com/acme/hello/index.json":                                           {kind: docIndex},
		"/example.com/acme/hello/1.2.0-rc.1+abc.json":                                  {kind: docVersion, version: versions.MustParseVersion("1.2.0-rc.1+abc")},
		"/example.com/acme/hello/terraform-provider-hello_1.2.0_linux_arm64.zip":       {kind: docArchive, version: versions.MustParseVersion("1.2.0"), platform: manifest.Platform{OS: "linux", Arch: "arm64"}},
		"/example.com/acme/hello/terraform-provider-hello_1.0.0+a.b_windows_amd64.zip": {kind: docArchive, version: versions.MustParseVersion("1.0.0+a.b"), platform: manifest.Platform{OS: "windows", Arch: "amd64"}},
	} {
		got, err := parsePath(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		want.addr = manifest.ProviderAddress{Hostname: "example.com", Namespace: "acme", Type: "hello"}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", path, got, want)
		}
	}
	for _, path := range []string{
		"", "/", "/index.json", "/acme/hello/index.json", "example.com/acme/hello/index.json",
		"/example.com/acme/hello/x/index.json", "/example.com/acme/hello/v1.0.0.json", "/example.com/acme/hello/1.0.json",
		"/example.com/acme/hello/terraform-provider-other_1.0.0_linux_amd64.zip",
		"/example.com/acme/hello/terraform-provider-hello_1.0.0_linux.zip",
		"/example.com/acme/hello/terraform-provider-hello_1.0.0_linux_amd64.tar",
		"/example.com/acme/hello/1.0.0.zip", "/example.com/a%2Fb/hello/index.json", "/example.com/acme/hello/index.json/",
	} {
		if rq, err := parsePath(path); err == nil {
			t.Errorf("%q parsed as %+v", path, rq)
		}
	}
}

// FuzzParsePath: any path either fails or parses into a request whose documents' own names parse
// back to it.
func FuzzParsePath(f *testing.F) {
	f.Add("/example.com/acme/hello/index.json")
	f.Add("/example.com/acme/hello/1.0.0.json")
	f.Add("/example.com/acme/hello/terraform-provider-hello_1.0.0+x_linux_amd64.zip")
	f.Fuzz(func(t *testing.T, path string) {
		rq, err := parsePath(path)
		if err != nil {
			return
		}
		prefix := "/" + rq.addr.String() + "/"
		var again string
		switch rq.kind {
		case docIndex:
			again = prefix + "index.json"
		case docVersion:
			again = prefix + rq.version.String() + ".json"
		case docArchive:
			again = prefix + archiveName(rq.addr.Type, rq.version.String(), rq.platform)
		}
		rq2, err := parsePath(again)
		if err != nil || rq2 != rq {
			t.Fatalf("%q parsed as %+v; its own name %q parses as %+v, %v", path, rq, again, rq2, err)
		}
	})
}

func TestParseTemplate(t *testing.T) {
	hello := manifest.ProviderAddress{Hostname: "example.com", Namespace: "acme", Type: "hello"}
	for _, tc := range []struct{ tmpl, address, want string }{
		{"reg.io:5000/providers/${namespace}/${type}", "", "reg.io:5000/providers/acme/hello"},
		{"reg.io/${hostname}/${namespace}/${type}", "", "reg.io/example.com/acme/hello"},
		{"oci-layout:/srv/${namespace}/${type}", "", "oci-layout:/srv/acme/hello"},
		{"oci-layout:./layout", "example.com/acme/hello", "oci-layout:./layout"},
		{"reg.io/providers/acme/hello", "example.com/acme/hello", "reg.io/providers/acme/hello"},
	} {
		tm, err := ParseTemplate(tc.tmpl, tc.address)
		if err != nil {
			t.Errorf("%s: %v", tc.tmpl, err)
			continue
		}
		if ref, err := tm.Repository(hello); err != nil || ref.String() != tc.want {
			t.Errorf("%s gives %s, %v; want %s", tc.tmpl, ref, err, tc.want)
		}
	}
	for _, tc := range []struct{ tmpl, address, want string }{
		{"reg.io/${owner}/${type}", "", "unknown variable"},
		{"reg.io/${namespace}/${type}", "example.com/acme/hello", "give no provider address"},
		{"oci-layout:./layout", "", "--address"},
		{"reg.io/providers/${type}:1.0.0", "", "names a tag"},
		{"no-slash-${type}", "", "want HOST"},
		{"oci-layout:./layout", "acme", "namespace"},
		// "reg.io/providers/${namespace}/${type}" in double quotes, as the shell passes it on.
		{"reg.io/providers//", "", "the shell replaced its ${...} variables with nothing"},
		{"reg.io/providers//", "", "'reg.io/providers/${namespace}/${type}'"},
		{"reg.io//", "", "single quotes"},
	} {
		if _, err := ParseTemplate(tc.tmpl, tc.address); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s (%q): error %v, want one saying %q", tc.tmpl, tc.address, err, tc.want)
		}
	}
	if _, err := ParseModuleTemplate("reg.io/modules///"); err == nil || !strings.Contains(err.Error(), "'reg.io/modules/${namespace}/${name}/${system}'") {
		t.Errorf("a module template the shell emptied: %v", err)
	}
	fixed, _ := ParseTemplate("oci-layout:./layout", "example.com/acme/hello")
	if _, err := fixed.Repository(manifest.ProviderAddress{Hostname: "example.com", Namespace: "acme", Type: "other"}); err == nil {
		t.Error("a one-provider layout served another provider")
	}
}

// FuzzParseTemplate: a template that parses expands, for any provider, to a repository without a
// tag, or fails with an error; it never panics.
func FuzzParseTemplate(f *testing.F) {
	f.Add("reg.io/providers/${namespace}/${type}", "")
	f.Add("oci-layout:./l", "example.com/acme/hello")
	f.Fuzz(func(t *testing.T, tmpl, address string) {
		tm, err := ParseTemplate(tmpl, address)
		if err != nil {
			return
		}
		addr := manifest.ProviderAddress{Hostname: "example.com", Namespace: "acme", Type: "hello"}
		if a := tm.Fixed(); a != nil {
			addr = *a
		}
		if ref, err := tm.Repository(addr); err == nil && ref.Reference != "" {
			t.Fatalf("%q gives %s, which has a tag or digest", tmpl, ref)
		}
	})
}

// TestTemplateHostnameInPath: ${hostname} with a port becomes HOST_PORT in a repository path or a
// layout's directory (as load names a bundle's repositories), and stays HOST:PORT as the registry.
func TestTemplateHostnameInPath(t *testing.T) {
	addr, err := parseAddress("localhost:5000/acme/hello")
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		"oci-layout:/l/${hostname}/${namespace}/${type}":      "/l/localhost_5000/acme/hello",
		"reg.example/mirror/${hostname}/${namespace}/${type}": "reg.example/mirror/localhost_5000/acme/hello",
		"${hostname}/providers/${namespace}/${type}":          "localhost:5000/providers/acme/hello",
	} {
		tmpl := &Template{raw: raw}
		ref, err := tmpl.Repository(addr)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		got := ref.Registry + "/" + ref.Repository
		if ref.IsLayout() {
			got = ref.Repository
		}
		if !strings.Contains(got, want) && !strings.Contains(ref.String(), want) {
			t.Errorf("%s gives %s (%s), want %s", raw, got, ref, want)
		}
	}
}
