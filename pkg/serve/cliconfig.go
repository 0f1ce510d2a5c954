package serve

import "github.com/oprov/oprov/internal/tofufiles"

// CLIConfigFor renders the CLI configuration for a server at url: the provider_installation block
// when it serves providers (the providers include names from the mirror, everything else
// directly; every provider from the mirror when include is empty), and a host block for each module hostname, whose
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
