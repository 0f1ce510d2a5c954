package loader

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// UserCLIFiles lists the CLI configuration files the user's own tofu (or terraform) reads, in the
// order it merges them (tofufiles.UserFiles): TF_CLI_CONFIG_FILE alone when it is set, else
// ~/.tofurc (or its fallbacks) and the *.tfrc and *.tfrc.json of the configuration directory.
// own, when set, is oprov's own file from an earlier run, which is left out.
func UserCLIFiles(program, own string) []string {
	var files []string
	ownAbs, _ := filepath.Abs(own)
	for _, f := range tofufiles.UserFiles(program) {
		if abs, err := filepath.Abs(f); own != "" && err == nil && abs == ownAbs {
			continue // TF_CLI_CONFIG_FILE points at oprov's own file from an earlier run
		}
		files = append(files, f)
	}
	return files
}

// readUserCLIConfig reads and merges files as OpenTofu does. One that cannot be read stops oprov:
// a configuration written without it would drop the user's settings (credentials among them).
func readUserCLIConfig(files []string) (*tofufiles.CLIConfig, error) {
	cfg, err := tofufiles.ReadCLIConfigs(files)
	if err != nil {
		return nil, fmt.Errorf("reading your CLI configuration: %w (oprov writes OpenTofu's configuration with yours in it, so fix that file, or point TF_CLI_CONFIG_FILE at one that reads)", err)
	}
	return cfg, nil
}

// cliConfig builds the CLI configuration that installs the given providers from the cache's
// filesystem mirror and everything else the way the user's own configuration says (directly
// from the registries when it says nothing). The user's other settings are kept, their
// dev_overrides come first (OpenTofu requires it), and their installation methods get the
// managed providers excluded. Notes say what the user should know.
func cliConfig(installed []Installed, user *tofufiles.CLIConfig) (*tofufiles.CLIConfig, []string) {
	var managed []string
	var ours []tofufiles.Method
	for _, in := range installed {
		managed = append(managed, in.Addr)
		ours = append(ours, tofufiles.Method{Kind: tofufiles.FilesystemMirror, Path: filepath.ToSlash(in.MirrorRoot), Include: []string{in.Addr}})
	}
	sort.Strings(managed)
	out := &tofufiles.CLIConfig{}
	if user != nil {
		out.Settings = user.Settings
		if from := sources(user); len(from) > 0 {
			out.SettingsComment = []string{"Kept from " + strings.Join(from, ", ")}
		}
	}
	methods, notes := withUserMethods(ours, user, managed)
	out.Installation = &tofufiles.Installation{
		Comment: []string{"Written by oprov: the providers oprov manages come from its cache's filesystem mirror."},
		Methods: methods,
	}
	return out, notes
}

// sources lists the files a configuration was read from.
func sources(c *tofufiles.CLIConfig) []string {
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if c.Installation != nil {
		add(c.Installation.From)
	}
	for _, it := range c.Settings {
		add(it.From)
	}
	sort.Strings(out)
	return out
}

// withUserMethods puts oprov's methods together with the user's: the user's dev_overrides
// first, then oprov's, then the user's other methods with the managed providers excluded; a
// direct method for everything else when the user has no other method.
func withUserMethods(ours []tofufiles.Method, user *tofufiles.CLIConfig, managed []string) ([]tofufiles.Method, []string) {
	var first, rest []tofufiles.Method
	var notes []string
	if user != nil && user.Installation != nil {
		for _, m := range user.Installation.Methods {
			if m.Kind == tofufiles.DevOverrides {
				notes = append(notes, overrideNotes(m, managed)...)
				first = append(first, m)
				continue
			}
			m.Exclude = union(m.Exclude, managed)
			rest = append(rest, m)
		}
	}
	if len(rest) == 0 {
		rest = []tofufiles.Method{{Kind: tofufiles.Direct, Exclude: managed}}
	}
	return append(append(first, ours...), rest...), notes
}

// overrideNotes says which managed providers a dev_overrides block overrides.
func overrideNotes(m tofufiles.Method, managed []string) []string {
	var notes []string
	for _, o := range m.Overrides {
		pa, err := manifest.ParseProviderAddress(o.Provider)
		if err != nil {
			continue
		}
		for _, a := range managed {
			if pa.String() == a {
				notes = append(notes, fmt.Sprintf("your dev_overrides for %s is kept and takes precedence over oprov's install", a))
			}
		}
	}
	return notes
}

// union is a's strings and then b's that a lacks, sorted.
func union(a, b []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range append(append([]string{}, a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
