package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// modulePath is oprov's module: its version in the build info is oprov's version.
const modulePath = "github.com/oprov/oprov"

// buildVersion describes the running binary.
type buildVersion struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"` // built from a work tree with uncommitted changes
	Go       string `json:"go"`
}

// currentVersion reads the running binary's build info. A version set with
// -ldflags "-X main.version=..." wins over the module's.
func currentVersion() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	v := versionFrom(bi)
	if version != "dev" {
		v.Version = version
	}
	if commit != "" {
		v.Commit = commit
	}
	return v
}

// versionFrom gives oprov's version from build info: the module version that 'go install
// github.com/oprov/oprov/cmd/oprov@vX' records (vX), or "dev" for a build from a work tree, with
// the commit from the VCS stamp or, for a pseudo-version, from the version itself.
func versionFrom(bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: "dev"}
	if bi == nil {
		return v
	}
	v.Go = bi.GoVersion
	mod := &bi.Main
	if mod.Path != modulePath { // oprov built as a dependency of another module
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				mod = d
			}
		}
	}
	if mod.Replace != nil {
		mod = mod.Replace
	}
	if mod.Version != "" && mod.Version != "(devel)" {
		v.Version = mod.Version
		v.Commit = pseudoVersionCommit(mod.Version)
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// pseudoVersionCommit gives the commit a pseudo-version names (v0.0.0-20250101000000-abcdef123456),
// or "" for a release version.
func pseudoVersionCommit(v string) string {
	v, _, _ = strings.Cut(v, "+")
	parts := strings.Split(v, "-")
	if len(parts) < 3 {
		return ""
	}
	rev, stamp := parts[len(parts)-1], parts[len(parts)-2]
	stamp = stamp[strings.LastIndex(stamp, ".")+1:]
	if len(rev) != 12 || len(stamp) != 14 {
		return ""
	}
	return rev
}

// String is the one line 'oprov --version' prints.
func (v buildVersion) String() string {
	var about []string
	if v.Commit != "" {
		c := "commit " + v.Commit
		if v.Modified {
			c += " with local changes"
		}
		about = append(about, c)
	}
	if v.Time != "" {
		about = append(about, v.Time)
	}
	if v.Go != "" {
		about = append(about, "built with "+v.Go)
	}
	if len(about) == 0 {
		return "oprov " + v.Version
	}
	return fmt.Sprintf("oprov %s (%s)", v.Version, strings.Join(about, ", "))
}

type versionOptions struct {
	io     *IOStreams
	output outputFlag
}

func newVersionCmd(ios *IOStreams) *cobra.Command {
	o := &versionOptions{io: ios}
	c := &cobra.Command{
		Use:   "version",
		Short: "Print oprov's version and the commit it was built from",
		Long: `Print oprov's module version (the vX that 'go install github.com/oprov/oprov/cmd/oprov@vX'
installed, or "dev" for a build from a work tree), the commit when the build recorded one, and
the Go version. 'oprov --version' prints the same line.`,
		Example: `  oprov version
  oprov version -o json`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runVersion(c.Context(), o) },
	}
	o.output.register(c)
	return c
}

func runVersion(_ context.Context, o *versionOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	v := currentVersion()
	if o.output.JSON() {
		return writeJSON(o.io.Out, v)
	}
	_, err := fmt.Fprintln(o.io.Out, v)
	return err
}
