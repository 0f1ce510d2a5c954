package serve

import "github.com/oprov/oprov/internal/tofufiles"

// CLIConfig renders the CLI configuration (provider_installation) with which OpenTofu and
// Terraform install from a mirror at url: the providers include names (patterns allowed) from the
// mirror and everything else directly, or every provider from the mirror when include is empty.
func CLIConfig(url string, include []string) string {
	mirror := tofufiles.Method{Kind: tofufiles.NetworkMirror, URL: url}
	in := &tofufiles.Installation{Methods: []tofufiles.Method{mirror}}
	if len(include) > 0 {
		in.Methods[0].Include = include
		in.Methods = append(in.Methods, tofufiles.Method{Kind: tofufiles.Direct, Exclude: include})
	}
	return (&tofufiles.CLIConfig{Installation: in}).String()
}
