package loader

import (
	"context"
	"fmt"
	"path/filepath"
)

// Prepared is what Prepare leaves behind: the installed providers, the CLI configuration that
// hands them to tofu, and notes for the user (what of their own configuration could not be kept,
// which providers tofu links itself).
type Prepared struct {
	*InstallResult
	CLIConfig string
	Notes     []string
}

// Prepare is what 'oprov install' and 'oprov init' do before tofu runs: install the managed
// providers, write the CLI configuration for program (tofu, terraform) and link this machine's
// packages into .terraform/providers. A provider that cannot be linked is a note, not an error:
// tofu installs it from the cache itself.
func (p *Project) Prepare(ctx context.Context, opts Options, program string) (*Prepared, error) {
	// The user's CLI configuration is read before anything is fetched: one that cannot be read
	// stops here, as WriteCLIConfig would stop later.
	if _, err := readUserCLIConfig(UserCLIFiles(program, filepath.Join(p.Dir, cliConfigPath))); err != nil {
		return nil, err
	}
	res, err := p.Install(ctx, opts)
	if err != nil {
		return nil, err
	}
	cfgPath, notes, err := p.WriteCLIConfig(res, program)
	if err != nil {
		return nil, err
	}
	for _, err := range p.LinkProviders(res) {
		notes = append(notes, fmt.Sprintf("%v; tofu init installs it from the cache itself", err))
	}
	return &Prepared{InstallResult: res, CLIConfig: cfgPath, Notes: notes}, nil
}
