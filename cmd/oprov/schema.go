package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/spf13/cobra"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/plugin"
)

type schemaOptions struct {
	io       *IOStreams
	Target   string
	Address  string
	Keys     []string
	Policy   string
	keyless  keylessFlags
	CacheDir string
	Verbose  bool
	registry registryFlags
	output   outputFlag
}

func newSchemaCmd(ios *IOStreams) *cobra.Command {
	o := &schemaOptions{io: ios}
	c := &cobra.Command{
		Use:   "schema REPO:VERSION|PATH",
		Short: "Print a provider's schema by launching it over its plugin protocol",
		Long: `Launch a provider (an executable, or a version from a repository, fetched through the cache
with its digests checked and, given --key or --policy, its signature verified), speak its
plugin protocol (5 or 6), and print its schema: readable on a terminal, or with -o json the
same document as 'tofu providers schema -json'.`,
		Example: `  oprov schema ./terraform-provider-hello -o json --address example.com/acme/hello
  oprov schema registry.example.com/providers/acme/hello:1.0.0 --key cosign.pub`,
		Args: argsRange(1, 1, "one provider: REPO:VERSION or a path to an executable"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Target = args[0]
			return runSchema(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Address, "address", "", "the provider's source address, for the JSON keys (default: guessed from the name)")
	c.Flags().StringSliceVar(&o.Keys, "key", nil, "verify a repository version's signature with this public key (repeatable)")
	c.Flags().StringVar(&o.Policy, "policy", "", "verify a repository version's signature under this trust policy")
	o.keyless.register(c)
	c.Flags().StringVar(&o.CacheDir, "cache-dir", "", "the cache (default $OPROV_CACHE_DIR, else $XDG_CACHE_HOME/oprov)")
	c.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "forward the provider's own log lines to stderr")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runSchema(ctx context.Context, o *schemaOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	exe, addr, err := schemaTarget(ctx, o)
	if err != nil {
		return err
	}
	opts := plugin.Options{Path: exe}
	if o.Verbose {
		opts.Log = o.io.ErrOut
	}
	p, err := plugin.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer p.Stop(ctx)
	s, err := p.Schema(ctx)
	if err != nil {
		return fmt.Errorf("provider %s: %w", exe, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, plugin.Schemas{FormatVersion: plugin.SchemaFormatVersion, ProviderSchemas: map[string]*plugin.ProviderSchema{addr.String(): s}})
	}
	printSchema(o.io.Out, addr.String(), p.Protocol, s)
	return nil
}

// schemaTarget finds the executable to launch and the address to report it under: a file, a
// provider source directory (built through the cache as 'oprov run' builds it), or a repository
// version fetched through the cache.
func schemaTarget(ctx context.Context, o *schemaOptions) (string, manifest.ProviderAddress, error) {
	var addr manifest.ProviderAddress
	if o.Address != "" {
		a, err := manifest.ParseProviderAddress(o.Address)
		if err != nil {
			return "", addr, usageErrorf("--address: %v", err)
		}
		addr = a
	}
	// Without --address the address is guessed, and said: a guess may name the public
	// registry for an in-house provider.
	guess := func(a manifest.ProviderAddress) {
		if o.Address == "" {
			addr = a
			fmt.Fprintf(o.io.ErrOut, "oprov: note: the schema is reported as provider %s, guessed from %s; give --address HOST/NAMESPACE/TYPE (the source in your required_providers) for another\n", a, o.Target)
		}
	}
	st, statErr := os.Stat(o.Target)
	switch {
	case statErr == nil && !st.IsDir():
		guess(loader.ExecutableAddress(o.Target))
		return o.Target, addr, nil
	case statErr == nil:
		dir, err := filepath.Abs(o.Target)
		if err != nil {
			return "", addr, err
		}
		guess(loader.DirAddress(dir))
		opts, err := o.loaderOptions()
		if err != nil {
			return "", addr, err
		}
		exe, err := loader.BuildDir(ctx, dir, addr, "oprov schema "+o.Target, opts)
		return exe, addr, err
	case looksLikePath(o.Target):
		return "", addr, usageErrorf("schema %s: no such file; give the path of a provider executable or source directory, or REPO:VERSION for a version in a registry", o.Target)
	}
	ref, err := parseRef(o.Target)
	if err != nil {
		return "", addr, usageErrorf("%s is neither a file, a directory nor a reference: %v", o.Target, err)
	}
	if ref.Reference == "" {
		return "", addr, usageErrorf("schema %s: name a version (%s:VERSION)", ref, ref)
	}
	guess(artifact.GuessProviderAddress(ref))
	policy, err := policyFromFlags(o.Keys, o.Policy, &o.keyless)
	if err != nil {
		return "", addr, err
	}
	opts, err := o.loaderOptions()
	if err != nil {
		return "", addr, err
	}
	exe, err := loader.FetchRef(ctx, ref, addr, policy, opts)
	var ne *cache.NoExecutableError
	if err != nil && o.Address == "" && errors.As(err, &ne) {
		// The guess named another type than the package holds: an oci-layout directory's name,
		// or a repository's, need not be the type.
		fix := "HOST/NAMESPACE/TYPE"
		if ne.Holds != "" {
			fix = "HOST/NAMESPACE/" + ne.Holds
		}
		return "", addr, usageErrorf("schema %s: the provider's type cannot be known from that name, and the guess %q was wrong: give --address %s (the source in your required_providers)", o.Target, addr.Type, fix)
	}
	return exe, addr, err
}

// loaderOptions open the cache for a build or a fetch.
func (o *schemaOptions) loaderOptions() (loader.Options, error) {
	cache, err := o.io.Factory.openCache(o.CacheDir)
	if err != nil {
		return loader.Options{}, err
	}
	return loader.Options{Cache: cache, Registry: o.io.Factory.registry(o.registry), Log: o.io.ErrOut, ModuleLimits: o.io.Factory.ModuleLimits}, nil
}

// looksLikePath tells a path from a reference: it starts like one, or is no reference at all.
func looksLikePath(s string) bool {
	if strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "~") || filepath.IsAbs(s) {
		return true
	}
	_, err := oci.ParseRef(s)
	return err != nil
}

func printSchema(w io.Writer, addr string, protocol int, s *plugin.ProviderSchema) {
	fmt.Fprintf(w, "%s (plugin protocol %d)\n", addr, protocol)
	if s.Provider != nil {
		fmt.Fprintln(w, "\nprovider")
		printBlock(w, s.Provider.Block, "  ")
	}
	section := func(kind string, m map[string]*plugin.Schema) {
		for _, name := range sortedKeys(m) {
			fmt.Fprintf(w, "\n%s %s\n", kind, name)
			printBlock(w, m[name].Block, "  ")
		}
	}
	section("resource", s.ResourceSchemas)
	section("data", s.DataSourceSchemas)
	section("ephemeral", s.EphemeralResourceSchemas)
	for _, name := range sortedKeys(s.Functions) {
		f := s.Functions[name]
		var params []string
		for _, p := range f.Parameters {
			params = append(params, p.Name+" "+typeString(p.Type))
		}
		if f.VariadicParameter != nil {
			params = append(params, "..."+f.VariadicParameter.Name+" "+typeString(f.VariadicParameter.Type))
		}
		fmt.Fprintf(w, "\nfunction %s(%s) %s\n", name, strings.Join(params, ", "), typeString(f.ReturnType))
		if f.Summary != "" {
			fmt.Fprintf(w, "  %s\n", f.Summary)
		}
	}
}

func printBlock(w io.Writer, b *plugin.Block, indent string) {
	if b == nil {
		return
	}
	for _, name := range sortedKeys(b.Attributes) {
		a := b.Attributes[name]
		var flags []string
		for f, on := range map[string]bool{"required": a.Required, "optional": a.Optional, "computed": a.Computed, "sensitive": a.Sensitive, "deprecated": a.Deprecated} {
			if on {
				flags = append(flags, f)
			}
		}
		sort.Strings(flags)
		typ := typeString(a.Type)
		if a.NestedType != nil {
			typ = "nested " + a.NestedType.NestingMode
		}
		fmt.Fprintf(w, "%s%-20s %-22s %s", indent, name, typ, strings.Join(flags, ", "))
		if a.Description != "" {
			fmt.Fprintf(w, "  # %s", strings.SplitN(a.Description, "\n", 2)[0])
		}
		fmt.Fprintln(w)
		if a.NestedType != nil {
			printBlock(w, &plugin.Block{Attributes: a.NestedType.Attributes}, indent+"  ")
		}
	}
	for _, name := range sortedKeys(b.BlockTypes) {
		nb := b.BlockTypes[name]
		fmt.Fprintf(w, "%s%s { (%s block)\n", indent, name, nb.NestingMode)
		printBlock(w, nb.Block, indent+"  ")
		fmt.Fprintf(w, "%s}\n", indent)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// typeString shows a cty type the way HCL writes it: string, list(string), object({...}).
func typeString(raw []byte) string {
	ty, err := ctyjson.UnmarshalType(raw)
	if err != nil {
		return string(raw)
	}
	return typeexpr.TypeString(ty)
}
