package loader

import (
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/oprov/oprov/pkg/oci"
)

// withCredentials adds to a CLI configuration the oci_default_credentials block that points
// OpenTofu at the credential files oprov used (see oci.TofuCredentialFiles), unless the user's
// configuration (kept in text) has such a block already: only one is allowed, so a note says
// what to add to it.
func withCredentials(text, userCfg string, files []string) (string, []string) {
	if len(files) == 0 {
		return text, nil
	}
	if userCfg != "" && hasBlock(userCfg, "oci_default_credentials") {
		return text, []string{fmt.Sprintf("your CLI configuration %s has its own oci_default_credentials block, so oprov did not point OpenTofu at %s: add them to its docker_style_config_files if OpenTofu needs them",
			userCfg, strings.Join(files, ", "))}
	}
	return text + oci.TofuCredentialsBlock(files), nil
}

// hasBlock reports whether an HCL file has a top-level block of the given type.
func hasBlock(path, typ string) bool {
	src, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return false
	}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type == typ {
			return true
		}
	}
	return false
}
