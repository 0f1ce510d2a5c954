package loader

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/oprov/oprov/pkg/tofufiles"
)

const printedRC = `provider_installation {
  oci_mirror {
    repository_template = "reg.example/providers/${namespace}/${type}"
    include             = ["example.com/acme/*"]
  }
  direct {
    exclude = ["example.com/acme/*"]
  }
}
oci_default_credentials {
  docker_style_config_files = ["/home/u/.docker/config.json"]
}
`

func countBlocks(t *testing.T, src string) map[string]int {
	t.Helper()
	f, d := hclsyntax.ParseConfig([]byte(src), "x", hcl.InitialPos)
	if d.HasErrors() {
		t.Fatalf("merged text does not parse: %s\n%s", d.Error(), src)
	}
	n := map[string]int{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		key := b.Type
		if !singletonBlocks[b.Type] {
			key += "\x00" + strings.Join(b.Labels, "\x00")
		}
		n[key]++
	}
	return n
}

// printed is printedRC as oprov holds it.
func printed(t *testing.T) *tofufiles.CLIConfig {
	t.Helper()
	c, err := tofufiles.ParseCLIConfig("printed", []byte(printedRC))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMergePrinted: appended to the user's configuration, the printed text never repeats one of
// its blocks; what was left out is named; with no user configuration the text is unchanged.
func TestMergePrinted(t *testing.T) {
	if got, notes := MergePrinted(printed(t), nil); got != printed(t).String() || notes != nil {
		t.Errorf("no user configuration changed the text: %q %v", got, notes)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, user string
		wantNote   []string
		wantIn     []string
	}{
		{"credentials", "oci_default_credentials {\n  discover_ambient_credentials = false\n}\n",
			[]string{"left out the oci_default_credentials block", "/home/u/.docker/config.json"}, []string{"oci_mirror"}},
		{"installation", "provider_installation {\n  filesystem_mirror {\n    path = \"/srv/mirror\"\n    include = [\"registry.opentofu.org/*/*\"]\n  }\n}\n",
			[]string{"its own provider_installation block (line 1)"}, []string{"filesystem_mirror", "/srv/mirror", "oci_mirror", "oci_default_credentials"}},
		{"unrelated", "plugin_cache_dir = \"/tmp/x\"\ncredentials \"app.terraform.io\" {\n  token = \"x\"\n}\n", nil, []string{"oci_mirror", "oci_default_credentials", "direct"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".tfrc")
			if err := os.WriteFile(p, []byte(tc.user), 0o644); err != nil {
				t.Fatal(err)
			}
			got, notes := MergePrinted(printed(t), []string{p})
			for k, n := range countBlocks(t, tc.user+"\n"+got) {
				if n > 1 && tc.name != "installation" {
					t.Errorf("%q appears %d times in the user's configuration plus the printed one:\n%s", k, n, got)
				}
			}
			if tc.name == "installation" {
				if n := countBlocks(t, got)["provider_installation"]; n != 1 {
					t.Errorf("merged text holds %d provider_installation blocks", n)
				}
				if !strings.Contains(got, `exclude = ["example.com/acme/*"]`) {
					t.Errorf("the user's method does not exclude oprov's providers:\n%s", got)
				}
				if strings.Contains(got, "direct") {
					t.Errorf("oprov's direct method was added to a user's own methods:\n%s", got)
				}
			}
			all := strings.Join(notes, "\n")
			for _, w := range tc.wantNote {
				if !strings.Contains(all, w) {
					t.Errorf("notes do not say %q: %v", w, notes)
				}
			}
			if tc.wantNote == nil && len(notes) > 0 {
				t.Errorf("unexpected notes: %v", notes)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(got, w) {
					t.Errorf("merged text lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
