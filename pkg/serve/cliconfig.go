package serve

import (
	"sort"

	"github.com/oprov/oprov/pkg/tofufiles"
)

// CLIConfigFor renders the CLI configuration for a server at url: the provider_installation block
// when it serves providers through the network mirror (the providers include names from the
// mirror, everything else directly; every provider from the mirror when include is empty), and a
// host block for each module hostname (its modules.v1 this server's) and each provider registry
// hostname (its providers.v1 this server's; such providers then need no provider_installation
// block, so none is printed when registryHosts is not nil).
func CLIConfigFor(url string, providers bool, include, moduleHosts, registryHosts []string) string {
	cfg := &tofufiles.CLIConfig{}
	if providers && registryHosts == nil {
		mirror := tofufiles.Method{Kind: tofufiles.NetworkMirror, URL: url}
		in := &tofufiles.Installation{Methods: []tofufiles.Method{mirror}}
		if len(include) > 0 {
			in.Methods[0].Include = include
			in.Methods = append(in.Methods, tofufiles.Method{Kind: tofufiles.Direct, Exclude: include})
		}
		cfg.Installation = in
	}
	services := map[string]map[string]string{}
	add := func(h, svc, base string) {
		if services[h] == nil {
			services[h] = map[string]string{}
		}
		services[h][svc] = base
	}
	for _, h := range moduleHosts {
		add(h, "modules.v1", ModuleBaseURL(url, h))
	}
	for _, h := range registryHosts {
		add(h, "providers.v1", RegistryBaseURL(url, h))
	}
	hosts := make([]string, 0, len(services))
	for h := range services {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		cfg.Settings = append(cfg.Settings, tofufiles.HostServices(h, services[h]))
	}
	return cfg.String()
}
