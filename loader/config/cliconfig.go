package config

import (
	"fmt"
	"strings"
)

// MirrorCLIConfig renders the plain oci_mirror CLI configuration of oprov.hcl's blocks, for
// OpenTofu >= 1.10 users who want OpenTofu to install from the registries itself.
func (c *Config) MirrorCLIConfig() string {
	var b strings.Builder
	b.WriteString("provider_installation {\n")
	var includes []string
	for _, m := range c.Mirrors {
		var inc, exc []string
		for _, p := range m.Include {
			inc = append(inc, p.String())
		}
		for _, p := range m.Exclude {
			exc = append(exc, p.String())
		}
		includes = append(includes, inc...)
		fmt.Fprintf(&b, "  oci_mirror {\n    repository_template = %q\n    include             = %s\n", m.RepositoryTemplate, HCLList(inc))
		if len(exc) > 0 {
			fmt.Fprintf(&b, "    exclude             = %s\n", HCLList(exc))
		}
		b.WriteString("  }\n")
	}
	fmt.Fprintf(&b, "  direct {\n    exclude = %s\n  }\n}\n", HCLList(includes))
	return b.String()
}

// HCLList renders a list of strings as an HCL list.
func HCLList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
