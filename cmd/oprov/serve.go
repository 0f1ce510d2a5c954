package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/internal/signals"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/serve"
)

type serveOptions struct {
	io          *IOStreams
	Source      string
	Address     string
	Include     []string
	Modules     string   // module repository template (modules.v1)
	ModIncl     []string // --module-include
	Listen      string
	URL         string
	TLSCert     string
	TLSKey      string
	StateDir    string
	Keys        []string
	Policy      string
	SigningKey  string // --signing-key: the OpenPGP key the registry (providers.v1) signs with
	keyless     keylessFlags
	CacheDir    string
	Concurrency int
	Refresh     time.Duration
	Catalog     time.Duration
	Drain       time.Duration
	Clients     serve.ClientLimits
	registry    registryFlags
	output      outputFlag
}

func newServeCmd(ios *IOStreams) *cobra.Command {
	o := &serveOptions{io: ios}
	c := &cobra.Command{
		Use:   "serve (TEMPLATE | oci-layout:DIR --address HOST/NS/TYPE) [--modules MODULE_TEMPLATE]",
		Short: "Serve providers from OCI repositories as a verifying network mirror, for any OpenTofu or Terraform",
		Long: `Serve the Provider Network Mirror Protocol over HTTPS, from an OCI registry or an OCI layout,
so that any OpenTofu or Terraform installs through a network_mirror block: no OCI support, and
no oprov, needed on the clients.

TEMPLATE maps a provider address to its repository, as oci_mirror's repository_template does
(HOST/PATH with ${hostname}, ${namespace} and ${type}). A repository or oci-layout:DIR without
them holds one provider: name it with --address.

With --policy or --key, only versions whose signatures pass are listed and served. Archives are
fetched by digest, checked, and kept in the cache before a byte is sent.

Without --tls-cert/--tls-key, a CA and a certificate for 127.0.0.1 are made on first start (in
--state-dir) and reused. serve prints the CA's path and the CLI configuration clients need.
Logs (one JSON line per request) go to standard error. SIGTERM or SIGINT stops accepting
connections and lets downloads under way finish (a second one cuts them off).

GET / is a catalog page (and ?format=json): each provider served, its versions with platforms,
sizes and signers, and the versions refused with the reason. It is read in the background every
--catalog-refresh; with a template with variables, a provider appears once --include names it
exactly or a client has asked for it.

With --signing-key KEY.asc, serve is also a provider registry (providers.v1) for the --url host:
a provider source such as HOST/NAMESPACE/TYPE then needs no CLI configuration. It lists the
versions whose signatures passed --policy or --key, and signs each version's SHA256SUMS with
that OpenPGP key, so OpenTofu and Terraform check a signature themselves. A version its origin
registry's signed SHA256SUMS authenticates (a trust rule's origin_keys) is served with the
origin's own SHA256SUMS, signature and key. serve then prints a host block for each hostname
--include names, pointing its providers.v1 at this server (an origin's, behind an air gap).

` + serveModulesHelp,
		Example: `  oprov serve 'registry.example.com/providers/${namespace}/${type}' --policy oprov-policy.hcl
  oprov serve oci-layout:./layout --address example.com/acme/hello
  oprov serve --modules 'registry.example.com/modules/${namespace}/${name}/${system}' \
    --module-include 'modules.example.com/*/*/*' --policy oprov-policy.hcl
  oprov serve 'registry.example.com/providers/${namespace}/${type}' --listen :8443 \
    --tls-cert cert.pem --tls-key key.pem --url https://mirror.example.com/ --cache-dir /var/cache/oprov`,
		Args: argsRange(0, 1, "one source: a repository template or oci-layout:DIR"),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Source = args[0]
			} else if o.Modules == "" {
				return usageErrorf("serve wants one source: a repository template or oci-layout:DIR (or --modules MODULE_TEMPLATE to serve modules only) (see 'oprov serve --help')")
			}
			return runServe(c.Context(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Address, "address", "", "the provider a template without variables (one repository or layout) holds")
	f.StringSliceVar(&o.Include, "include", nil, "serve only providers matching these patterns (HOST/NAMESPACE/TYPE, * allowed); required, naming those parts, when the template's registry host holds ${hostname}, ${namespace} or ${type}")
	f.StringVar(&o.Modules, "modules", "", "also serve registry modules (modules.v1) from this repository template, with ${namespace}, ${name}, ${system} and optionally ${hostname}")
	f.StringSliceVar(&o.ModIncl, "module-include", nil, "with --modules: serve only modules matching these patterns (HOSTNAME/NAMESPACE/NAME/SYSTEM, * allowed); a host block is printed for each hostname named")
	f.StringVar(&o.Listen, "listen", "127.0.0.1:8443", "address to listen on (port 0 picks a free one)")
	f.StringVar(&o.URL, "url", "", "the base URL clients use, for the printed CLI configuration and the local certificate's name; set it behind a load balancer (default from --listen)")
	f.StringVar(&o.TLSCert, "tls-cert", "", "server certificate (PEM); without it, a local CA and certificate are made")
	f.StringVar(&o.TLSKey, "tls-key", "", "the certificate's private key (PEM)")
	f.StringVar(&o.StateDir, "state-dir", "", "where the local CA and certificate are kept (default $XDG_STATE_HOME/oprov/serve)")
	f.StringSliceVar(&o.Keys, "key", nil, "serve only versions signed by this public key (repeatable)")
	f.StringVar(&o.Policy, "policy", "", "serve only versions that pass this trust policy (HCL)")
	f.StringVar(&o.SigningKey, "signing-key", "", "also serve the Provider Registry Protocol (providers.v1), signing each version's SHA256SUMS with this ASCII-armored OpenPGP secret key (no passphrase); only versions whose signatures pass --policy or --key are listed")
	f.StringVar(&o.CacheDir, "cache-dir", "", "the cache (default $OPROV_CACHE_DIR, else $XDG_CACHE_HOME/oprov)")
	f.IntVar(&o.Concurrency, "registry-concurrency", 8, "at most this many calls to the registry at once")
	f.DurationVar(&o.Refresh, "refresh", time.Minute, "how long a tag resolved to an index stands before it is resolved again")
	f.DurationVar(&o.Catalog, "catalog-refresh", 5*time.Minute, "how often the catalog page (GET /) reads every provider it lists again, in the background; 0 turns the page off")
	f.DurationVar(&o.Drain, "drain-timeout", 5*time.Minute, "on SIGTERM, how long to wait for downloads under way")
	o.keyless.register(c)
	o.registerClientLimits(c)
	o.registry.register(c)
	o.output.register(c)
	return c
}

// registerClientLimits adds the flags that bound serve's clients.
func (o *serveOptions) registerClientLimits(c *cobra.Command) {
	f := c.Flags()
	d := serve.DefaultClientLimits()
	cl := &o.Clients
	f.DurationVar(&cl.HeaderTimeout, "client-header-timeout", d.HeaderTimeout, "a client must send a request's headers within this")
	f.DurationVar(&cl.ReadTimeout, "client-read-timeout", d.ReadTimeout, "a client must send a whole request, body included, within this")
	f.DurationVar(&cl.StallTimeout, "client-stall-timeout", d.StallTimeout, fmt.Sprintf("a client must take every %d KiB of a response within this, or is cut off", serve.WriteChunk>>10))
	f.DurationVar(&cl.IdleTimeout, "client-idle-timeout", d.IdleTimeout, "an idle kept-alive connection is closed after this")
	f.IntVar(&cl.MaxConnections, "max-connections", d.MaxConnections, "connections served at once; past it a few more get /healthz and /metrics only, then new ones are closed (lowered to fit the open-files limit)")
	f.IntVar(&cl.MaxStreams, "max-streams", d.MaxStreams, "concurrent HTTP/2 streams per connection")
	f.IntVar(&cl.MaxArchives, "max-archives", d.MaxArchives, "archive downloads under way at once; past it a request waits up to 10s, then gets 503 (lowered to fit the open-files limit)")
	f.IntVar(&cl.MaxPathLength, "max-path-length", d.MaxPathLength, "longest request path; a longer one gets 414")
}

// serveModulesHelp is serve's help on --modules.
const serveModulesHelp = `With --modules MODULE_TEMPLATE, serve also answers the Module Registry Protocol (modules.v1) for
registry modules (HOSTNAME/NAMESPACE/NAME/SYSTEM, as a module block's source names them with a
version constraint), from module packages ('oprov push --module') in OCI repositories, under the
same policy and bounds: versions are the repository's version tags, and only those that verify
are listed; a version's download is its zip, fetched by the digest its verified manifest names.
MODULE_TEMPLATE maps an address to its repository with ${namespace}, ${name}, ${system} and
optionally ${hostname} (HOST/PATH or oci-layout:DIR). --module-include limits the modules served
(required, naming those parts, when the template's registry host holds a variable). The base URL
of hostname H is URL/modules/v1/H/; serve prints a host block per hostname --module-include names,
which points plain tofu or terraform at it (and answers service discovery for its own hostname).
TEMPLATE may then be left out to serve modules only. Only registry modules can be served this
way: git and HTTP module sources need 'oprov init'.`

// serveInfo is what serve prints once it listens.
type serveInfo struct {
	URL       string `json:"url"`
	Listen    string `json:"listen"`
	Source    string `json:"source"`
	CAFile    string `json:"ca_file,omitempty"`
	Catalog   string `json:"catalog_url,omitempty"`
	CLIConfig string `json:"cli_config"`
	// ModulesURL is the modules.v1 base URL pattern (HOSTNAME standing for a module hostname).
	ModulesURL string `json:"modules_url,omitempty"`
	// RegistryURL is the providers.v1 base URL of the server's own hostname, with --signing-key;
	// SigningKeyID is the key's ID, which clients print.
	RegistryURL  string `json:"registry_url,omitempty"`
	SigningKeyID string `json:"signing_key_id,omitempty"`
}

func runServe(ctx context.Context, o *serveOptions) error {
	cfg, include, err := o.config()
	if err != nil {
		return err
	}
	if cfg.Cache, err = o.io.Factory.openCache(o.CacheDir); err != nil {
		return err
	}
	defer cfg.Cache.Close() // releases this server's temporary directory in the cache
	if nofile, ok := openFilesLimit(); ok && cfg.Clients.FitDescriptors(nofile) {
		cfg.Log.Warn("lowered --max-connections and --max-archives to fit the open-files limit",
			slog.Uint64("nofile", nofile), slog.Int("max_connections", cfg.Clients.MaxConnections), slog.Int("max_archives", cfg.Clients.MaxArchives))
	}
	srv, err := serve.New(cfg)
	if err != nil {
		return err
	}
	if err := o.check(ctx, srv, cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("serve: --listen %s: %w", o.Listen, err)
	}
	defer ln.Close()
	info := serveInfo{Listen: ln.Addr().String(), Source: o.Source, URL: o.URL}
	if info.URL == "" {
		info.URL = serve.DefaultURL(ln.Addr().(*net.TCPAddr))
	}
	tlsConfig, caFile, err := o.tlsConfig(info.URL)
	if err != nil {
		return err
	}
	info.CAFile = caFile
	if o.Catalog > 0 {
		info.Catalog = info.URL
	}
	moduleHosts := o.moduleHosts()
	if cfg.Modules != nil {
		srv.SetModuleHostname(urlHostname(info.URL))
		info.ModulesURL = serve.ModuleBaseURL(info.URL, "HOSTNAME")
		if len(moduleHosts) == 0 {
			fmt.Fprintln(o.io.ErrOut, "Note: no --module-include names a hostname, so no host block is printed: clients reach module hostname H through a host block whose modules.v1 is "+info.ModulesURL)
		}
	}
	var registryHosts []string
	if cfg.Signer != nil {
		host := urlHostname(info.URL)
		srv.SetRegistryHostname(host)
		info.RegistryURL, info.SigningKeyID = serve.RegistryBaseURL(info.URL, host), cfg.Signer.KeyID
		registryHosts = o.registryHosts(host)
	}
	info.CLIConfig = serve.CLIConfigFor(info.URL, cfg.Template != nil, include, moduleHosts, registryHosts)
	if err := o.printInfo(info); err != nil {
		return err
	}
	return srv.Run(ctx, ln, serve.RunOptions{TLS: tlsConfig, Drain: o.Drain, Stopping: signals.Again(ctx)})
}

// config checks the flags and gives the server's configuration (without the cache) and the
// include list for the printed CLI configuration.
func (o *serveOptions) config() (serve.Config, []string, error) {
	if err := o.output.check(); err != nil {
		return serve.Config{}, nil, err
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return serve.Config{}, nil, usageErrorf("serve: give --tls-cert and --tls-key together")
	}
	if o.Concurrency < 1 {
		return serve.Config{}, nil, usageErrorf("serve: --registry-concurrency must be at least 1")
	}
	var tmpl *serve.Template
	var err error
	if o.Source != "" {
		if tmpl, err = serve.ParseTemplate(o.Source, o.Address); err != nil {
			return serve.Config{}, nil, usageErrorf("serve: %v", err)
		}
	} else if o.Address != "" || len(o.Include) > 0 {
		return serve.Config{}, nil, usageErrorf("serve: --address and --include name providers: give the providers' repository template too")
	}
	policy, err := policyFromFlags(o.Keys, o.Policy, &o.keyless)
	if err != nil {
		return serve.Config{}, nil, err
	}
	cfg := serve.Config{
		Template: tmpl, Policy: policy, Registry: o.io.Factory.registry(o.registry), Refresh: o.Refresh,
		RegistryConcurrency: o.Concurrency, Log: slog.New(slog.NewJSONHandler(o.io.ErrOut, nil)),
		Clients: o.Clients, CatalogRefresh: o.Catalog,
	}
	include := o.Include
	if a := tmpl.Fixed(); a != nil {
		include = []string{a.String()}
	}
	if err := serve.CheckInclude(tmpl, o.Include); err != nil {
		return serve.Config{}, nil, usageErrorf("serve: %v", err)
	}
	if cfg.Include, err = artifact.MatchAny(o.Include); err != nil {
		return serve.Config{}, nil, usageErrorf("serve: --include: %v", err)
	}
	if o.Catalog < 0 {
		return serve.Config{}, nil, usageErrorf("serve: --catalog-refresh must not be negative (0 turns the catalog off)")
	}
	if o.SigningKey != "" {
		if tmpl == nil {
			return serve.Config{}, nil, usageErrorf("serve: --signing-key signs for providers: give the providers' repository template too")
		}
		if policy == nil {
			return serve.Config{}, nil, usageErrorf("serve: --signing-key signs only versions whose signatures were checked: give --policy or --key")
		}
		if cfg.Signer, err = serve.LoadSigner(o.SigningKey); err != nil {
			return serve.Config{}, nil, fmt.Errorf("serve: --signing-key: %w", err)
		}
		if cfg.Signer.Warning != "" {
			cfg.Log.Warn(cfg.Signer.Warning, slog.String("key_id", cfg.Signer.KeyID))
		}
	}
	cfg.Providers = exactAddresses(o.Include)
	if cfg.Modules, err = o.moduleConfig(); err != nil {
		return serve.Config{}, nil, err
	}
	return cfg, include, nil
}

// check lists what a single repository or layout holds before serving it: a layout that is not
// there is an error (it will not appear later the way a registry comes back), a registry that
// cannot be reached or a repository with no versions yet a warning.
func (o *serveOptions) check(ctx context.Context, srv *serve.Server, cfg serve.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := srv.Check(ctx)
	switch {
	case err != nil && strings.HasPrefix(o.Source, oci.LayoutScheme):
		return fmt.Errorf("serve: %w", err)
	case err != nil:
		cfg.Log.Warn("cannot list the versions yet; serving anyway", slog.String("error", err.Error()))
	case n == 0 && cfg.Template.Fixed() != nil:
		cfg.Log.Warn("the repository holds no versions yet", slog.String("source", o.Source))
	}
	for addr, err := range srv.CheckModules(ctx) {
		cfg.Log.Warn("cannot serve a module --module-include names yet; serving anyway", slog.String("module", addr), slog.String("error", err.Error()))
	}
	return nil
}

// tlsConfig is the server's TLS configuration (serve.TLSConfig), with the CA file clients trust
// when it is the local CA's.
func (o *serveOptions) tlsConfig(base string) (*tls.Config, string, error) {
	cfg, caFile, err := serve.TLSConfig(serve.TLSOptions{CertFile: o.TLSCert, KeyFile: o.TLSKey, StateDir: o.StateDir, URL: base})
	var kp *serve.KeyPairError
	switch {
	case errors.As(err, &kp):
		return nil, "", fmt.Errorf("serve: --tls-cert/--tls-key: %w", kp.Err)
	case err != nil:
		return nil, "", fmt.Errorf("serve: %w", err)
	}
	return cfg, caFile, nil
}

func (o *serveOptions) printInfo(info serveInfo) error {
	if o.output.JSON() {
		return writeJSON(o.io.Out, info)
	}
	w := o.io.Out
	if info.Source != "" {
		fmt.Fprintf(w, "Serving %s at %s\n", info.Source, info.URL)
	}
	if o.Modules != "" {
		fmt.Fprintf(w, "Serving modules from %s at %s\n", o.Modules, info.ModulesURL)
	}
	if info.RegistryURL != "" {
		fmt.Fprintf(w, "Provider registry for %s/NAMESPACE/TYPE at %s, SHA256SUMS signed with key %s: such sources need no CLI configuration.\n", urlHostname(info.URL), info.RegistryURL, info.SigningKeyID)
	}
	if info.Catalog != "" {
		fmt.Fprintf(w, "The catalog of what is served: %s\n", info.Catalog)
	}
	if info.CAFile != "" {
		fmt.Fprintf(w, "Clients trust the CA certificate %s (SSL_CERT_FILE=%s).\n", info.CAFile, info.CAFile)
	}
	fmt.Fprintf(w, "CLI configuration for clients (~/.tofurc, ~/.terraformrc, or the file TF_CLI_CONFIG_FILE names):\n\n%s", info.CLIConfig)
	return nil
}

// exactAddresses gives the include patterns that name one provider (no *), for the catalog to
// list from the start.
func exactAddresses(patterns []string) []manifest.ProviderAddress {
	var out []manifest.ProviderAddress
	for _, s := range patterns {
		if strings.Contains(s, "*") {
			continue
		}
		if a, err := manifest.ParseProviderAddress(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// moduleConfig checks the module flags and gives the module registry's configuration (nil
// without --modules).
func (o *serveOptions) moduleConfig() (*serve.ModuleConfig, error) {
	if o.Modules == "" {
		if len(o.ModIncl) > 0 {
			return nil, usageErrorf("serve: --module-include goes with --modules MODULE_TEMPLATE")
		}
		return nil, nil
	}
	t, err := serve.ParseModuleTemplate(o.Modules)
	if err != nil {
		return nil, usageErrorf("serve: --modules: %v", err)
	}
	pats, err := serve.CheckModuleInclude(t, o.ModIncl)
	if err != nil {
		return nil, usageErrorf("serve: %v", err)
	}
	return &serve.ModuleConfig{Template: t, Include: pats}, nil
}

// moduleHosts are the module hostnames --module-include names (not *), for the host blocks.
func (o *serveOptions) moduleHosts() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range o.ModIncl {
		p, err := serve.ParseModulePattern(s)
		if err == nil && p[0] != "*" && !seen[p[0]] {
			seen[p[0]] = true
			out = append(out, p[0])
		}
	}
	return out
}

// registryHosts are the provider hostnames --include names (not *) other than the server's own:
// each gets a host block whose providers.v1 is this server's (an origin's hostname, say, behind
// an air gap). It is never nil, so that no network mirror block is printed beside them.
func (o *serveOptions) registryHosts(own string) []string {
	out := []string{}
	seen := map[string]bool{own: true}
	for _, s := range o.Include {
		p, err := artifact.ParsePattern(s)
		if err != nil || p.Hostname == "*" || seen[p.Hostname] {
			continue
		}
		seen[p.Hostname] = true
		out = append(out, p.Hostname)
	}
	return out
}

// urlHostname is the host (and port) of a URL, the hostname service discovery answers for.
func urlHostname(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Host
}
