package plugin

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// defaultRemoteHelloTimeout bounds how long a far side has to say hello: connecting, logging in,
// and starting `oprov provider host --stdio`. A remote block's hello_timeout sets another.
const defaultRemoteHelloTimeout = 30 * time.Second

// helloTimeout is the error of a far side that said no hello within its bound.
type helloTimeout struct {
	within  time.Duration
	setting string
}

func (e *helloTimeout) Error() string {
	setting := "a remote block's hello_timeout"
	if e.setting != "" {
		setting = e.setting
	}
	return fmt.Sprintf("the far side said no hello within %s (%s sets the bound): check that the command reaches the far host without a prompt (a password or a host key question cannot be answered here) and runs `oprov provider host --stdio` there", e.within, setting)
}

// sshFailed is ssh's own failure (exit 255): it could not reach, or log in to, the far host; the
// far side never ran. ssh says why on its stderr, which the error quotes.
type sshFailed struct{ dest string }

func (e *sshFailed) Error() string {
	to := ""
	if e.dest != "" {
		to = " to " + quoteText(e.dest)
	}
	return "ssh failed (exit 255): it could not connect or log in" + to + ", so the far side never ran; ssh's own words are below"
}

// isSSH says whether the command is ssh (its program's base name).
func isSSH(command []string) bool {
	if len(command) == 0 {
		return false
	}
	base := filepath.Base(command[0])
	return base == "ssh" || base == "ssh.exe"
}

// sshOptionsWithValue are ssh's options that take the next argument as their value.
const sshOptionsWithValue = "BbcDEeFIiJLlmOoPpQRSWw"

// sshDestination is the destination an ssh command line names (its first argument that is no
// option or option value), or "".
func sshDestination(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return a
		}
		// -p22 carries its value; -p 22 takes the next argument.
		flags := a[1:]
		for j := 0; j < len(flags); j++ {
			if strings.IndexByte(sshOptionsWithValue, flags[j]) >= 0 {
				if j == len(flags)-1 {
					i++
				}
				break
			}
		}
	}
	return ""
}

// connectingLine is what -v says before the command starts: where it goes, and through what.
func connectingLine(name string, command []string) string {
	if isSSH(command) {
		if dest := sshDestination(command[1:]); dest != "" {
			return fmt.Sprintf("oprov: %s: connecting to %s through ssh\n", name, quoteText(dest))
		}
	}
	return fmt.Sprintf("oprov: %s: connecting through %s\n", name, quoteText(strings.Join(command, " ")))
}

// exitedSSHFailure says whether the command is ssh and ended with ssh's own failure code.
func exitedSSHFailure(command []string, cmd *exec.Cmd) bool {
	if !isSSH(command) || cmd.ProcessState == nil {
		return false
	}
	return cmd.ProcessState.ExitCode() == 255
}
