//go:build unix

package loader

import (
	"fmt"
	"os"
	"syscall"
)

// ExecInit replaces this process with 'PROGRAM init ARGS...', as RunInit would run it: tofu then
// owns the terminal, the signals and the exit code, and nothing of oprov waits beside it. It
// returns only if the program could not be started.
func (p *Project) ExecInit(program, cfgPath string, args []string) error {
	cmd, err := p.initCommand(program, cfgPath, args)
	if err != nil {
		return err
	}
	if err := os.Chdir(cmd.Dir); err != nil {
		return err
	}
	if err := syscall.Exec(cmd.Path, cmd.Args, cmd.Environ()); err != nil {
		return fmt.Errorf("running %s init: %w", program, err)
	}
	return nil
}
