package serve

import "github.com/oprov/oprov/internal/tofufiles"

// CLIConfig renders the CLI configuration (provider_installation) with which OpenTofu and
// Terraform install from a mirror at url: the providers include names (patterns allowed) from the
// mirror and everything else directly, or every provider from the mirror when include is empty.
func CLIConfig(url string, include []string) string {
	return CLIConfigFor(url, true, include, nil)
}

// CLIConfigFor renders the CLI configuration for a server at url: the provider_installation block
// when it serves providers (see CLIConfig), and a host block for each module hostname, whose
// modules.v1 service is then this server's.
func CLIConfigFor(url string, providers bool, include, moduleHosts []string) string {
	cfg := &tofufiles.CLIConfig{}
	if providers {
		mirror := tofufiles.Method{Kind: tofufiles.NetworkMirror, URL: url}
		in := &tofufiles.Installation{Methods: []tofufiles.Method{mirror}}
		if len(include) > 0 {
			in.Methods[0].Include = include
			in.Methods = append(in.Methods, tofufiles.Method{Kind: tofufiles.Direct, Exclude: include})
		}
		cfg.Installation = in
	}
	for _, h := range moduleHosts {
		cfg.Settings = append(cfg.Settings, tofufiles.HostServices(h, map[string]string{"modules.v1": ModuleBaseURL(url, h)}))
	}
	return cfg.String()
}
