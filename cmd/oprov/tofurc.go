package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/oci"
)

type tofurcOptions struct {
	io             *IOStreams
	Dir            string
	RegistryConfig string
}

func newTofurcCmd(ios *IOStreams) *cobra.Command {
	o := &tofurcOptions{io: ios}
	c := &cobra.Command{
		Use:   "tofurc",
		Short: "Print the oci_mirror CLI configuration of oprov.hcl, for OpenTofu >= 1.10",
		Long: `Print a CLI configuration with oprov.hcl's oci_mirror blocks, for OpenTofu >= 1.10 users who want
OpenTofu to install from the registries itself (without oprov's signature checks and cache). A block your own CLI configuration
(TF_CLI_CONFIG_FILE, else ~/.tofurc) already has is left out, with a note on stderr, so the
output can be appended to it.`,
		Example: `  oprov tofurc > tofu.tfrc
  TF_CLI_CONFIG_FILE=tofu.tfrc tofu init`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runTofurc(c.Context(), o) },
	}
	c.Flags().StringVarP(&o.Dir, "chdir", "C", ".", "the configuration directory")
	c.Flags().StringVar(&o.RegistryConfig, "registry-config", "", "docker-style credentials file to point OpenTofu at (DOCKER_CONFIG is honoured too)")
	return c
}

func runTofurc(_ context.Context, o *tofurcOptions) error {
	if err := checkDir("-C", o.Dir, configDirPurpose); err != nil {
		return err
	}
	cfg, err := config.LoadConfig(o.Dir)
	if err != nil {
		return err
	}
	printed := cfg.MirrorInstallation()
	printed.Settings = oci.TofuCredentials(oci.TofuCredentialFiles(o.RegistryConfig))
	text, notes := loader.MergePrinted(printed, loader.UserCLIFiles("tofu", ""))
	for _, n := range notes {
		fmt.Fprintln(o.io.ErrOut, "Note: "+n)
	}
	_, err = io.WriteString(o.io.Out, text)
	return err
}
