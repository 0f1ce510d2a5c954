package loader

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/release"
	"github.com/oprov/oprov/pkg/sandbox"
)

// remoteSandbox is a sandbox block as it travels to the far side: what it adds to the default,
// which the far side works out on its own machine.
type remoteSandbox struct {
	Label      string   `json:"label"`
	File       string   `json:"file"`
	Line       int      `json:"line"`
	Read       []string `json:"read,omitempty"`
	Write      []string `json:"write,omitempty"`
	Execute    []string `json:"execute,omitempty"`
	Connect    []uint16 `json:"connect,omitempty"`
	Env        []string `json:"env,omitempty"`
	Memory     uint64   `json:"memory,omitempty"`
	Processes  uint64   `json:"processes,omitempty"`
	OpenFiles  uint64   `json:"open_files,omitempty"`
	CPUSeconds uint64   `json:"cpu_seconds,omitempty"`
	BestEffort bool     `json:"best_effort,omitempty"`
}

// withRemotes gives each member that a remote block selects the way to run it on the far side,
// and says where each member runs, for -v and the audit.
func (p *Project) withRemotes(ctx context.Context, members []plugin.Member, ls []Launchable, opts Options, log, report io.Writer) ([]string, error) {
	where := make([]string, len(members))
	for i, l := range ls {
		where[i] = "here"
		addr, err := manifest.ParseProviderAddress(l.Addr)
		if err != nil {
			return nil, err
		}
		r := p.Config.RemoteFor(addr)
		if r == nil {
			continue
		}
		where[i] = r.Name()
		ro, err := p.remoteOptions(ctx, addr, r, opts)
		if err != nil {
			return nil, err
		}
		ro.Log, ro.Report = log, report
		members[i].Remote = ro
	}
	return where, nil
}

// remoteOptions says how to run addr on r's far side: the locked version's package for the far
// side's platform, checked against the lock here, its zip from this machine's cache, the lock's
// h1: hashes, and the sandbox block that applies, if any.
func (p *Project) remoteOptions(ctx context.Context, addr manifest.ProviderAddress, r *config.Remote, opts Options) (*plugin.RemoteOptions, error) {
	name := fmt.Sprintf("%s on %s", addr, r.Name())
	var pv *Provider
	for _, m := range p.Managed {
		if m.Req.Addr == addr {
			pv = m
		}
	}
	if pv == nil {
		return nil, fmt.Errorf("%s: %s selects it, but only providers from an oci_mirror block run remotely: a provider kept as source runs here (leave it out of the remote block's pattern)", addr, r.At())
	}
	var sb json.RawMessage
	if b := p.Config.SandboxFor(addr); b != nil {
		var err error
		if sb, err = json.Marshal(remoteSandbox{Label: b.Label, File: b.Range.Filename, Line: b.Range.Start.Line, Read: b.Read, Write: b.Write, Execute: b.Execute,
			Connect: b.Connect, Env: b.Env, Memory: b.Memory, Processes: b.Processes, OpenFiles: b.OpenFiles,
			CPUSeconds: b.CPUSeconds, BestEffort: b.BestEffort}); err != nil {
			return nil, err
		}
	}
	var zipPath string
	ro := &plugin.RemoteOptions{Name: name, Command: r.Command}
	ro.Request = func(platform string) (*plugin.RemoteRequest, error) {
		plat, err := manifest.ParsePlatform(platform)
		if err != nil {
			return nil, fmt.Errorf("the far side's platform %q: %w", platform, err)
		}
		o := opts
		o.Host = plat
		pkg, err := p.lockedPackage(ctx, p.session(&o), pv)
		if err != nil {
			return nil, err
		}
		z, err := opts.Cache.PutZip(ctx, pkg, false, opts.Progress)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(z.Path)
		if err != nil {
			return nil, err
		}
		zipPath = z.Path
		e := p.Lock.Entries[addr.String()]
		var h1 []string
		for _, h := range e.Hashes {
			if strings.HasPrefix(h, "h1:") {
				h1 = append(h1, h)
			}
		}
		return &plugin.RemoteRequest{Address: addr.String(), Version: pkg.Version, Platform: pkg.Platform.String(),
			Filename: pkg.Filename, Zip: pkg.Zip.String(), Size: st.Size(), H1: h1, Sandbox: sb}, nil
	}
	ro.Zip = func() (io.ReadCloser, error) { return os.Open(zipPath) }
	return ro, nil
}

// HostOptions say how the far side runs what it is asked to.
type HostOptions struct {
	Cache *cache.Cache
	// RequireSandbox refuses a request that carries no sandbox block.
	RequireSandbox bool
	In             io.Reader
	Out            io.WriteCloser
}

// HostRemote is the far side (`oprov provider host --stdio`): it says its platform, takes the
// requested package from its cache or from the near side, checks it against the near side's
// lock before unpacking it, launches it (under the request's sandbox, fitted to this kernel) with
// this machine's environment, and serves it on the connection until the connection ends.
func HostRemote(ctx context.Context, ho HostOptions) error {
	h := &plugin.RemoteHost{In: ho.In, Out: ho.Out, Platform: hostPlatform().String()}
	h.Launch = func(ctx context.Context, req *plugin.RemoteRequest, zip func(io.Writer) error) (plugin.Options, error) {
		if ho.RequireSandbox && len(req.Sandbox) == 0 {
			return plugin.Options{}, fmt.Errorf("this far side requires a sandbox (--require-sandbox) and the request for %s carries none: add a sandbox block for it to the near side's oprov.hcl", req.Address)
		}
		if ho.RequireSandbox {
			// The block is the near side's: it must not turn the sandbox this side requires
			// into less of one where this kernel lacks a part.
			var rs remoteSandbox
			if err := json.Unmarshal(req.Sandbox, &rs); err != nil {
				return plugin.Options{}, fmt.Errorf("the request's sandbox: %w", err)
			}
			if rs.BestEffort {
				return plugin.Options{}, fmt.Errorf("this far side requires a sandbox (--require-sandbox) and the request for %s asks for best_effort, which would run it with less of one where this kernel lacks a part: remove best_effort from the near side's sandbox block", req.Address)
			}
		}
		in, err := hostPackage(ctx, ho.Cache, req, zip)
		if err != nil {
			return plugin.Options{}, err
		}
		// DieWithParent: a far side killed outright (SIGKILL, the host's OOM killer) takes its
		// provider with it; on a lost connection it stops the provider itself.
		o := plugin.Options{Path: in.Executable, Open: in.OpenExecutable, Type: in.typ, DieWithParent: true}
		// A packaged stdio provider's launcher hands over to $OPROV: this oprov, on PATH or not.
		if self, err := os.Executable(); err == nil {
			o.Env = []string{"OPROV=" + self}
		}
		if len(req.Sandbox) > 0 {
			if o.Sandbox, o.SandboxExec, err = hostSandbox(req, in.Executable); err != nil {
				return plugin.Options{}, err
			}
		}
		return o, nil
	}
	return h.Serve(ctx)
}

// hostedPackage is a far side's package, installed.
type hostedPackage struct {
	*cache.Installed
	typ string
}

// hostPackage installs the requested package in the far side's cache: its zip from the cache, or
// from the near side, checked by digest as it arrives, and its h1: checked against the lock's
// before anything is unpacked (and again, by the cache, as it is).
func hostPackage(ctx context.Context, c *cache.Cache, req *plugin.RemoteRequest, zip func(io.Writer) error) (*hostedPackage, error) {
	addr, err := manifest.ParseProviderAddress(req.Address)
	if err != nil {
		return nil, err
	}
	plat, err := manifest.ParsePlatform(req.Platform)
	if err != nil {
		return nil, err
	}
	if plat != hostPlatform() {
		return nil, fmt.Errorf("the near side sent the %s package of %s; this machine is %s", plat, addr, hostPlatform())
	}
	if _, err := manifest.ParseVersion(req.Version); err != nil {
		return nil, fmt.Errorf("the request's version %q: %w", req.Version, err)
	}
	if req.Size <= 0 {
		return nil, fmt.Errorf("the request's zip size %d is not a size", req.Size)
	}
	d, err := digest.Parse(req.Zip)
	if err != nil {
		return nil, fmt.Errorf("the request's zip digest: %w", err)
	}
	if len(req.H1) == 0 {
		return nil, fmt.Errorf("the near side's lock records no h1: hash for %s %s, so the package cannot be checked here: run 'oprov lock' on the near side", addr, req.Version)
	}
	pkg := &cache.Package{Addr: addr, Version: req.Version, Platform: plat, Filename: req.Filename, Zip: d, Size: req.Size,
		Fetch: func(_ context.Context, w io.Writer, _ oci.Progress) error { return zip(w) },
		Auth:  cache.Authentication{Method: "remote"}}
	z, err := c.PutZip(ctx, pkg, false, nil)
	if err != nil {
		return nil, err
	}
	h1, err := pkghash.ZipH1(ctx, z.Path)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(req.H1, h1) {
		return nil, fmt.Errorf("%s %s: the %s package's %s is not one the near side's lock records (%s), so nothing was unpacked", addr, req.Version, plat, h1, strings.Join(req.H1, ", "))
	}
	judge := func(got string) (bool, error) {
		if !slices.Contains(req.H1, got) {
			return false, fmt.Errorf("%s %s: the unpacked package's %s is not one the near side's lock records", addr, req.Version, got)
		}
		return true, nil
	}
	in, err := c.Install(ctx, pkg, judge, nil)
	if err != nil {
		return nil, err
	}
	return &hostedPackage{Installed: in, typ: addr.Type}, nil
}

// hostSandbox fits the request's sandbox block to this machine: the default for the package as
// unpacked here, what the block adds, and this kernel's support.
func hostSandbox(req *plugin.RemoteRequest, exe string) (*sandbox.Spec, string, error) {
	var rs remoteSandbox
	if err := json.Unmarshal(req.Sandbox, &rs); err != nil {
		return nil, "", fmt.Errorf("the request's sandbox: %w", err)
	}
	b := &config.Sandbox{Label: rs.Label, Read: rs.Read, Write: rs.Write, Execute: rs.Execute, Connect: rs.Connect, Env: rs.Env,
		Memory: rs.Memory, Processes: rs.Processes, OpenFiles: rs.OpenFiles, CPUSeconds: rs.CPUSeconds, BestEffort: rs.BestEffort,
		Range: hcl.Range{Filename: "the near side's " + rs.File, Start: hcl.Pos{Line: rs.Line}}}
	spec, err := sandboxSpec(Launchable{Addr: req.Address, Executable: exe}, b)
	if err != nil {
		return nil, "", err
	}
	if spec, err = sandbox.Plan(spec, sandbox.Probe()); err != nil {
		return nil, "", fmt.Errorf("%s: %w", req.Address, err)
	}
	self, err := sandboxExecutable()
	if err != nil {
		return nil, "", err
	}
	return &spec, self, nil
}

// remoteMirror is where init puts remote providers' launchers, relative to the configuration: a
// filesystem mirror tofu installs them from.
var remoteMirror = filepath.Join(".terraform", "oprov", "remote")

// remoteLauncher is the executable tofu installs, after `oprov init`, for a provider a remote
// block selects: it hands over to the oprov on PATH (or $OPROV), which reaches the far side as
// 'oprov run' does. Its bytes depend only on the address, so its h1: is the same on every
// machine, and the lock records it beside the provider's own.
func remoteLauncher(addr string) string {
	return `#!/bin/sh
# ` + addr + `: runs on the far side of oprov.hcl's remote block (oprov's docs/remote.md).
# This script hands over to the oprov on PATH, or to $OPROV.
oprov=${OPROV:-oprov}
if ! command -v "$oprov" >/dev/null 2>&1; then
  msg="` + addr + `: this provider runs through oprov, and no '$oprov' is on PATH. Install oprov and put it on PATH (or set OPROV to its path), then run tofu again."
  echo "$msg" >&2
  echo "$msg"
  exit 1
fi
exec "$oprov" ` + RemoteProviderCommand + ` '` + addr + `'
`
}

// RemoteProviderCommand is the hidden command a remote provider's launcher runs.
const RemoteProviderCommand = "__remote-provider"

// withRemoteLaunchers puts, for each installed provider a remote block selects, its launcher in
// the project's remote mirror in the place of the package, and adds the launcher's h1: to the
// lock (written at once), so tofu installs the launcher and accepts it.
func (p *Project) withRemoteLaunchers(installed []Installed) ([]Installed, error) {
	if p.Config == nil || len(p.Config.Remotes) == 0 {
		return installed, nil
	}
	out := slices.Clone(installed)
	for i, in := range out {
		addr, err := manifest.ParseProviderAddress(in.Addr)
		if err != nil {
			return nil, err
		}
		if p.Config.RemoteFor(addr) == nil {
			continue
		}
		plat, err := manifest.ParsePlatform(in.Platform)
		if err != nil {
			return nil, err
		}
		root := filepath.Join(p.Dir, remoteMirror)
		dir := filepath.Join(root, addr.Hostname.String(), addr.Namespace, addr.Type, in.Version, plat.String())
		name := release.ProviderPrefix + addr.Type
		text := remoteLauncher(addr.String())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		exe := filepath.Join(dir, name)
		if old, err := os.ReadFile(exe); err != nil || string(old) != text {
			if err := scratch.WriteFileAtomic(exe, func(w io.Writer) error { _, err := io.WriteString(w, text); return err }); err != nil {
				return nil, err
			}
		}
		if err := os.Chmod(exe, 0o755); err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(text))
		h1, err := pkghash.H1(map[string][]byte{name: sum[:]})
		if err != nil {
			return nil, err
		}
		if e := p.Lock.Entries[in.Addr]; e != nil && !e.Has(h1) {
			ne := *e
			ne.Hashes = append(slices.Clone(e.Hashes), h1)
			p.Lock.Set(&ne)
		}
		out[i].MirrorRoot, out[i].Dir, out[i].Executable = root, dir, exe
	}
	return out, p.Lock.Write()
}

// ServeRemote is a remote provider's launcher at work (`oprov __remote-provider ADDR`, started
// by tofu after `oprov init`, in the configuration directory): it reaches the far side of the
// remote block that selects addr, as 'oprov run' does, with the audit and rules of oprov.hcl in
// between, and serves the provider to tofu over the plugin protocol until tofu stops it.
func (p *Project) ServeRemote(ctx context.Context, opts Options, addr string, stderr io.Writer) error {
	a, err := manifest.ParseProviderAddress(addr)
	if err != nil {
		return err
	}
	r := p.Config.RemoteFor(a)
	if r == nil {
		return fmt.Errorf("no remote block in %s selects %s any more: run 'oprov init' again", p.Config.Path, addr)
	}
	ro, err := p.remoteOptions(ctx, a, r, opts)
	if err != nil {
		return err
	}
	ro.Report = stderr
	version := ""
	if e := p.Lock.Entries[a.String()]; e != nil {
		version = e.Version
	}
	ls := []Launchable{{Addr: a.String(), Version: version}}
	members := []plugin.Member{{Addr: a.String(), Remote: ro}}
	warn := func(s string) { fmt.Fprintf(stderr, "oprov: warning: %s\n", s) }
	sandboxes, err := p.withSandbox(members, ls, warn)
	if err != nil {
		return err
	}
	closeAudit, err := p.withMiddleware(ctx, members, ls, sandboxes, []string{r.Name()}, stderr)
	if err != nil {
		return err
	}
	defer closeAudit()
	return plugin.ServeRemote(ctx, members[0])
}
