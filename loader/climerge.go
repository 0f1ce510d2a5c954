package loader

import (
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// singletonBlocks are the top-level CLI configuration blocks OpenTofu allows once per file
// (a second oci_default_credentials makes tofu 1.12 panic; a second provider_installation is an
// error). Labelled blocks (credentials "HOST", host "HOST", oci_repository_credentials "REPO")
// may appear once per label.
var singletonBlocks = map[string]bool{
	"oci_default_credentials": true,
	"provider_installation":   true,
	"credentials_helper":      true,
}

// MergePrinted fits a CLI configuration that oprov prints for the user to append to their own
// (userPath, as UserCLIConfig finds it; "" for none) so that the two together never hold a block
// twice:
//   - a block the user's configuration already has (oci_default_credentials, credentials_helper,
//     or a labelled block with the same labels) is left out, with a note saying so;
//   - provider_installation, which the printed text exists for, is printed merged: oprov's
//     methods first, then the user's own methods with oprov's providers excluded, and a note says
//     to put it in place of the user's block.
//
// A user configuration that cannot be parsed leaves the text as it is, with a note.
func MergePrinted(printed, userPath string) (string, []string) {
	if userPath == "" {
		return printed, nil
	}
	usrc, err := os.ReadFile(userPath)
	if err != nil {
		return printed, []string{fmt.Sprintf("your CLI configuration %s could not be read (%v): check that the configuration below does not repeat one of its blocks", userPath, err)}
	}
	uf, diags := hclsyntax.ParseConfig(usrc, userPath, hcl.InitialPos)
	if diags.HasErrors() {
		return printed, []string{fmt.Sprintf("your CLI configuration %s could not be parsed (%s): check that the configuration below does not repeat one of its blocks", userPath, diags.Error())}
	}
	psrc := []byte(printed)
	pf, diags := hclsyntax.ParseConfig(psrc, "printed", hcl.InitialPos)
	if diags.HasErrors() {
		return printed, nil // oprov's own text: tested to parse
	}
	userHas := map[string]*hclsyntax.Block{}
	for _, b := range uf.Body.(*hclsyntax.Body).Blocks {
		userHas[blockKey(b)] = b
	}
	var out strings.Builder
	var notes []string
	pos := 0
	for _, b := range pf.Body.(*hclsyntax.Body).Blocks {
		ub, dup := userHas[blockKey(b)]
		if !dup {
			continue
		}
		r := b.Range()
		out.Write(psrc[pos:r.Start.Byte])
		pos = r.End.Byte
		if b.Type != "provider_installation" {
			notes = append(notes, fmt.Sprintf("left out the %s block: your CLI configuration %s has one already (line %d), and OpenTofu allows only one",
				blockName(b), userPath, ub.Range().Start.Line))
			if b.Type == "oci_default_credentials" {
				if files := stringListAttr(b, "docker_style_config_files"); len(files) > 0 {
					notes[len(notes)-1] += fmt.Sprintf("; add %s to its docker_style_config_files if OpenTofu needs them", strings.Join(files, ", "))
				}
			}
			continue
		}
		merged, n := mergeInstallation(psrc, b, ub, userPath)
		out.WriteString(merged)
		notes = append(notes, n...)
	}
	out.Write(psrc[pos:])
	return out.String(), notes
}

// blockKey names a block with its labels: two blocks with one key conflict.
func blockKey(b *hclsyntax.Block) string {
	if singletonBlocks[b.Type] {
		return b.Type
	}
	return b.Type + "\x00" + strings.Join(b.Labels, "\x00")
}

func blockName(b *hclsyntax.Block) string {
	if len(b.Labels) == 0 {
		return b.Type
	}
	return fmt.Sprintf("%s %q", b.Type, strings.Join(b.Labels, " "))
}

// mergeInstallation renders one provider_installation block holding oprov's methods and then
// the user's, each of the user's with oprov's providers excluded. oprov's direct method is
// dropped when the user has methods of their own: what is not oprov's goes where they say.
func mergeInstallation(psrc []byte, ours, user *hclsyntax.Block, userPath string) (string, []string) {
	var managed []string
	var b strings.Builder
	b.WriteString("# provider_installation merged with yours: OpenTofu allows one block, so use it in place of yours\n")
	b.WriteString("provider_installation {\n")
	for _, m := range ours.Body.Blocks {
		if m.Type == "direct" {
			continue
		}
		managed = append(managed, stringListAttr(m, "include")...)
		// oprov's own text, kept byte for byte (repository_template's ${namespace} is no HCL
		// literal).
		r := m.Range()
		fmt.Fprintf(&b, "  %s\n", psrc[r.Start.Byte:r.End.Byte])
	}
	var notes []string
	for _, m := range user.Body.Blocks {
		text, note, err := renderMethod(m, managed)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s:%d: your %s method was not carried into the merged provider_installation: %v", userPath, m.Range().Start.Line, m.Type, err))
			continue
		}
		if note != "" {
			notes = append(notes, note)
		}
		b.WriteString(text)
	}
	b.WriteString("}")
	notes = append(notes, fmt.Sprintf("your CLI configuration %s has its own provider_installation block (line %d) and OpenTofu allows only one: the one printed holds its methods too, so put it in place of yours",
		userPath, user.Range().Start.Line))
	return b.String(), notes
}

func stringListAttr(b *hclsyntax.Block, name string) []string {
	a, ok := b.Body.Attributes[name]
	if !ok {
		return nil
	}
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || !v.CanIterateElements() {
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.Type() == cty.String {
			out = append(out, e.AsString())
		}
	}
	return out
}
