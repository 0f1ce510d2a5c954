package loader

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/sandbox"
	"github.com/oprov/oprov/pkg/source"
)

// HostOptions say how the far side runs what it is asked to. The rights a provider gets here
// come from this side's operator: Config and RequireSandbox, never the request.
type HostOptions struct {
	Cache *cache.Cache
	// Config is the far side's own configuration (--config): the providers that may run here,
	// whose signatures they need, and the sandbox each runs under. nil: any provider the near
	// side's lock vouches for may run.
	Config *config.HostConfig
	// RequireSandbox runs every provider under a sandbox: the Config's block for it, else the
	// default sandbox, which the request may narrow and never widen.
	RequireSandbox bool
	// Registry reaches the registries of Config's oci_mirror blocks (nil: the defaults).
	Registry *oci.Client
	In       io.Reader
	Out      io.WriteCloser
	// Hangup, when set, is closed once nothing reads Out any more (plugin.WatchHangup on
	// standard output): the far side then ends at once, with its provider.
	Hangup <-chan struct{}
	// Log, when set, hears what the far side refused and why (its stderr).
	Log io.Writer
	// CacheLimit bounds the cache's size, in bytes, past which no zip is taken from a near side
	// (0: Config's cache_limit, else config.DefaultHostCacheLimit).
	CacheLimit uint64
}

// HostRemote is the far side (`oprov provider host --stdio`): it says its platform, checks the
// request against its own configuration (the provider allowed here, its release signed as this
// side's policy requires), takes the package from its cache or from the near side (checked
// against the verified digest and the near side's lock before it enters the cache), launches it
// under the sandbox this side's operator set (narrowed by the request's, never widened) with
// this machine's environment, and serves it on the connection until the connection ends.
func HostRemote(ctx context.Context, ho HostOptions) error {
	h := &plugin.RemoteHost{In: ho.In, Out: ho.Out, Hangup: ho.Hangup, Platform: hostPlatform().String(), Source: true}
	h1s := &zipH1s{of: map[digest.Digest]string{}}
	if ho.Config != nil {
		h.Streams = ho.Config.Streams
	}
	h.Launch = func(ctx context.Context, req *plugin.RemoteRequest, zip func(io.Writer) error) (plugin.Options, error) {
		addr, err := manifest.ParseProviderAddress(req.Address)
		if err != nil {
			return plugin.Options{}, err
		}
		// A provider built from source is refused first unless this side's operator allows it.
		if req.Source {
			if err := ho.allowSource(addr, req); err != nil {
				return plugin.Options{}, err
			}
		}
		// The sandbox next: a request beyond it is refused before anything is fetched.
		box, err := ho.sandboxFor(addr, req)
		if err != nil {
			return plugin.Options{}, err
		}
		var verified *cache.Package
		if !req.Source && ho.Config != nil {
			if verified, err = ho.verify(ctx, addr, req); err != nil {
				return plugin.Options{}, err
			}
		}
		in, err := hostPackage(ctx, ho, req, verified, zip, h1s)
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
		if box != nil {
			if o.Sandbox, o.SandboxExec, err = hostSandbox(box, req.Address, in.Executable); err != nil {
				return plugin.Options{}, err
			}
		}
		return o, nil
	}
	return h.Serve(ctx)
}

// sandboxFor is the sandbox addr runs under here: the far operator's (Config's block, or the
// default under RequireSandbox or for a provider built from source) narrowed by the request's
// block; with neither from the operator,
// the request's block as it asks (it can only confine the provider more than none).
func (ho HostOptions) sandboxFor(addr manifest.ProviderAddress, req *plugin.RemoteRequest) (*config.Sandbox, error) {
	var far *config.Sandbox
	if ho.Config != nil {
		far = ho.Config.SandboxFor(addr)
	}
	switch {
	case far != nil:
	case ho.RequireSandbox:
		far = &config.Sandbox{Label: "*", Range: hcl.Range{Filename: "--require-sandbox (the default sandbox; no far configuration block selects " + addr.String() + ")"}}
	case req.Source:
		// Code no one signed runs sandboxed unless the operator's own block says how.
		far = &config.Sandbox{Label: "*", Range: hcl.Range{Filename: "the default sandbox for a provider built from source (no sandbox block of the far side's configuration selects " + addr.String() + ")"}}
	}
	var near *config.Sandbox
	if len(req.Sandbox) > 0 {
		var err error
		if near, err = nearSandbox(req.Sandbox); err != nil {
			return nil, err
		}
	}
	return narrowSandbox(far, near)
}

// allowSource refuses a provider the near side built from its own source unless this side's
// operator allows its address (allow_source in a host block of --config): such a package has no
// release and no signature, so nothing but that setting vouches for it. The request's word that
// it is source is no right: it only routes the request here, never past verify.
func (ho HostOptions) allowSource(addr manifest.ProviderAddress, req *plugin.RemoteRequest) error {
	if ho.Config == nil {
		return fmt.Errorf("%s was built from source on the near side: no release, no signature, and this far side has no configuration (--config) to allow it; its operator allows such providers by naming them in allow_source in a host block of the far side's --config", addr)
	}
	if !ho.Config.SourceAllowed(addr) {
		where := "no host block of " + ho.Config.Path + " sets allow_source"
		if ho.Config.AllowSourceAt != "" {
			where = "allow_source in the host block at " + ho.Config.AllowSourceAt + " does not name it"
		}
		return fmt.Errorf("%s was built from source on the near side (no release, no signature), and the far side's configuration does not allow that: %s (its operator adds the address there)", addr, where)
	}
	if req.Version != source.DevVersion {
		return fmt.Errorf("%s: a provider built from source is version %s, not %q", addr, source.DevVersion, req.Version)
	}
	return nil
}

// verify resolves the requested version through the far configuration's oci_mirror block for
// addr, checking its signatures under that block's policy, and gives the package this machine's
// registry and policy vouch for: the near side's zip must be that one.
func (ho HostOptions) verify(ctx context.Context, addr manifest.ProviderAddress, req *plugin.RemoteRequest) (*cache.Package, error) {
	m := ho.Config.MirrorFor(addr)
	if m == nil {
		return nil, fmt.Errorf("%s may not run on this host: no oci_mirror block of the far side's configuration %s includes it (its operator adds it to an include there)", addr, ho.Config.Path)
	}
	v, err := manifest.ParseVersion(req.Version)
	if err != nil {
		return nil, fmt.Errorf("the request's version %q: %w", req.Version, err)
	}
	opts := &Options{Cache: ho.Cache, Registry: ho.Registry, Host: hostPlatform(), Log: ho.Log}
	s := newSession(opts)
	s.cfg = ho.Config.AsConfig()
	pkg, err := s.multi().PackageFor(ctx, addr, v, hostPlatform())
	if err != nil {
		return nil, fmt.Errorf("%s %s: the far side's own check of the release (oci_mirror at %s) failed: %w", addr, req.Version, hcldiagAt(m.Range), err)
	}
	if pkg.Zip.String() != req.Zip {
		return nil, fmt.Errorf("%s %s: the near side's zip (%s) is not the one the far side's registry and policy vouch for (%s), so nothing was asked for", addr, req.Version, req.Zip, pkg.Zip)
	}
	return pkg, nil
}

func hcldiagAt(r hcl.Range) string { return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line) }

// nearSandbox reads the request's sandbox block, its paths resolved on this machine: ~ is this
// account's home, and so is the base of a relative path.
func nearSandbox(raw json.RawMessage) (*config.Sandbox, error) {
	var rs remoteSandbox
	if err := json.Unmarshal(raw, &rs); err != nil {
		return nil, fmt.Errorf("the request's sandbox: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("the request's sandbox paths are relative to this account's home: %w", err)
	}
	b := &config.Sandbox{Label: rs.Label, Connect: rs.Connect, Env: rs.Env,
		Memory: rs.Memory, Processes: rs.Processes, OpenFiles: rs.OpenFiles, CPUSeconds: rs.CPUSeconds, BestEffort: rs.BestEffort,
		Range: hcl.Range{Filename: "the near side's " + rs.File, Start: hcl.Pos{Line: rs.Line}}}
	for _, l := range []struct {
		in  []string
		out *[]string
	}{{rs.Read, &b.Read}, {rs.Write, &b.Write}, {rs.Execute, &b.Execute}} {
		for _, p := range l.in {
			abs, err := config.SandboxPath(home, p)
			if err != nil {
				return nil, fmt.Errorf("the request's sandbox %q at %s: %w", b.Label, b.At(), err)
			}
			*l.out = append(*l.out, abs)
		}
	}
	for _, n := range b.Env {
		if p := strings.TrimSuffix(n, "*"); p == "" || strings.ContainsAny(p, "=*") {
			return nil, fmt.Errorf("the request's sandbox %q at %s: env %q is not a variable name (NAME, or PREFIX* for a family)", b.Label, b.At(), n)
		}
	}
	return b, nil
}

// narrowSandbox fits the near side's block (nil: none) inside the far operator's (nil: no
// sandbox). A list the near block gives must lie within the far block's and replaces it; a list
// it leaves out is the far block's. A limit may be lowered, never raised or lifted. Anything
// beyond the far block is refused, naming the far setting.
func narrowSandbox(far, near *config.Sandbox) (*config.Sandbox, error) {
	if far == nil || near == nil {
		if far == nil {
			return near, nil
		}
		return far, nil
	}
	out := *far
	beyond := func(what string, asked any, farHas any) error {
		return fmt.Errorf("the near side's sandbox %q at %s asks %s = %v, beyond the far side's sandbox %q at %s (%s = %v): the far side's operator sets the sandbox; the near side may only narrow it",
			near.Label, near.At(), what, asked, far.Label, far.At(), what, farHas)
	}
	for _, l := range []struct {
		what      string
		far, near []string
		out       *[]string
	}{{"read", far.Read, near.Read, &out.Read}, {"write", far.Write, near.Write, &out.Write}, {"execute", far.Execute, near.Execute, &out.Execute}} {
		if len(l.near) == 0 {
			continue
		}
		// The sandbox grants a path where it leads, so a path is judged, and granted, there: a
		// link below a far path (say one an earlier provider made) must not lead out of it.
		var farReal, real []string
		for _, q := range l.far {
			if rq, err := leadsTo(q); err == nil {
				farReal = append(farReal, rq)
			}
		}
		for _, p := range l.near {
			rp, err := leadsTo(p)
			if err == nil && !slices.ContainsFunc(farReal, func(rq string) bool { return within(rq, rp) }) {
				err = fmt.Errorf("it leads to %s", rp)
			}
			if err != nil {
				return nil, fmt.Errorf("%w (%v)", beyond(l.what, fmt.Sprintf("[%q]", p), quoteList(l.far)), err)
			}
			real = append(real, rp)
		}
		*l.out = real
		out.NoLinks = append(out.NoLinks, real...)
	}
	if len(near.Connect) > 0 {
		for _, p := range near.Connect {
			if !slices.Contains(far.Connect, p) {
				return nil, beyond("connect", fmt.Sprintf("[%d]", p), far.Connect)
			}
		}
		out.Connect = near.Connect
	}
	if len(near.Env) > 0 {
		for _, n := range near.Env {
			if !slices.ContainsFunc(far.Env, func(f string) bool { return envWithin(n, f) }) {
				return nil, beyond("env", fmt.Sprintf("[%q]", n), quoteList(far.Env))
			}
		}
		out.Env = near.Env
	}
	for _, l := range []struct {
		what      string
		far, near uint64
		out       *uint64
	}{{"memory", far.Memory, near.Memory, &out.Memory}, {"processes", far.Processes, near.Processes, &out.Processes},
		{"open_files", far.OpenFiles, near.OpenFiles, &out.OpenFiles}, {"cpu_time (seconds)", far.CPUSeconds, near.CPUSeconds, &out.CPUSeconds}} {
		if l.near == 0 {
			continue
		}
		if l.far != 0 && l.near > l.far {
			return nil, beyond(l.what, l.near, l.far)
		}
		*l.out = l.near
	}
	if near.BestEffort && !far.BestEffort {
		return nil, beyond("best_effort", true, false)
	}
	out.BestEffort = far.BestEffort && near.BestEffort
	return &out, nil
}

// leadsTo is the path p leads to on this machine: the links of its longest existing part
// resolved, the rest as written. A link whose target is missing is an error: what it would lead
// to cannot be judged.
func leadsTo(p string) (string, error) {
	rest := ""
	for cur := p; ; {
		if _, err := os.Lstat(cur); err == nil {
			r, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return "", err
			}
			return filepath.Join(r, rest), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// envWithin says whether the variables n names (NAME, or PREFIX*) are all ones f names.
func envWithin(n, f string) bool {
	if fp, ok := strings.CutSuffix(f, "*"); ok {
		return strings.HasPrefix(strings.TrimSuffix(n, "*"), fp) && fp != ""
	}
	return n == f
}

func quoteList(l []string) string {
	if len(l) == 0 {
		return "[] (none beyond the default)"
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// hostedPackage is a far side's package, installed.
type hostedPackage struct {
	*cache.Installed
	typ string
}

// hostPackage installs the requested package in the far side's cache: its zip from the cache, or
// from the near side into a private file, checked there by digest (the one verified holds, when
// the far configuration verified the release) and its h1: against the near side's lock, so a
// refused zip never enters the cache; and only while the cache stays within its bound.
func hostPackage(ctx context.Context, ho HostOptions, req *plugin.RemoteRequest, verified *cache.Package, zip func(io.Writer) error, h1s *zipH1s) (*hostedPackage, error) {
	c := ho.Cache
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
	if err := oci.DefaultLimits().CheckBlobSize("the request's zip", req.Size); err != nil {
		return nil, err
	}
	d, err := digest.Parse(req.Zip)
	if err != nil {
		return nil, fmt.Errorf("the request's zip digest: %w", err)
	}
	if d.Algorithm() != digest.SHA256 {
		return nil, fmt.Errorf("the request's zip digest %s is not sha256", d)
	}
	if len(req.H1) == 0 {
		return nil, fmt.Errorf("the near side's lock records no h1: hash for %s %s, so the package cannot be checked here: run 'oprov lock' on the near side", addr, req.Version)
	}
	pkg := &cache.Package{Addr: addr, Version: req.Version, Platform: plat, Filename: req.Filename, Zip: d, Size: req.Size,
		Auth: cache.Authentication{Method: "remote"}}
	if verified != nil {
		pkg.H1, pkg.Auth = verified.H1, verified.Auth
	}
	if !c.HasZip(d) {
		tmp, err := receiveZip(ctx, ho, req, d, zip)
		if err != nil {
			return nil, err
		}
		defer os.Remove(tmp)
		pkg.Fetch = func(_ context.Context, w io.Writer, _ oci.Progress) error {
			f, err := os.Open(tmp)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		}
	} else {
		pkg.Fetch = func(context.Context, io.Writer, oci.Progress) error {
			return fmt.Errorf("the zip %s left the far side's cache", d)
		}
	}
	z, err := c.PutZip(ctx, pkg, false, nil)
	if err != nil {
		return nil, err
	}
	if err := h1s.check(ctx, z.Path, d, req); err != nil {
		return nil, err
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

// zipH1s are the h1: hashes of the cache's zips this far process has computed, by the zip's
// sha256 digest: the starts of one command that share a connection ask for the same package
// each time, and inflating it to hash it again costs more than the rest of a launch. It lives in
// memory, for one connection; the cache's bytes are named by that digest, and the unpacked
// package is judged at each launch as before.
type zipH1s struct {
	mu sync.Mutex
	of map[digest.Digest]string
}

// check refuses the zip at path, of digest d, when the near side's lock does not record its h1:.
func (m *zipH1s) check(ctx context.Context, path string, d digest.Digest, req *plugin.RemoteRequest) error {
	m.mu.Lock()
	h1, ok := m.of[d]
	m.mu.Unlock()
	if !ok {
		var err error
		if h1, err = pkghash.ZipH1(ctx, path); err != nil {
			return err
		}
		m.mu.Lock()
		m.of[d] = h1
		m.mu.Unlock()
	}
	return judgeH1(h1, req)
}

// checkH1 refuses a zip whose h1: the near side's lock does not record.
func checkH1(ctx context.Context, path string, req *plugin.RemoteRequest) error {
	h1, err := pkghash.ZipH1(ctx, path)
	if err != nil {
		return err
	}
	return judgeH1(h1, req)
}

// judgeH1 refuses a zip of h1 when the near side's lock does not record it.
func judgeH1(h1 string, req *plugin.RemoteRequest) error {
	if !slices.Contains(req.H1, h1) {
		return fmt.Errorf("%s %s: the %s package's %s is not one the near side's lock records (%s), so nothing was unpacked or kept", req.Address, req.Version, req.Platform, h1, strings.Join(req.H1, ", "))
	}
	return nil
}

// receiveZip asks the near side for the zip, within the cache's bound, into a file of this
// cache's own temporary directory, and checks its digest and h1: there. It gives the file's
// path; a refused zip is removed.
func receiveZip(ctx context.Context, ho HostOptions, req *plugin.RemoteRequest, d digest.Digest, zip func(io.Writer) error) (path string, err error) {
	limit := uint64(config.DefaultHostCacheLimit)
	setting := "the default; set cache_limit in a host block of the far side's --config"
	switch {
	case ho.CacheLimit > 0:
		limit, setting = ho.CacheLimit, "the far side's own setting"
	case ho.Config != nil && ho.Config.CacheLimit > 0:
		limit, setting = ho.Config.CacheLimit, "cache_limit in "+ho.Config.Path
	}
	inv, err := ho.Cache.List()
	if err != nil {
		return "", err
	}
	if uint64(inv.Size)+uint64(inv.Temp.Size)+uint64(req.Size) > limit {
		return "", fmt.Errorf("the far side's cache holds %d bytes, and the %d-byte zip of %s %s would take it over its bound of %d bytes (%s): its operator runs 'oprov cache prune' there, or raises the bound", inv.Size+inv.Temp.Size, req.Size, req.Address, req.Version, limit, setting)
	}
	dir, err := ho.Cache.TmpDir()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "remote-*.zip")
	if err != nil {
		return "", err
	}
	defer func() {
		f.Close()
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	if err := zip(io.MultiWriter(f, h)); err != nil {
		return "", err
	}
	if got := digest.NewDigest(digest.SHA256, h); got != d {
		return "", fmt.Errorf("%s %s: the zip the near side sent is %s, not the %s its request named, so nothing was kept", req.Address, req.Version, got, d)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := checkH1(ctx, f.Name(), req); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// hostSandbox fits a sandbox block to this machine: the default for the package as unpacked
// here, what the block adds, and this kernel's support.
func hostSandbox(b *config.Sandbox, addr, exe string) (*sandbox.Spec, string, error) {
	spec, err := sandboxSpec(Launchable{Addr: addr, Executable: exe}, b)
	if err != nil {
		return nil, "", err
	}
	if spec, err = sandbox.Plan(spec, sandbox.Probe()); err != nil {
		return nil, "", fmt.Errorf("%s: %w", addr, err)
	}
	self, err := sandboxExecutable()
	if err != nil {
		return nil, "", err
	}
	return &spec, self, nil
}
