package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oprov/oprov/internal/signals"
)

// Member is one provider of a launch group: the address tofu knows it by, how to start it, and
// optionally the middleware to put between tofu and it (given the running provider).
type Member struct {
	Addr       string
	Options    Options
	Middleware func(*Provider) (Middleware, error)
	// Wrap, when set, wraps the member's middleware (nil when it has none) wherever the group
	// puts a proxy in front of it; it adds no proxy of its own.
	Wrap func(Middleware) Middleware
	// Remote, when set, runs the provider on a far side (startRemote) instead of here; Options
	// then only name its type.
	Remote *RemoteOptions
	// StandIn, when set, answers the member's calls with no process (a replay): nothing is
	// started, and tofu reattaches to a StandIn speaking StandInProtocol.
	StandIn         Answer
	StandInProtocol int
}

// Group is a set of providers launched together and handed to one tofu or terraform run: it
// starts them all at once, renders their reattach configuration, runs the command with it while
// passing signals on, and stops every provider afterwards (gracefully, then by kill).
type Group struct {
	Members   []Member
	Providers []*Provider // by member, once started
	Proxies   []*Proxy    // by member: nil where tofu talks to the provider directly
	StandIns  []*StandIn  // by member: set where no provider runs
	// Dir is the run's private directory (mode 0700): every member's sockets and temporary
	// files are inside it, and Stop removes it.
	Dir string

	holdsProcs bool // a proxy runs: the group holds oprov to fewer cores (proxyProcs) until Stop
}

// proxyProcs is how many cores oprov's own Go code may run on while a proxy serves: half the
// machine's, at least one. The run's work is tofu's and the providers'; a proxy only forwards.
// Given every core, Go's scheduler wakes idle threads to look for work at each message a proxy
// passes, and on a machine the three processes already fill that cost about a fifth of the
// proxy's CPU (docs/performance.md, the sandboxed apply). A GOMAXPROCS the user set is kept.
func proxyProcs() int { return max(1, runtime.NumCPU()/2) }

// procsHeld counts the groups whose proxies hold oprov to proxyProcs; the first saves the
// setting it lowers, the last to stop puts it back.
var procsHeld struct {
	sync.Mutex
	groups int
	saved  int // 0: nothing was lowered
}

func holdProcs() {
	procsHeld.Lock()
	defer procsHeld.Unlock()
	procsHeld.groups++
	if procsHeld.groups > 1 || os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if want := proxyProcs(); runtime.GOMAXPROCS(0) > want {
		procsHeld.saved = runtime.GOMAXPROCS(want)
	}
}

func releaseProcs() {
	procsHeld.Lock()
	defer procsHeld.Unlock()
	procsHeld.groups--
	if procsHeld.groups == 0 && procsHeld.saved > 0 {
		runtime.GOMAXPROCS(procsHeld.saved)
		procsHeld.saved = 0
	}
}

// stopTimeout bounds how long Stop waits for all providers before giving up on them.
const stopTimeout = 10 * time.Second

// StartGroup starts every member at once. If any fails, the ones that started are stopped and the
// error names the member's address.
func StartGroup(ctx context.Context, members []Member) (*Group, error) {
	dir, err := makePrivateDir()
	if err != nil {
		return nil, fmt.Errorf("private directory for the providers' sockets: %w", err)
	}
	g := &Group{Members: members, Providers: make([]*Provider, len(members)), Proxies: make([]*Proxy, len(members)), StandIns: make([]*StandIn, len(members)), Dir: dir}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := m.Options
			if opts.Type == "" {
				opts.Type = m.Addr[strings.LastIndexByte(m.Addr, '/')+1:]
			}
			if opts.Dir, errs[i] = subDir(dir, strconv.Itoa(i)); errs[i] != nil {
				return
			}
			if m.StandIn != nil {
				g.StandIns[i], errs[i] = startStandIn(opts.Dir, m.StandInProtocol, m.StandIn)
				return
			}
			if m.Remote != nil {
				g.Providers[i], errs[i] = startRemote(ctx, *m.Remote)
				return
			}
			g.Providers[i], errs[i] = Start(ctx, opts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		m := members[i]
		if err == nil && m.StandIn == nil && (m.Middleware != nil || m.Wrap != nil || m.Options.ForReattach && g.Providers[i].TLS || m.Remote != nil) {
			// A provider that serves TLS on its own (the Python tf SDK) cannot be reattached to
			// directly: tofu reattaches without TLS. The proxy stands in for it, middleware or not;
			// and for a remote provider, which has no socket here. A Wrap (a sandboxed provider's
			// hints) needs the proxy too: its suggestion rides in the response tofu shows, where
			// the provider's stderr stream may still be in flight when tofu ends.
			err = g.proxy(i)
		}
		if err != nil {
			g.Stop()
			return nil, fmt.Errorf("%s: %w", members[i].Addr, err)
		}
	}
	return g, nil
}

// proxy puts a proxy, with member i's middleware if it has one, between tofu and it.
func (g *Group) proxy(i int) error {
	var mw Middleware
	if f := g.Members[i].Middleware; f != nil {
		var err error
		if mw, err = f(g.Providers[i]); err != nil {
			return err
		}
	}
	if w := g.Members[i].Wrap; w != nil {
		mw = w(mw)
	}
	var err error
	if g.Proxies[i], err = startProxy(g.Dir, g.Providers[i], mw); err == nil && !g.holdsProcs {
		g.holdsProcs = true
		holdProcs()
	}
	return err
}

// Stop stops every started provider at once: StopProvider, then go-plugin's shutdown, then a kill
// of its whole process group after a grace period.
func (g *Group) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	for _, x := range g.Proxies {
		if x != nil {
			x.Stop()
		}
	}
	for _, s := range g.StandIns {
		if s != nil {
			s.Stop()
		}
	}
	var wg sync.WaitGroup
	for _, p := range g.Providers {
		if p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop(ctx) }()
		}
	}
	wg.Wait()
	if g.holdsProcs {
		g.holdsProcs = false
		releaseProcs()
	}
	if g.Dir != "" {
		os.RemoveAll(g.Dir)
	}
}

// ReattachJSON renders TF_REATTACH_PROVIDERS for the whole group.
func (g *Group) ReattachJSON() ([]byte, error) {
	m := map[string]Reattach{}
	for i, p := range g.Providers {
		if s := g.StandIns[i]; s != nil {
			m[g.Members[i].Addr] = s.ReattachConfig()
			continue
		}
		if x := g.Proxies[i]; x != nil {
			m[g.Members[i].Addr] = x.ReattachConfig()
			continue
		}
		m[g.Members[i].Addr] = p.ReattachConfig()
	}
	return json.Marshal(m)
}

// killAfter is how long a command that ignores a forwarded signal has before it is killed.
const killAfter = signals.KillAfter

// reattachEnv is the variable through which tofu and terraform are handed running providers.
const reattachEnv = "TF_REATTACH_PROVIDERS"

// MergeReattach adds the group's entries to the TF_REATTACH_PROVIDERS the user already set
// (user, "" when unset), keeping every entry of theirs as they wrote it: a provider they started
// by hand (the SDK's --dev, under a debugger) joins the ones the group launched. An address
// both name is an error, since tofu would talk to one of them only.
func (g *Group) MergeReattach(user string) ([]byte, error) {
	ours, err := g.ReattachJSON()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(user) == "" {
		return ours, nil
	}
	merged := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(user), &merged); err != nil {
		return nil, fmt.Errorf("%s is set but is not a JSON object of provider addresses: %v", reattachEnv, err)
	}
	theirs := map[string]string{}
	for addr := range merged {
		theirs[canonicalAddr(addr)] = addr
	}
	var mine map[string]json.RawMessage
	if err := json.Unmarshal(ours, &mine); err != nil {
		return nil, err
	}
	for addr, rc := range mine {
		if prev, ok := theirs[canonicalAddr(addr)]; ok {
			return nil, fmt.Errorf("%s already names %s, which oprov run launches too: leave it out of %s, or out of the configuration oprov runs", reattachEnv, prev, reattachEnv)
		}
		merged[addr] = rc
	}
	return json.Marshal(merged)
}

// canonicalAddr spells a provider address the way tofu reads it: "acme/x" is the default
// registry's, and hostnames and names compare without case.
func canonicalAddr(addr string) string {
	a := strings.ToLower(strings.TrimSpace(addr))
	if strings.Count(a, "/") == 1 {
		a = "registry.opentofu.org/" + a
	}
	return a
}

// Run runs cmd with TF_REATTACH_PROVIDERS set to the group, added to the entries cmd's
// environment (os.Environ when nil) already had (see MergeReattach), passes SIGINT and SIGTERM on
// to it (killing it if it ignores them for killAfter), and gives its exit code: 128+N when a
// signal N ended it. The providers keep running; call Stop afterwards.
func (g *Group) Run(cmd *exec.Cmd) (int, error) {
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	var user string
	env := cmd.Env[:0:0]
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, reattachEnv+"="); ok {
			user = v
			continue
		}
		env = append(env, kv)
	}
	rj, err := g.MergeReattach(user)
	if err != nil {
		return 0, err
	}
	cmd.Env = append(env, reattachEnv+"="+string(rj))
	return signals.Run(cmd, killAfter)
}
