package tofufiles

import "sort"

// HostServices is a host block: it gives a hostname's services (such as "modules.v1") their base
// URLs, so OpenTofu and Terraform skip service discovery for that hostname and use them.
func HostServices(hostname string, services map[string]string) Item {
	keys := make([]string, 0, len(services))
	for k := range services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var entries []Item
	for _, k := range keys {
		entries = append(entries, attr(k, str(services[k])))
	}
	svc := attr("services", Value{Kind: kindObject, Object: entries})
	svc.Assign = true
	return block([]string{"host", hostname}, svc)
}
