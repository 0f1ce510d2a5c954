package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/sandbox"
)

type sandboxCheckOptions struct {
	io     *IOStreams
	output outputFlag
}

func newSandboxCmd(ios *IOStreams) *cobra.Command {
	o := &sandboxCheckOptions{io: ios}
	c := &cobra.Command{
		Use:   "sandbox [check]",
		Short: "What the kernel can enforce of a provider's sandbox",
		Long: `Providers with a sandbox block in oprov.hcl run confined by the kernel: Landlock (file system
paths, TCP ports, abstract unix sockets and signals), a seccomp filter, no_new_privs and resource
limits. 'oprov sandbox check' (or 'oprov sandbox' alone) says which of those this kernel supports.`,
		Example: `  oprov sandbox
  oprov sandbox check -o json`,
		Args: argsRange(0, 0, "a subcommand: check"),
		RunE: func(c *cobra.Command, _ []string) error { return runSandboxCheck(c.Context(), o) },
	}
	o.output.register(c)
	c.AddCommand(newSandboxCheckCmd(ios))
	return c
}

func newSandboxCheckCmd(ios *IOStreams) *cobra.Command {
	o := &sandboxCheckOptions{io: ios}
	c := &cobra.Command{
		Use:   "check",
		Short: "Say what of a provider sandbox this kernel supports",
		Long: `Ask the kernel which parts of a provider sandbox it can enforce: Landlock's ABI (1: file system
rules; 4: TCP connect and bind rules; 6: scoping of abstract unix sockets and signals), seccomp
filters, no_new_privs and resource limits. A provider whose sandbox needs a part the kernel lacks
does not start, unless its sandbox block sets best_effort = true. The exit code is 0 when every
part is supported, 1 otherwise.`,
		Example: `  oprov sandbox check
  oprov sandbox check -o json`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runSandboxCheck(c.Context(), o) },
	}
	o.output.register(c)
	return c
}

// sandboxReport is 'oprov sandbox check -o json'.
type sandboxReport struct {
	sandbox.Support
	Parts    []sandbox.Part `json:"parts"`
	Complete bool           `json:"complete"`
}

func runSandboxCheck(_ context.Context, o *sandboxCheckOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	sup := sandbox.Probe()
	r := sandboxReport{Support: sup, Parts: sup.Parts(), Complete: true}
	for _, p := range r.Parts {
		r.Complete = r.Complete && p.Supported
	}
	if o.output.JSON() {
		if err := writeJSON(o.io.Out, r); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.io.Out, "kernel: %s, Landlock ABI %d", sup.OS, sup.LandlockABI)
		if sup.Why != "" {
			fmt.Fprintf(o.io.Out, " (%s)", sup.Why)
		}
		fmt.Fprintln(o.io.Out)
		for _, p := range r.Parts {
			mark := "yes"
			if !p.Supported {
				mark = "NO "
			}
			fmt.Fprintf(o.io.Out, "  %s  %s (%s)\n", mark, p.What, p.Needs)
		}
	}
	if !r.Complete {
		return answered(o.output, fmt.Errorf("this kernel cannot enforce a whole provider sandbox: a provider with a sandbox block starts here only with best_effort = true in it"))
	}
	return nil
}
