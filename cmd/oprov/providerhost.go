package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/plugin"
)

type providerHostOptions struct {
	io             *IOStreams
	Stdio          bool
	RequireSandbox bool
	Config         string
	CacheDir       string
}

func newProviderHostCmd(ios *IOStreams) *cobra.Command {
	o := &providerHostOptions{io: ios}
	c := &cobra.Command{
		Use:   "host --stdio",
		Short: "Run providers for another machine's oprov, over standard input and output",
		Long: `Be the far side of a remote block (` + docPage + `remote.md): another machine's 'oprov run' or
provider launcher starts this command through ssh, kubectl exec -i or docker exec -i, and the
connection is this process's standard input and output.

The near side names one provider version and the h1: hashes its lock records. This side takes
the package from its cache, or receives the zip from the near side, checks it against those
hashes before it keeps or unpacks it, and launches it with this machine's environment and
credentials. The provider stops when the connection ends.

What the provider may do here is this side's to say, never the request's. --config FILE (in
oprov.hcl's syntax) names the providers that may run here (oci_mirror blocks: this side checks
their releases and signatures itself), the sandbox each runs under (sandbox blocks) and the
bounds (a host block). A provider the near side built from source has no signature: it runs
here only if the host block's allow_source names it, and under the default sandbox when no
sandbox block selects it. The request's sandbox block may narrow that sandbox, never widen it.
--require-sandbox runs every provider the configuration gives no sandbox block under the default
sandbox. Without either, the request's sandbox block applies, if any.

Give the connecting user nothing else to run: an SSH forced command is this command line.`,
		Example: `  oprov provider host --stdio --config /etc/oprov/host.hcl --require-sandbox
  oprov provider host --stdio --require-sandbox`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runProviderHost(c.Context(), o) },
	}
	c.Flags().BoolVar(&o.Stdio, "stdio", false, "serve one connection on standard input and output (required)")
	c.Flags().BoolVar(&o.RequireSandbox, "require-sandbox", false, "run every provider under a sandbox: the configuration's block for it, else the default; the request may only narrow it")
	c.Flags().StringVar(&o.Config, "config", "", "this side's configuration: the providers allowed here, their signers, their sandboxes, the bounds (oprov.hcl's syntax; https://github.com/oprov/oprov/blob/main/docs/remote.md)")
	c.Flags().StringVar(&o.CacheDir, "cache-dir", "", "the cache (default $OPROV_CACHE_DIR, else $XDG_CACHE_HOME/oprov)")
	return c
}

func runProviderHost(ctx context.Context, o *providerHostOptions) error {
	if !o.Stdio {
		return errors.New("provider host: give --stdio: the connection is this process's standard input and output")
	}
	// A write to a connection that has gone is an error the host handles (it stops the
	// provider), not a signal that ends oprov and leaves the provider running.
	signal.Ignore(syscall.SIGPIPE)
	// What a provider starts that leaves its process group comes back to this process when its
	// parent ends, and is killed with the connection's end (Linux; a kernel without the
	// subreaper leaves such processes to init, as before). Only a process whose connection is
	// its own standard input does so: in a test's process it would kill the test's children.
	if o.io.In == io.Reader(os.Stdin) && plugin.AdoptOrphans() == nil {
		defer plugin.KillOrphans(500 * time.Millisecond)
	}
	c, err := o.io.Factory.openCache(o.CacheDir)
	if err != nil {
		return err
	}
	ho := loader.HostOptions{Cache: c, RequireSandbox: o.RequireSandbox, In: o.io.In, Out: nopCloser{o.io.Out}, Log: o.io.ErrOut}
	// Standard output whose reader went away (the near side stopped reading, its input left
	// open) ends the connection at once, not at the keepalive's next ping.
	if f, ok := o.io.Out.(*os.File); ok {
		ho.Hangup = plugin.WatchHangup(f)
	}
	if o.Config != "" {
		if ho.Config, err = config.LoadHostConfig(o.Config); err != nil {
			return fmt.Errorf("provider host: %w", err)
		}
	}
	err = loader.HostRemote(ctx, ho)
	if err != nil {
		return fmt.Errorf("provider host: %w", err)
	}
	return nil
}

// nopCloser is standard output as the far side's connection: closing the connection leaves the
// stream to the process.
type nopCloser struct {
	w interface{ Write([]byte) (int, error) }
}

func (n nopCloser) Write(b []byte) (int, error) { return n.w.Write(b) }
func (nopCloser) Close() error                  { return nil }

// runRemoteProvider is what a remote provider's launcher runs after 'oprov init' (tofu starts
// it, in the configuration directory, as any provider): it reaches the far side of the remote
// block that selects args[0] and serves that provider to tofu. It runs before cobra: tofu ends
// providers itself.
func runRemoteProvider(args []string, errOut io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(errOut, "oprov %s ADDRESS: this command is what a remote provider's executable runs, after 'oprov init'\n", loader.RemoteProviderCommand)
		return exitUsage
	}
	err := func() error {
		p, err := loader.Open(".")
		if err != nil {
			return err
		}
		c, err := (&Factory{}).openCache("")
		if err != nil {
			return err
		}
		return p.ServeRemote(context.Background(), loader.Options{Cache: c, Log: errOut}, args[0], errOut)
	}()
	if err != nil {
		fmt.Fprintf(errOut, "oprov: remote provider %s: %v\n", args[0], err)
		return exitError
	}
	return exitOK
}

// runRemoteBroker is the broker that keeps the connection a command's remote provider starts
// share (pkg/plugin's remotebroker): the first start runs it, with what it needs on standard
// input. It runs before cobra, as the starts do.
func runRemoteBroker(errOut io.Writer) int {
	if err := plugin.ServeBroker(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(errOut, "oprov: broker: %v\n", err)
		return exitError
	}
	return exitOK
}
