package main

import (
	"github.com/spf13/cobra"
)

// docsURL is where the manual lives; oprov --help points there.
const docsURL = "https://github.com/oprov/oprov/tree/main/docs"

// docPage is the address of one page of the manual: help texts link pages by their full address,
// since a release (an archive, a package) carries no docs/ directory to follow a relative path
// into. TestHelpLinksAreAddresses checks that every page linked exists.
const docPage = "https://github.com/oprov/oprov/blob/main/docs/"

// environmentHelp is 'oprov help environment': every variable oprov reads and every file it reads
// or writes. TestEnvironmentHelpComplete fails when code reads an OPROV_* variable not listed here.
const environmentHelp = `Every environment variable oprov reads, and every file it reads or writes.

oprov's own variables
  OPROV_CACHE_DIR          the shared cache (default: $XDG_CACHE_HOME/oprov, on Linux ~/.cache/oprov)
  OPROV_STATE_DIR          where fingerprint.key and recording.key are kept (default:
                           $XDG_CONFIG_HOME/oprov, on Linux ~/.config/oprov)
  OPROV_RECORDING_KEY      the key that digests a recording's secrets (64 hex digits or more,
                           as 'openssl rand -hex 32' prints; default: recording.key); set it in
                           CI to the key the recording was made with
  OPROV_TOFU               the program init runs, and run runs for 'tofu', whose CLI
                           configuration files count (default: tofu); set
                           OPROV_TOFU=terraform for Terraform
  OPROV_DEBUG_HTTP         set to 1: print every registry request with its status and timing
                           (never headers or credentials)
  OPROV_DEBUG_PLUGIN       set to 1: -v is -vv, which adds the plugin library's own DEBUG
                           and TRACE lines and the Go SDKs' request logs
  OPROV_STALL_TIMEOUT      how long a registry may stall (default 30s; --stall-timeout wins)
  OPROV_MAX_PACKAGE_SIZE   the largest provider zip (default 2GiB; --max-package-size wins)
  OPROV_MAX_PLATFORMS      most entries in a version's index (default 1000)
  OPROV_MAX_TAGS           most tags in a repository listing (default 100000)
  OPROV_MAX_TAG_PAGES      most pages of a tag listing (default 1000)
  OPROV_MAX_MODULE_BYTES   most module bytes held on disk at once (default 4GiB)
  OPROV_MAX_MODULE_FILES   most module files held on disk at once (default 200000)
  OPROV_MAX_MODULE_RATIO   most an archive may expand (default 200 times)
  OPROV_MAX_MODULE_CALLS   most module calls followed (default 10000)
  OPROV_MAX_RECORDING_SIZE  the largest recording replay reads (default 1GiB)
  OPROV_MAX_RECORDING_CALLS most calls in a recording (default 1000000)
  OPROV_MAX_RECORDING_LINE  the longest line of a recording (default 256MiB)
  OPROV_STDIO_TIMEOUT      a stdio provider's time per call, as 30s (default: its manifest's
                           timeout_seconds, else 300s)
  OPROV_PYTHON             the Python that builds a Python provider's environment (default: python3)
  OPROV_PROVIDER_PYTHON    the Python a packaged Python provider runs with (default: the newest
                           python3.X it supports)
  OPROV                    the oprov a packaged stdio provider's launcher runs (default: oprov
                           on PATH)
  OPROV_PROVIDER_DIR       set by oprov for a stdio provider: its own directory (it runs in
                           tofu's working directory)
  OPROV_SIGNING_CONFIG     cosign v3's signing configuration for keyless signing: a private
                           Sigstore instance (--signing-config wins; default: the public one)
  OPROV_TEST_LANDLOCK_ABI  a test hook: oprov acts as if the kernel had this Landlock version
                           (it can only make the sandbox use less of the kernel)

Other variables oprov reads
  TF_CLI_CONFIG_FILE       your CLI configuration; read alone when set
  TERRAFORM_CONFIG         the same, for Terraform (OPROV_TOFU=terraform)
  TF_DATA_DIR              tofu's data directory (default: .terraform)
  TF_REATTACH_PROVIDERS    run keeps the providers already listed, and adds its own
  TF_LOG, TF_LOG_*         passed to providers; run silences their logs unless -v
  DOCKER_CONFIG            the directory of docker's config.json
  REGISTRY_AUTH_FILE       containers' auth.json (podman, skopeo)
  SSL_CERT_FILE, SSL_CERT_DIR  extra CA certificates
  COSIGN_PASSWORD          the password of a cosign.key (else a prompt)
  SIGSTORE_ID_TOKEN        the OIDC token for keyless signing (GitLab's id_tokens)
  ACTIONS_ID_TOKEN_REQUEST_URL, ACTIONS_ID_TOKEN_REQUEST_TOKEN
                           GitHub Actions' token service: keyless signing asks it for a token
  SOURCE_DATE_EPOCH        the time package and push record, for reproducible builds
  HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME, XDG_STATE_HOME, XDG_RUNTIME_DIR, APPDATA, TMPDIR
                           where the default paths below are

Files beside your configuration
  oprov.hcl                        read: what oprov manages ('oprov help' links its reference)
  .terraform.lock.hcl              read and written by lock, install and init
  .terraform.modules.lock.hcl      read and written: the remote modules' versions and hashes
  .terraform/oprov/cli.tfrc        written by install and init: the CLI configuration for tofu
  .terraform/providers/            links to the unpacked providers, as tofu init makes them
  .terraform/modules/              the installed modules, and modules.json

Your CLI configuration (read, never written)
  $TF_CLI_CONFIG_FILE alone when set; else ~/.tofurc (Terraform: ~/.terraformrc),
  $XDG_CONFIG_HOME/opentofu/tofurc, and ~/.terraform.d/*.tfrc and *.tfrc.json
  (such as credentials.tfrc.json from tofu login)

Registry credentials
  $DOCKER_CONFIG/config.json or ~/.docker/config.json, and its credential helpers
      (read; written by login and logout)
  $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
  $XDG_CONFIG_HOME/containers/auth.json (read)
  --registry-config FILE replaces all of these

Files in your home directory
  $OPROV_CACHE_DIR (~/.cache/oprov)        the cache: zips, version records, unpacked
                                           providers, builds; 'oprov cache' manages it
  $OPROV_STATE_DIR/fingerprint.key (~/.config/oprov/fingerprint.key)
                                           a secret made on first use (mode 0600): it lets oprov
                                           skip hashing an unpacked provider nobody changed
  $OPROV_STATE_DIR/recording.key (~/.config/oprov/recording.key)
                                           a secret made on the first run --record (mode 0600):
                                           the key of a recording's digests of its secrets
  ~/.cache/oprov-sandbox/HASH              a sandboxed Python provider's writable directory
  ~/.cache/oprov-python/                   Python providers' bytecode
  ~/.local/state/oprov/serve/              serve's local certificate authority (--state-dir)
  $TMPDIR/oprov-run-*                      run's private directory for provider sockets,
                                           removed when run ends

Files you name
  keygen writes PREFIX.key and PREFIX.pub (default cosign.key, cosign.pub).
  Flags such as --policy, --key, --ca-file and --trusted-root name files oprov reads.
`

// addHelpTopics adds the topics 'oprov help TOPIC' prints.
func addHelpTopics(root *cobra.Command) {
	root.AddCommand(&cobra.Command{
		Use:   "environment",
		Short: "Environment variables oprov reads, and the files it reads and writes",
		Long:  environmentHelp,
	})
	for _, topic := range guideTopics {
		root.AddCommand(&cobra.Command{Use: topic.name, Short: topic.short, Long: topic.long})
	}
}

// guideTopics are 'oprov help TOPIC' for what no one command's help covers: the file beside the
// .tf files, providers on another machine, and recordings. Each says the essentials and links
// the page of the manual that says the rest.
var guideTopics = []struct{ name, short, long string }{
	{"oprov.hcl", "The file beside your .tf files that says which providers oprov manages", `oprov.hcl

oprov.hcl sits beside the .tf files. It says which providers oprov manages and where they come
from; 'oprov lock', 'oprov install', 'oprov init' and 'oprov run' read it (-C DIR names its
directory). Its blocks:

    oci_mirror      a repository template ("HOST/PATH/${namespace}/${type}", or
                    "oci-layout:DIR" for a directory with no registry), the providers it
                    includes, and the keys or policy that verify them
    provider        a provider kept as source beside the configuration (Go, Python or stdio)
    module_mirror   where modules come from
    audit, rule     an audit log of provider calls, and rules that refuse some (oprov run)
    sandbox         what a provider may reach when oprov run starts it
    remote          run a provider on another machine ('oprov help remote')

A relative path in it is relative to its directory. Every block and attribute:
` + docPage + `oprov-hcl.md
Providers beside a configuration: ` + docPage + `configuration.md`,
	},
	{"remote", "Providers on another machine: the remote block of oprov.hcl", `Providers on another machine

A remote block in oprov.hcl runs a provider on another machine, the far side, whose network or
credentials it needs; tofu runs here, unchanged:

    remote "example.com/acme/internal" {
      command = ["ssh", "-T", "deploy@bastion", "oprov", "provider", "host", "--stdio"]
    }

'oprov run' starts the command, which must run 'oprov provider host --stdio' there. The far side
says its platform; oprov checks the locked version against the lock and the trust policy here,
sends the request (and the zip when the far side lacks it), and the far side refuses a package
whose hash the lock does not record. Every call then crosses the connection, so audit and rule
blocks work unchanged. A Go provider kept as source is built here for the far side's platform;
the far side runs it only where its configuration names it in allow_source.
After 'oprov init', plain tofu starts the provider several times in a command; on Linux 6.12 or
later those starts share one connection, kept by a small oprov process that ends with tofu.

The far side has hello_timeout (default 30s) to say hello; -v says where oprov connects. When ssh
itself fails (exit 255: refused, unknown host key, no login), oprov says so and shows ssh's words.

The whole page: ` + docPage + `remote.md`,
	},
	{"replay", "Record provider calls and replay them with no provider (run --record, --replay)", `Recording and replay

'oprov run --record FILE -- tofu apply' writes every provider call to FILE, one JSON line each:
request and response, values decoded with the provider's schema, secrets redacted (sensitive
attributes always; the provider configuration unless --record-provider-config).

'oprov run --replay FILE -- tofu plan -detailed-exitcode' answers every call from FILE: no
provider is installed or started, and nothing reaches the network. A call the recording does not
hold fails, naming the resource and how it differs from the nearest recorded call;
--replay-ignore TYPE.ATTRIBUTE leaves an attribute out of the comparison. tofu's exit code
passes through (2: the plan has changes); oprov's own failures exit 125 ('oprov help exit-codes').

'oprov provider check --json FILE' answers calls from a recording with no tofu.

Regression tests for providers: ` + docPage + `replay-providers.md
Replay in CI, for modules: ` + docPage + `replay-modules.md
The recording format: ` + docPage + `recording-format.md`,
	},
}

// Command groups of 'oprov --help', by the job a person comes with.
var commandGroups = []struct {
	id, title string
	commands  []string
}{
	{"publish", "Publish providers:", []string{"package", "push", "sign", "keygen", "verify", "verify-blob", "trusted-root", "pull", "inspect", "attach", "login", "logout"}},
	{"configure", "Configure and run (beside your .tf files):", []string{"init", "run", "lock", "install", "tofurc", "schema", "provider", "sandbox"}},
	{"serve", "Serve and air gap:", []string{"serve", "mirror", "copy", "save", "load", "discover"}},
	{"other", "Other:", nil},
}

// groupCommands puts every runnable command of root in a group of 'oprov --help'; a command no
// group names (one added later) lands in Other rather than in an untitled list.
func groupCommands(root *cobra.Command) {
	group := map[string]string{}
	for _, g := range commandGroups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, name := range g.commands {
			group[name] = g.id
		}
	}
	for _, c := range root.Commands() {
		if !c.Runnable() && !c.HasSubCommands() {
			continue // a help topic: cobra lists it under "Additional help topics"
		}
		if id, ok := group[c.Name()]; ok {
			c.GroupID = id
		} else {
			c.GroupID = "other"
		}
	}
	root.SetHelpCommandGroupID("other")
	root.SetCompletionCommandGroupID("other")
}
