package loader

import (
	"fmt"
	"strings"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// withCredentials adds to a CLI configuration the oci_default_credentials block that points
// OpenTofu at the credential files oprov used (see oci.TofuCredentialFiles), unless the user's
// configuration (kept in it) has such a block already: only one is allowed, so a note says what
// to add to it.
func withCredentials(cfg *tofufiles.CLIConfig, files []string) []string {
	if len(files) == 0 {
		return nil
	}
	for _, it := range cfg.Settings {
		if it.IsBlock() && it.Keys[0] == "oci_default_credentials" {
			return []string{fmt.Sprintf("your CLI configuration %s has its own oci_default_credentials block, so oprov did not point OpenTofu at %s: add them to its docker_style_config_files if OpenTofu needs them",
				it.From, strings.Join(files, ", "))}
		}
	}
	cfg.Settings = append(cfg.Settings, oci.TofuCredentials(files)...)
	return nil
}
