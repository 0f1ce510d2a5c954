package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/plugin"
)

type runOptions struct {
	io      *IOStreams
	flags   loaderFlags
	Verbose bool
	Command []string
}

func newRunCmd(ios *IOStreams) *cobra.Command {
	o := &runOptions{io: ios}
	c := &cobra.Command{
		Use:   "run [--] COMMAND [ARGS...]",
		Short: "Launch the configuration's providers and run tofu (or terraform) with them",
		Long: `In a directory with oprov.hcl: install the managed providers as 'oprov install' does, build the
providers kept as source (cached by a hash of their source tree), launch each one over its
plugin protocol, and run COMMAND with TF_REATTACH_PROVIDERS handing them to it. SIGINT and
SIGTERM are passed on to COMMAND; when it ends every provider is stopped and its socket
removed, and oprov exits with COMMAND's exit code.

Providers kept as source are declared in oprov.hcl:

    provider "example.com/acme/internal" {
      source = "./providers/internal"   # a Go module beside the configuration
    }

Nothing is published and nothing is installed: edit the source, run again.`,
		Example: `  oprov run -- tofu init
  oprov run -- tofu apply -auto-approve
  oprov run -- terraform plan -detailed-exitcode`,
		Args: argsRange(1, -1, "a command to run: oprov run -- tofu apply"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Command = args
			return runRun(c, o)
		},
	}
	c.Flags().SetInterspersed(false)
	c.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "say what is launched, and forward the providers' own log lines to stderr")
	o.flags.register(c)
	return c
}

func runRun(c *cobra.Command, o *runOptions) error {
	program, err := exec.LookPath(o.Command[0])
	if err != nil {
		return fmt.Errorf("run: cannot run %q: %v", o.Command[0], errors.Unwrap(err))
	}
	p, opts, err := o.flags.open(o.io)
	if err != nil {
		return err
	}
	ctx := c.Context()
	type launch struct {
		addr, exe, what string
	}
	var launches []launch
	if len(p.Managed) > 0 {
		res, err := p.Install(ctx, opts)
		if err != nil {
			return err
		}
		host := manifest.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
		byAddr := map[string]*loader.Provider{}
		for _, pv := range p.Managed {
			byAddr[pv.Addr()] = pv
		}
		for _, in := range res.Installed {
			pv := byAddr[in.Addr]
			exe, err := loader.FindExecutable(loader.PackageDir(in.MirrorRoot, pv.Req.Addr, in.Version, host), pv.Req.Addr.Type)
			if err != nil {
				return err
			}
			launches = append(launches, launch{in.Addr, exe, in.Version})
		}
	}
	for _, s := range p.Sources {
		b, err := opts.Cache.Build(ctx, s)
		if err != nil {
			return err
		}
		what := "source, cached build"
		if b.Rebuilt {
			what = "source, built"
		}
		launches = append(launches, launch{b.Addr, b.Executable, what})
	}

	// Launch them all at once; stop whatever started if any fails.
	providers := make([]*plugin.Provider, len(launches))
	errs := make([]error, len(launches))
	var wg sync.WaitGroup
	for i, l := range launches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			po := plugin.Options{Path: l.exe, ForReattach: true}
			if o.Verbose {
				po.Log = o.io.ErrOut
			}
			providers[i], errs[i] = plugin.Start(ctx, po)
		}()
	}
	wg.Wait()
	stopAll := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, pr := range providers {
			if pr != nil {
				wg.Add(1)
				go func() { defer wg.Done(); pr.Stop(sctx) }()
			}
		}
		wg.Wait()
	}
	defer stopAll()
	reattach := map[string]plugin.Reattach{}
	for i, l := range launches {
		if errs[i] != nil {
			return fmt.Errorf("%s: %w", l.addr, errs[i])
		}
		reattach[l.addr] = providers[i].ReattachConfig()
		if o.Verbose {
			fmt.Fprintf(o.io.ErrOut, "oprov: launched %s (%s, protocol %d, pid %d)\n", l.addr, l.what, providers[i].Protocol, providers[i].Pid())
		}
	}
	rj, err := json.Marshal(reattach)
	if err != nil {
		return err
	}
	return runChild(o, p.Dir, program, rj)
}

// runChild runs the command with the reattach configuration, passes SIGINT and SIGTERM on to it,
// and returns its exit code as the error's code.
func runChild(o *runOptions, dir, program string, reattach []byte) error {
	cmd := exec.Command(program, o.Command[1:]...)
	cmd.Dir = dir // the configuration directory (-C), the current one by default
	cmd.Env = append(os.Environ(), "TF_REATTACH_PROVIDERS="+string(reattach))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.io.In, o.io.Out, o.io.ErrOut
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", o.Command[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var killTimer <-chan time.Time
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
			if killTimer == nil {
				// A command that ignores the signal for long is killed, so nothing outlives oprov.
				killTimer = time.After(30 * time.Second)
			}
		case <-killTimer:
			cmd.Process.Kill()
		case err := <-done:
			if err == nil {
				return nil
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code := ee.ExitCode()
				if code < 0 { // ended by a signal
					code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
				}
				return &exitCodeError{code: code, quiet: true}
			}
			return fmt.Errorf("run %s: %w", o.Command[0], err)
		}
	}
}
