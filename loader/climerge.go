package loader

import (
	"fmt"
	"strings"

	"github.com/oprov/oprov/pkg/tofufiles"
)

// singletonBlocks are the top-level CLI configuration blocks OpenTofu allows once in all
// (a second oci_default_credentials makes tofu 1.12 panic; a second provider_installation is an
// error). Labelled blocks (credentials "HOST", host "HOST", oci_repository_credentials "REPO")
// may appear once per label.
var singletonBlocks = map[string]bool{
	"oci_default_credentials": true,
	"provider_installation":   true,
	"credentials_helper":      true,
}

// MergePrinted renders a CLI configuration that oprov prints for the user to add to their own
// (userFiles, as UserCLIFiles finds them; none for none) so that the two together never hold a
// block twice:
//   - a block the user's configuration already has (oci_default_credentials, credentials_helper,
//     or a labelled block with the same labels) is left out, with a note saying so;
//   - provider_installation, which the printed text exists for, is printed merged: the user's
//     dev_overrides, oprov's methods, then the user's other methods with oprov's providers
//     excluded, and a note says to put it in place of the user's block.
//
// A user configuration that cannot be read leaves the text as it is, with a note.
func MergePrinted(printed *tofufiles.CLIConfig, userFiles []string) (string, []string) {
	if len(userFiles) == 0 {
		return printed.String(), nil
	}
	user, err := tofufiles.ReadCLIConfigs(userFiles)
	if err != nil {
		return printed.String(), []string{fmt.Sprintf("your CLI configuration could not be read (%v): check that the configuration below does not repeat one of its blocks", err)}
	}
	out := &tofufiles.CLIConfig{Comment: printed.Comment}
	var notes []string
	for _, it := range printed.Settings {
		ui := findBlock(user, it)
		if ui == nil {
			out.Settings = append(out.Settings, it)
			continue
		}
		note := fmt.Sprintf("left out the %s block: your CLI configuration %s has one already (line %d), and OpenTofu allows only one", it.Name(), ui.From, ui.Line)
		if it.Keys[0] == "oci_default_credentials" {
			if files := stringListAttr(it, "docker_style_config_files"); len(files) > 0 {
				note += fmt.Sprintf("; add %s to its docker_style_config_files if OpenTofu needs them", strings.Join(files, ", "))
			}
		}
		notes = append(notes, note)
	}
	out.Installation = printed.Installation
	if printed.Installation != nil && user.Installation != nil {
		var managed []string
		var ours []tofufiles.Method
		for _, m := range printed.Installation.Methods {
			if m.Kind != tofufiles.Direct {
				managed = append(managed, m.Include...)
				ours = append(ours, m)
			}
		}
		methods, n := withUserMethods(ours, user, managed)
		out.Installation = &tofufiles.Installation{
			Comment: []string{"provider_installation merged with yours: OpenTofu allows one block, so use it in place of yours"},
			Methods: methods,
		}
		notes = append(notes, n...)
		notes = append(notes, fmt.Sprintf("your CLI configuration %s has its own provider_installation block (line %d) and OpenTofu allows only one: the one printed holds its methods too, so put it in place of yours",
			user.Installation.From, user.Installation.Line))
	}
	return out.String(), notes
}

// findBlock gives the user's item that conflicts with it: the same block type and labels, or
// the same singleton block.
func findBlock(user *tofufiles.CLIConfig, it tofufiles.Item) *tofufiles.Item {
	for i, u := range user.Settings {
		if !u.IsBlock() || !it.IsBlock() || u.Keys[0] != it.Keys[0] {
			continue
		}
		if singletonBlocks[u.Keys[0]] || u.Name() == it.Name() {
			return &user.Settings[i]
		}
	}
	return nil
}

// stringListAttr gives a block's list-of-strings attribute.
func stringListAttr(it tofufiles.Item, name string) []string {
	for _, a := range it.Value.Object {
		if len(a.Keys) == 1 && a.Keys[0] == name {
			list, _ := a.Value.Strings()
			return list
		}
	}
	return nil
}
