//go:build !unix

package loader

// ExecInit is RunInit's replacement of the process where the system has exec; here it has not.
func (p *Project) ExecInit(program, cfgPath string, args []string) error { return ErrNoExec }
