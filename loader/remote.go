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

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/source"
)

// remoteSandbox is a sandbox block as it travels to the far side: what it asks for, its paths as
// written (~ and relative paths are the far side's), which the far side fits inside its own
// operator's sandbox on its own machine (remotehost.go).
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

// requestSandbox is the sandbox block b (nil: none) as the request carries it, its paths as
// written: ~ and relative paths are the far side's to resolve.
func requestSandbox(b *config.Sandbox) (json.RawMessage, error) {
	if b == nil {
		return nil, nil
	}
	return json.Marshal(remoteSandbox{Label: b.Label, File: b.Range.Filename, Line: b.Range.Start.Line, Read: b.Written.Read, Write: b.Written.Write, Execute: b.Written.Execute,
		Connect: b.Connect, Env: b.Env, Memory: b.Memory, Processes: b.Processes, OpenFiles: b.OpenFiles,
		CPUSeconds: b.CPUSeconds, BestEffort: b.BestEffort})
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
	var kept *Provider
	for _, l := range p.Local {
		if l.Req.Addr == addr {
			kept = l
		}
	}
	if pv == nil && kept == nil {
		return nil, fmt.Errorf("%s: %s selects it, but it comes from neither an oci_mirror block nor a provider block kept as source, so it cannot run remotely (leave it out of the remote block's pattern)", addr, r.At())
	}
	sb, err := requestSandbox(p.Config.SandboxFor(addr))
	if err != nil {
		return nil, err
	}
	var zipPath string
	ro := &plugin.RemoteOptions{Name: name, Command: r.Command, HelloTimeout: r.HelloTimeout,
		HelloSetting: "hello_timeout in the remote block at " + r.At()}
	ro.Zip = func() (io.ReadCloser, error) { return os.Open(zipPath) }
	if kept != nil {
		ro.Request = func(platform string) (*plugin.RemoteRequest, error) {
			plat, err := farPlatform(platform)
			if err != nil {
				return nil, err
			}
			if ro.Log != nil {
				fmt.Fprintf(ro.Log, "oprov: %s: building %s from %s for %s, the far side's platform\n", ro.Name, addr, kept.Kept.Dir, plat)
			}
			req, z, err := sourceRequest(ctx, opts, kept.Kept.LocalDir(), plat)
			if err != nil {
				return nil, err
			}
			req.Sandbox, zipPath = sb, z
			return req, nil
		}
		return ro, nil
	}
	ro.Request = func(platform string) (*plugin.RemoteRequest, error) {
		plat, err := farPlatform(platform)
		if err != nil {
			return nil, err
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
	return ro, nil
}

// farPlatform reads the platform the far side's hello reports: a platform (OS_ARCH, lower-case
// letters and digits) this side can build for, or an error quoting it.
func farPlatform(platform string) (manifest.Platform, error) {
	plat, err := manifest.ParsePlatform(platform)
	if err != nil {
		return manifest.Platform{}, fmt.Errorf("the far side's platform %q: %w", platform, err)
	}
	return plat, nil
}

// sourceRequest builds the provider kept as source in d for the far side's platform, puts its
// zip in this machine's cache (content-addressed, so the next start finds it by digest), and
// gives the request for it, marked as built from source (the far side's configuration decides
// whether it may run there), with the zip's path.
func sourceRequest(ctx context.Context, opts Options, d source.LocalDir, plat manifest.Platform) (*plugin.RemoteRequest, string, error) {
	if opts.Cache == nil {
		return nil, "", fmt.Errorf("%s: building it for the far side needs oprov's cache", d.Addr)
	}
	work, err := scratch.Beside(os.TempDir())
	if err != nil {
		return nil, "", err
	}
	defer work.Release()
	built, err := source.BuildZipFor(ctx, d, plat, work.Path)
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(built)
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	size, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return nil, "", err
	}
	h1, err := pkghash.ZipH1(ctx, built)
	if err != nil {
		return nil, "", err
	}
	pkg := &cache.Package{Addr: d.Addr, Version: source.DevVersion, Platform: plat, Filename: filepath.Base(built),
		Zip: digest.NewDigest(digest.SHA256, h), Size: size, H1: h1, Auth: cache.Authentication{Method: "local"},
		Fetch: func(_ context.Context, w io.Writer, _ oci.Progress) error {
			f, err := os.Open(built)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		}}
	z, err := opts.Cache.PutZip(ctx, pkg, false, nil)
	if err != nil {
		return nil, "", err
	}
	return &plugin.RemoteRequest{Address: d.Addr.String(), Version: source.DevVersion, Platform: plat.String(), Filename: pkg.Filename,
		Zip: pkg.Zip.String(), Size: size, H1: []string{h1}, Source: true}, z.Path, nil
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
		name := providerrelease.ProviderPrefix + addr.Type
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
	ro.Share = true // tofu's starts of the provider in one command share a connection
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

// checkSelections refuses a remote or sandbox block whose pattern selects no provider the
// configuration requires: with a typo in its label, the provider would run here, or unconfined,
// without a word. A sandbox "*" block selects whatever there is, and is never refused.
func checkSelections(cfg *config.Config, reqs map[string]*module.Requirement) error {
	selects := func(p config.Pattern) bool {
		for _, r := range reqs {
			if p.Match(r.Addr) {
				return true
			}
		}
		return false
	}
	for _, r := range cfg.Remotes {
		if !selects(r.Pattern) {
			return fmt.Errorf("%s: remote %q selects no provider the configuration requires (%s): check the label, or the provider would run here", r.At(), r.Label, requiredList(reqs))
		}
	}
	for _, s := range cfg.Sandboxes {
		if s.Label != "*" && !selects(s.Pattern) {
			return fmt.Errorf("%s: sandbox %q selects no provider the configuration requires (%s): check the label, or the provider would run without this sandbox", s.At(), s.Label, requiredList(reqs))
		}
	}
	return nil
}

func requiredList(reqs map[string]*module.Requirement) string {
	if len(reqs) == 0 {
		return "none"
	}
	l := make([]string, 0, len(reqs))
	for a := range reqs {
		l = append(l, a)
	}
	slices.Sort(l)
	return strings.Join(l, ", ")
}
