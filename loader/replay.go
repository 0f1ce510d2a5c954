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

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/recording"
)

// withRecording puts a recorder around each member's middleware (or in its place), and gives the
// recording's writer; Close puts the file in place.
func withRecording(ctx context.Context, members []plugin.Member, ls []Launchable, ro RunOptions) (*recording.Writer, error) {
	key, err := recording.RecordKey()
	if err != nil {
		return nil, err
	}
	w, err := recording.Create(ro.Record, programVersion(ro.Program), key)
	if err != nil {
		return nil, err
	}
	w.KeepConfig, w.KeepFunctionResults = ro.KeepConfig, ro.KeepFunctionResults
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
	key, err := recording.ReplayKey()
	if err != nil {
		return 0, err
	}
	if err := rec.Unlock(key); err != nil {
		return 0, fmt.Errorf("replay %s: %w", ro.Replay, err)
	}
	if err := p.checkRecordedVersions(rec, ro.Replay); err != nil {
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

// checkRecordedVersions refuses a recording of a provider version the configuration's
// required_providers do not allow: tofu checks no version of a provider it is handed, so replay
// would answer for a release the configuration rules out. A provider kept as source has no
// release to check (tofu does not check one either).
func (p *Project) checkRecordedVersions(rec *recording.Recording, name string) error {
	reqs := map[string]*config.Requirement{}
	for _, pv := range p.Managed {
		reqs[pv.Addr()] = pv.Req
	}
	for _, r := range p.Unmanaged {
		reqs[r.Addr.String()] = r
	}
	for _, addr := range rec.Order {
		req := reqs[addr]
		if req == nil || req.ConstraintString() == "" {
			continue
		}
		recorded := rec.Providers[addr].Line.Version
		allow, err := allowed(req)
		if err != nil {
			return err
		}
		v, err := versions.ParseVersion(recorded)
		if err != nil || !allow.Has(v) {
			where := ""
			if len(req.Where) > 0 {
				where = fmt.Sprintf(" (%s:%d)", req.Where[0].Filename, req.Where[0].Start.Line)
			}
			return fmt.Errorf("replay %s: it recorded %s version %q, which the configuration's required_providers do not allow (version = %q%s): record again with a version it allows, or change the constraint", name, addr, recorded, req.ConstraintString(), where)
		}
	}
	return nil
}
