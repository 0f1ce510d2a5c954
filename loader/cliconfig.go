package loader

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
)

// UserCLIConfig finds the CLI configuration the user's own tofu (or terraform) would read:
// TF_CLI_CONFIG_FILE, else ~/.tofurc (falling back to ~/.terraformrc), else ~/.terraformrc for
// terraform. It returns "" when there is none (or TF_CLI_CONFIG_FILE names a missing file).
func UserCLIConfig(program string) string {
	if p := os.Getenv("TF_CLI_CONFIG_FILE"); p != "" {
		if fileExists(p) {
			return p
		}
		return "" // tofu, too, goes on without a configuration file that is not there
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	candidates := []string{".tofurc", ".terraformrc"}
	if strings.Contains(filepath.Base(program), "terraform") {
		candidates = []string{".terraformrc"}
	}
	for _, c := range candidates {
		if p := filepath.Join(home, c); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// CLIConfig renders the CLI configuration that installs the given providers from the cache's
// filesystem mirror and everything else the way the user's own configuration says (directly from
// the registries when it says nothing). userPath, when set, is the user's configuration: its
// other settings are kept, and its installation methods get the managed providers excluded.
// Notes say what could not be kept.
func CLIConfig(installed []Installed, userPath string) (string, []string, error) {
	var b strings.Builder
	var notes []string
	var managed []string
	for _, in := range installed {
		managed = append(managed, in.Addr)
	}
	sort.Strings(managed)

	var userMethods []string
	if userPath != "" {
		src, err := os.ReadFile(userPath)
		if err != nil {
			return "", nil, fmt.Errorf("reading your CLI configuration %s: %w", userPath, err)
		}
		kept, methods, n, err := splitUserConfig(userPath, src, managed)
		if err != nil {
			notes = append(notes, fmt.Sprintf("your CLI configuration %s could not be read (%v), so none of it was kept", userPath, err))
		} else {
			if kept != "" {
				fmt.Fprintf(&b, "# Kept from %s\n%s\n", userPath, kept)
			}
			userMethods = methods
			notes = append(notes, n...)
		}
	}

	b.WriteString("# Written by oprov: the providers oprov manages come from its cache's filesystem mirror.\n")
	b.WriteString("provider_installation {\n")
	for _, in := range installed {
		fmt.Fprintf(&b, "  filesystem_mirror {\n    path    = %s\n    include = [%q]\n  }\n", hclString(in.MirrorRoot), in.Addr)
	}
	if len(userMethods) == 0 {
		fmt.Fprintf(&b, "  direct {\n    exclude = %s\n  }\n", config.HCLList(managed))
	} else {
		for _, m := range userMethods {
			b.WriteString(m)
		}
	}
	b.WriteString("}\n")
	return b.String(), notes, nil
}

func hclString(s string) string { return fmt.Sprintf("%q", filepath.ToSlash(s)) }

// splitUserConfig returns the user's configuration without its provider_installation blocks
// (kept byte for byte), and those blocks' installation methods re-rendered with the managed
// providers excluded.
func splitUserConfig(path string, src []byte, managed []string) (string, []string, []string, error) {
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return "", nil, nil, fmt.Errorf("%s", diags.Error())
	}
	body := f.Body.(*hclsyntax.Body)
	var kept strings.Builder
	pos := 0
	var methods, notes []string
	var installBlocks []*hclsyntax.Block
	for _, blk := range body.Blocks {
		if blk.Type == "provider_installation" {
			installBlocks = append(installBlocks, blk)
		}
	}
	sort.Slice(installBlocks, func(i, j int) bool { return installBlocks[i].Range().Start.Byte < installBlocks[j].Range().Start.Byte })
	for _, blk := range installBlocks {
		r := blk.Range()
		kept.Write(src[pos:r.Start.Byte])
		pos = r.End.Byte
		for _, m := range blk.Body.Blocks {
			text, note, err := renderMethod(m, managed)
			if err != nil {
				notes = append(notes, fmt.Sprintf("%s:%d: %s block not kept: %v", path, m.Range().Start.Line, m.Type, err))
				continue
			}
			if note != "" {
				notes = append(notes, note)
			}
			methods = append(methods, text)
		}
	}
	kept.Write(src[pos:])
	return strings.TrimSpace(kept.String()), methods, notes, nil
}

// renderMethod re-renders one installation method with the managed providers added to its
// exclude list (dev_overrides is kept as it is, with a note if it overrides a managed provider).
func renderMethod(m *hclsyntax.Block, managed []string) (string, string, error) {
	attrs := map[string]cty.Value{}
	for name, a := range m.Body.Attributes {
		v, d := a.Expr.Value(nil)
		if d.HasErrors() {
			return "", "", fmt.Errorf("%s is not a literal value", name)
		}
		attrs[name] = v
	}
	var b strings.Builder
	note := ""
	fmt.Fprintf(&b, "  %s {\n", m.Type)
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	if m.Type == "dev_overrides" {
		for _, n := range names {
			if attrs[n].Type() != cty.String {
				return "", "", fmt.Errorf("%s is not a string", n)
			}
			fmt.Fprintf(&b, "    %q = %s\n", n, hclString(attrs[n].AsString()))
			for _, a := range managed {
				if pa, err := manifest.ParseProviderAddress(n); err == nil && pa.String() == a {
					note = fmt.Sprintf("your dev_overrides for %s is kept and takes precedence over oprov's install", a)
				}
			}
		}
		b.WriteString("  }\n")
		return b.String(), note, nil
	}
	exclude := map[string]bool{}
	for _, a := range managed {
		exclude[a] = true
	}
	for _, n := range names {
		v := attrs[n]
		switch {
		case n == "exclude" && v.CanIterateElements():
			for it := v.ElementIterator(); it.Next(); {
				_, e := it.Element()
				if e.Type() == cty.String {
					exclude[e.AsString()] = true
				}
			}
		case v.Type() == cty.String:
			fmt.Fprintf(&b, "    %s = %s\n", n, hclString(v.AsString()))
		case v.CanIterateElements():
			var items []string
			for it := v.ElementIterator(); it.Next(); {
				_, e := it.Element()
				if e.Type() != cty.String {
					return "", "", fmt.Errorf("%s holds a value that is not a string", n)
				}
				items = append(items, e.AsString())
			}
			fmt.Fprintf(&b, "    %s = %s\n", n, config.HCLList(items))
		default:
			return "", "", fmt.Errorf("%s has an unexpected type", n)
		}
	}
	ex := make([]string, 0, len(exclude))
	for e := range exclude {
		ex = append(ex, e)
	}
	sort.Strings(ex)
	fmt.Fprintf(&b, "    exclude = %s\n  }\n", config.HCLList(ex))
	return b.String(), note, nil
}
