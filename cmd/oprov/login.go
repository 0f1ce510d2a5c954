package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

type loginOptions struct {
	io            *IOStreams
	Host          string
	Username      string
	PasswordStdin bool
	registry      registryFlags
	output        outputFlag
}

func newLoginCmd(ios *IOStreams) *cobra.Command {
	o := &loginOptions{io: ios}
	c := &cobra.Command{
		Use:   "login HOST",
		Short: "Log in to a registry and store the credentials",
		Long: `Check credentials against a registry and store them where docker and other OCI tools
read them (docker's config.json, or its configured credential helper).`,
		Example: `  echo "$TOKEN" | oprov login ghcr.io -u octocat --password-stdin`,
		Args:    argsRange(1, 1, "one registry host"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Host = args[0]
			return runLogin(c.Context(), o)
		},
	}
	c.Flags().StringVarP(&o.Username, "username", "u", "", "user name")
	c.Flags().BoolVar(&o.PasswordStdin, "password-stdin", false, "read the password or token from standard input")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runLogin(ctx context.Context, o *loginOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	var password string
	switch {
	case o.PasswordStdin:
		b, err := io.ReadAll(io.LimitReader(o.io.In, 1<<20))
		if err != nil {
			return err
		}
		password = strings.TrimRight(string(b), "\r\n")
	case o.io.InTTY:
		if o.Username == "" {
			fmt.Fprint(o.io.ErrOut, "Username: ")
			line, _ := o.io.readLine()
			o.Username = strings.TrimSpace(line)
		}
		b, err := o.io.readPassword("Password: ")
		if err != nil {
			return err
		}
		password = string(b)
	default:
		return usageErrorf("login %s: no terminal to prompt on: pass --password-stdin and pipe the password in", o.Host)
	}
	if o.Username == "" || password == "" {
		return usageErrorf("login %s: a user name (-u) and a password are both needed", o.Host)
	}
	if err := o.io.Factory.login(ctx, o.Host, o.Username, password, o.registry); err != nil {
		return err
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, map[string]string{"host": o.Host, "username": o.Username})
	}
	fmt.Fprintf(o.io.Out, "Logged in to %s as %s\n", o.Host, o.Username)
	return nil
}
