package loader

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/recording"
)

// withRecording puts a recorder around each member's middleware (or in its place), and gives the
// recording's writer; Close puts the file in place.
func withRecording(ctx context.Context, members []plugin.Member, ls []Launchable, ro RunOptions) (*recording.Writer, error) {
	w, err := recording.Create(ro.Record, programVersion(ro.Program))
	if err != nil {
		return nil, err
	}
	w.KeepConfig = ro.KeepConfig
	for i := range members {
		inner, l := members[i].Middleware, ls[i]
		members[i].Middleware = func(pr *plugin.Provider) (plugin.Middleware, error) {
			var mw plugin.Middleware
			if inner != nil {
				var err error
				if mw, err = inner(pr); err != nil {
					return nil, err
				}
			}
			return w.Provider(ctx, pr, l.Addr, l.Version, l.H1, mw)
		}
	}
	return w, nil
}

// programVersion names the program and its version, as `PROGRAM version -json` says it.
func programVersion(program string) string {
	name := filepath.Base(program)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, program, "version", "-json").Output()
	if err != nil {
		return name
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if json.Unmarshal(out, &v) != nil || v.Version == "" {
		return name
	}
	return name + " " + v.Version
}

// replay runs the program with every provider of a recording answered from it: nothing is
// installed or started.
func (p *Project) replay(ctx context.Context, ro RunOptions) (int, error) {
	f, err := os.Open(ro.Replay)
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	rec, err := recording.Read(f, ro.Replay, ro.RecordingLimits)
	f.Close()
	if err != nil {
		return 0, err
	}
	var members []plugin.Member
	for _, rp := range rec.Replayers(ro.Ignore) {
		members = append(members, plugin.Member{Addr: rp.Address(), StandIn: rp.Answer, StandInProtocol: rp.Protocol()})
	}
	g, err := plugin.StartGroup(ctx, members)
	if err != nil {
		return 0, err
	}
	defer g.Stop()
	if ro.Verbose {
		var addrs []string
		for _, m := range members {
			addrs = append(addrs, m.Addr)
		}
		fmt.Fprintf(ro.Streams.Err, "oprov: replaying %s from %s\n", strings.Join(addrs, ", "), ro.Replay)
	}
	cmd := exec.Command(ro.Program, ro.Args...)
	cmd.Dir = p.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ro.Streams.In, ro.Streams.Out, ro.Streams.Err
	code, err := g.Run(cmd)
	if err != nil {
		return 0, fmt.Errorf("run %s: %w", filepath.Base(ro.Program), err)
	}
	return code, nil
}
