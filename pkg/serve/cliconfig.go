package serve

import (
	"fmt"
	"strings"
)

// CLIConfig renders the CLI configuration (provider_installation) with which OpenTofu and
// Terraform install from a mirror at url: the providers include names (patterns allowed) from the
// mirror and everything else directly, or every provider from the mirror when include is empty.
func CLIConfig(url string, include []string) string {
	var b strings.Builder
	b.WriteString("provider_installation {\n  network_mirror {\n")
	if len(include) == 0 {
		fmt.Fprintf(&b, "    url = %q\n  }\n}\n", url)
		return b.String()
	}
	list := quoteList(include)
	fmt.Fprintf(&b, "    url     = %q\n    include = %s\n  }\n  direct {\n    exclude = %s\n  }\n}\n", url, list, list)
	return b.String()
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
