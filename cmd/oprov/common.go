package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/internal/progress"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// registryFlags are the network flags every command that talks to a registry takes.
type registryFlags struct {
	PlainHTTP      bool
	CAFile         string
	RegistryConfig string
}

func (f *registryFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&f.PlainHTTP, "plain-http", false, "talk plain HTTP to the registry (loopback registries fall back to it on their own)")
	c.Flags().StringVar(&f.CAFile, "ca-file", "", "PEM file of extra CAs to trust (SSL_CERT_FILE is honoured too)")
	c.Flags().StringVar(&f.RegistryConfig, "registry-config", "", "docker-style credentials file (default: docker's config.json, then containers' auth.json)")
}

func (f *registryFlags) options() oci.Options {
	return oci.Options{PlainHTTP: f.PlainHTTP, CAFile: f.CAFile, RegistryConfig: f.RegistryConfig}
}

// outputFlag is -o/--output text|json: on every command, -o is the output format and nothing
// else (paths have flags of their own, such as --out-dir).
type outputFlag struct {
	Format string
	// pathHint names the flag that takes a path on a command that writes files: a value of -o
	// that is not a format is then answered with that flag.
	pathHint string
}

func (o *outputFlag) register(c *cobra.Command) {
	c.Flags().StringVarP(&o.Format, "output", "o", "text", "output format: text or json")
}

func (o *outputFlag) check() error {
	if o.Format == "text" || o.Format == "json" || o.Format == "" { // "": options not set by cobra
		return nil
	}
	if o.pathHint != "" {
		return usageErrorf("-o %q: -o/--output is the output format, text or json; to write into %q, use %s %s", o.Format, o.Format, o.pathHint, o.Format)
	}
	return usageErrorf("-o %q: -o/--output is the output format, text or json", o.Format)
}

func (o *outputFlag) JSON() bool { return o.Format == "json" }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parsePlatforms(list []string) ([]manifest.Platform, error) {
	var out []manifest.Platform
	for _, s := range list {
		p, err := manifest.ParsePlatform(s)
		if err != nil {
			return nil, usageErrorf("--platform: %v", err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseRef(s string) (oci.Ref, error) {
	r, err := oci.ParseRef(s)
	if err == nil {
		return r, nil
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		return oci.Ref{}, usageErrorf("reference %q: leave out %s:// and write %s (oprov speaks HTTPS to a registry; --plain-http for HTTP)", s, scheme, rest)
	}
	host, path, _ := strings.Cut(s, "/")
	if path != "" && strings.ToLower(path) != path {
		// The tag may have capitals; the repository path may not.
		repo, tag, hasTag := strings.Cut(path, ":")
		if lower := strings.ToLower(repo); lower != repo {
			fixed := host + "/" + lower
			if hasTag {
				fixed += ":" + tag
			}
			return oci.Ref{}, usageErrorf("reference %q: repository names are lowercase in OCI registries (write %s)", s, fixed)
		}
	}
	return oci.Ref{}, usageErrorf("%v", err)
}

// checkDir checks that a directory exists; what names the flag (and value) that needs it, and
// fix says what to do instead.
func checkDir(what, dir, fix string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageErrorf("%s: no such directory %s (%s)", what, dir, fix)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case !st.IsDir():
		return usageErrorf("%s: %s is not a directory (%s)", what, dir, fix)
	}
	return nil
}

// checkFile makes a file argument that does not exist, or names a directory, a usage error that
// says what the argument should be (fix).
func checkFile(what, file, fix string) error {
	st, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageErrorf("%s: no such file %s (%s)", what, file, fix)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case st.IsDir():
		return usageErrorf("%s: %s is a directory (%s)", what, file, fix)
	}
	return nil
}

// concurrencyFlag registers --concurrency, refusing when parsed a value that would move nothing.
func concurrencyFlag(c *cobra.Command, p *int, usage string) {
	*p = oci.DefaultConcurrency
	c.Flags().Var(positiveInt{p}, "concurrency", usage)
}

// positiveInt is an int flag value of at least 1.
type positiveInt struct{ p *int }

func (v positiveInt) String() string { return strconv.Itoa(*v.p) }
func (v positiveInt) Type() string   { return "int" }

func (v positiveInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a number")
	}
	if n < 1 {
		return fmt.Errorf("give at least 1 (the default is %d)", oci.DefaultConcurrency)
	}
	*v.p = n
	return nil
}

// parseVersionRef parses a reference that must name a version (REPO:VERSION).
func parseVersionRef(op, s string) (oci.Ref, error) {
	ref, err := parseRef(s)
	if err != nil {
		return oci.Ref{}, err
	}
	if ref.Reference == "" {
		return oci.Ref{}, usageErrorf("%s %s: name a version (%s:VERSION); 'oprov inspect %s' lists them", op, ref, ref, ref)
	}
	return ref, nil
}

// newProgress is the one progress display every transfer uses: bytes, rate and time left on a
// terminal's stderr, nothing otherwise.
func newProgress(ios *IOStreams, label string) *progress.Bar {
	return progress.New(ios.ErrOut, ios.ErrTTY, label)
}

// humanBytes writes a size as the progress display does.
func humanBytes(n int64) string { return progress.HumanBytes(n) }

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// passwordFunc reads COSIGN_PASSWORD, or prompts on a terminal (the injected streams).
func passwordFunc(ios *IOStreams) sign.PassFunc {
	var prompt sign.PassFunc
	if ios.InTTY {
		prompt = func(confirm bool) ([]byte, error) {
			pw, err := ios.readPassword("Password for the key: ")
			if err != nil || !confirm {
				return pw, err
			}
			again, err := ios.readPassword("Again: ")
			if err != nil {
				return nil, err
			}
			if string(again) != string(pw) {
				return nil, errors.New("the passwords do not match")
			}
			return pw, nil
		}
	}
	return sign.EnvPassword(prompt)
}
