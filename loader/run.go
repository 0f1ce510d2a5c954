package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/internal/signals"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/recording"
)

// Streams are the standard streams a child program (tofu, terraform) gets.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// RunOptions say what 'oprov run' runs with the providers.
type RunOptions struct {
	Program string // path of the program
	Args    []string
	Streams Streams
	// Verbose says what is launched, and forwards the providers' own log lines, on Streams.Err.
	Verbose bool
	// Debug, with Verbose, adds the providers' SDK request logs and go-plugin's own lines (-vv).
	Debug bool
	// Record, when set, is the file every provider call is recorded to; KeepConfig keeps the
	// provider configurations' values in it (they are redacted otherwise).
	Record     string
	KeepConfig bool
	// KeepFunctionResults keeps provider functions' results in the recording (redacted otherwise).
	KeepFunctionResults bool
	// Replay, when set, is a recording that answers every provider call: no provider is
	// installed or started. Ignore lists attributes its comparison leaves out.
	Replay string
	Ignore []recording.Ignore
	// RecordingLimits bound the recording replay reads (zero fields: the defaults).
	RecordingLimits recording.Limits
}

// Run installs and builds the project's providers, launches them as one group, runs the program in
// the configuration directory with the group handed to it, and stops the group when it ends. It
// gives the program's exit code.
func (p *Project) Run(ctx context.Context, opts Options, ro RunOptions) (int, error) {
	if ro.Replay != "" {
		return p.replay(ctx, ro)
	}
	ls, err := p.Launchables(ctx, opts)
	if err != nil {
		return 0, err
	}
	// The providers work where tofu does, in the configuration directory, as when tofu starts
	// them itself: a relative path in the configuration (${path.module}/kv.json) means the same
	// file to both.
	workDir, err := filepath.Abs(p.Dir)
	if err != nil {
		return 0, err
	}
	base := plugin.Options{ForReattach: true, WorkDir: workDir}
	if ro.Verbose {
		base.Log, base.Debug = ro.Streams.Err, ro.Debug
	}
	members := Members(ls, base)
	warn := func(s string) { fmt.Fprintf(ro.Streams.Err, "oprov: warning: %s\n", s) }
	var remoteLog io.Writer
	if ro.Verbose {
		remoteLog = ro.Streams.Err
	}
	where, err := p.withRemotes(ctx, members, ls, opts, remoteLog, ro.Streams.Err)
	if err != nil {
		return 0, err
	}
	sandboxes, err := p.withSandbox(members, ls, warn)
	if err != nil {
		return 0, err
	}
	closeAudit, err := p.withMiddleware(ctx, members, ls, sandboxes, where, ro.Streams.Err)
	if err != nil {
		return 0, err
	}
	defer closeAudit()
	var rec *recording.Writer
	if ro.Record != "" {
		if rec, err = withRecording(ctx, members, ls, ro); err != nil {
			return 0, err
		}
	}
	g, err := plugin.StartGroup(ctx, members)
	if err != nil {
		if rec != nil {
			rec.Abort()
		}
		return 0, err
	}
	defer g.Stop()
	if ro.Verbose {
		for i, l := range ls {
			pr := g.Providers[i]
			if members[i].Remote != nil {
				fmt.Fprintf(ro.Streams.Err, "oprov: launched %s (%s, protocol %d) on %s, under %s\n", l.Addr, l.What, pr.Protocol, where[i], sandboxes[i])
				continue
			}
			fmt.Fprintf(ro.Streams.Err, "oprov: launched %s (%s, protocol %d, pid %d) under %s\n", l.Addr, l.What, pr.Protocol, pr.Pid(), sandboxes[i])
		}
	}
	cmd := exec.Command(ro.Program, ro.Args...)
	cmd.Dir = p.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ro.Streams.In, ro.Streams.Out, ro.Streams.Err
	code, err := g.Run(cmd)
	if rec != nil {
		if err != nil {
			rec.Abort()
		} else if cerr := rec.Close(); cerr != nil {
			return 0, cerr
		}
	}
	if err != nil {
		return 0, fmt.Errorf("run %s: %w", filepath.Base(ro.Program), err)
	}
	return code, nil
}

// cliConfigPath is where install writes the CLI configuration, relative to the configuration.
var cliConfigPath = filepath.Join(".terraform", "oprov", "cli.tfrc")

// WriteCLIConfig writes the CLI configuration that installs res's providers from the cache and
// everything else as the user's own configuration for program says. It returns the file's path
// and notes for the user; a user configuration that cannot be read is an error, not a file
// written without it.
func (p *Project) WriteCLIConfig(res *InstallResult, program string) (string, []string, error) {
	cfgPath := filepath.Join(p.Dir, cliConfigPath)
	user, err := readUserCLIConfig(UserCLIFiles(program, cfgPath))
	if err != nil {
		return "", nil, err
	}
	// A provider a remote block selects is installed for tofu as its launcher (what tofu runs,
	// and what LinkProviders links).
	if res.Installed, err = p.withRemoteLaunchers(res.Installed); err != nil {
		return "", nil, err
	}
	cfg, notes := cliConfig(res.Installed, user)
	notes = append(notes, withCredentials(cfg, res.CredentialFiles)...)
	data, err := cfg.Bytes()
	if err != nil {
		return "", nil, fmt.Errorf("writing the CLI configuration %s: %w", cfgPath, err)
	}
	text := string(data)
	if old, err := os.ReadFile(cfgPath); err == nil && string(old) == text {
		return cfgPath, notes, nil // as it should be: a warm init in the same place writes nothing
	}
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		return "", nil, err
	}
	if err := scratch.WriteFileAtomic(cfgPath, func(w io.Writer) error { _, err := io.WriteString(w, text); return err }); err != nil {
		return "", nil, err
	}
	return cfgPath, notes, nil
}

// RunInit runs 'PROGRAM init ARGS...' in the configuration directory with the CLI configuration
// at cfgPath, and gives its exit code. SIGINT and SIGTERM are passed on to the program, which
// decides what they mean (tofu finishes what it is writing), and RunInit waits for it: the
// program is not started if ctx has already ended, and never killed because it did.
func (p *Project) RunInit(ctx context.Context, program, cfgPath string, args []string, st Streams) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cmd, err := p.initCommand(program, cfgPath, args)
	if err != nil {
		return 0, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = st.In, st.Out, st.Err
	code, err := signals.Run(cmd, signals.KillAfter)
	if err != nil {
		return 0, fmt.Errorf("running %s init: %w", program, err)
	}
	return code, nil
}

// ErrNoExec is ExecInit's answer where the system cannot replace a process with another: run
// RunInit instead.
var ErrNoExec = errors.New("cannot replace the process on this system")

// initCommand is 'PROGRAM init ARGS...' in the configuration directory, with TF_CLI_CONFIG_FILE
// naming the CLI configuration at cfgPath.
func (p *Project) initCommand(program, cfgPath string, args []string) (*exec.Cmd, error) {
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(program, append([]string{"init"}, args...)...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+abs)
	return cmd, cmd.Err
}
