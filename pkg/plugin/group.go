package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
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
}

// Group is a set of providers launched together and handed to one tofu or terraform run: it
// starts them all at once, renders their reattach configuration, runs the command with it while
// passing signals on, and stops every provider afterwards (gracefully, then by kill).
type Group struct {
	Members   []Member
	Providers []*Provider // by member, once started
	Proxies   []*Proxy    // by member: nil where tofu talks to the provider directly
	// Dir is the run's private directory (mode 0700): every member's sockets and temporary
	// files are inside it, and Stop removes it.
	Dir string
}

// StopTimeout bounds how long Stop waits for all providers before giving up on them.
const StopTimeout = 10 * time.Second

// StartGroup starts every member at once. If any fails, the ones that started are stopped and the
// error names the member's address.
func StartGroup(ctx context.Context, members []Member) (*Group, error) {
	dir, err := makePrivateDir()
	if err != nil {
		return nil, fmt.Errorf("private directory for the providers' sockets: %w", err)
	}
	g := &Group{Members: members, Providers: make([]*Provider, len(members)), Proxies: make([]*Proxy, len(members)), Dir: dir}
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
			g.Providers[i], errs[i] = Start(ctx, opts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil && (members[i].Middleware != nil || members[i].Options.ForReattach && g.Providers[i].TLS) {
			// A provider that serves TLS on its own (the Python tf SDK) cannot be reattached to
			// directly: tofu reattaches without TLS. The proxy stands in for it, middleware or not.
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
	var err error
	g.Proxies[i], err = StartProxy(g.Providers[i], mw)
	return err
}

// Stop stops every started provider at once: StopProvider, then go-plugin's shutdown, then a kill
// of its whole process group after a grace period.
func (g *Group) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	for _, x := range g.Proxies {
		if x != nil {
			x.Stop()
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
	if g.Dir != "" {
		os.RemoveAll(g.Dir)
	}
}

// ReattachJSON renders TF_REATTACH_PROVIDERS for the whole group.
func (g *Group) ReattachJSON() ([]byte, error) {
	m := map[string]Reattach{}
	for i, p := range g.Providers {
		if x := g.Proxies[i]; x != nil {
			m[g.Members[i].Addr] = x.ReattachConfig()
			continue
		}
		m[g.Members[i].Addr] = p.ReattachConfig()
	}
	return json.Marshal(m)
}

// KillAfter is how long a command that ignores a forwarded signal has before it is killed.
const KillAfter = signals.KillAfter

// Run runs cmd with TF_REATTACH_PROVIDERS set to the group, passes SIGINT and SIGTERM on to it
// (killing it if it ignores them for KillAfter), and gives its exit code: 128+N when a signal N
// ended it. The providers keep running; call Stop afterwards.
func (g *Group) Run(cmd *exec.Cmd) (int, error) {
	rj, err := g.ReattachJSON()
	if err != nil {
		return 0, err
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "TF_REATTACH_PROVIDERS="+string(rj))
	return signals.Run(cmd, KillAfter)
}
