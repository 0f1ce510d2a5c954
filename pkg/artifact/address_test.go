package artifact

import (
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
)

func TestMirrorConfig(t *testing.T) {
	addr, _ := manifest.ParseProviderAddress("example.com/acme/hello")
	for repo, want := range map[string]string{
		"providers/acme/hello": "reg.io/providers/${namespace}/${type}",
		"providers/hello":      "reg.io/providers/${type}",
		"somewhere/else":       "reg.io/somewhere/else",
	} {
		if got := repositoryTemplate(oci.Ref{Registry: "reg.io", Repository: repo}, addr); got != want {
			t.Errorf("template for %s = %s, want %s", repo, got, want)
		}
	}
	short, err := manifest.ParseProviderAddress("acme/hello")
	if err != nil || short.String() != "registry.opentofu.org/acme/hello" {
		t.Errorf("short address: %v %v", short, err)
	}
	if _, err := manifest.ParseProviderAddress("a/b/c/d"); err == nil {
		t.Error("four-part address accepted")
	}
	cfg := MirrorInstallation(oci.Ref{Registry: "reg.io", Repository: "providers/acme/hello"}, addr).String()
	if !strings.Contains(cfg, `include             = ["example.com/acme/hello"]`) || !strings.Contains(cfg, "direct {") {
		t.Errorf("config:\n%s", cfg)
	}
}

// A registry that answers 503 twice is retried until it answers.
