package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Member is one provider of a launch group: the address tofu knows it by, and how to start it.
type Member struct {
	Addr    string
	Options Options
}

// Group is a set of providers launched together and handed to one tofu or terraform run: it
// starts them all at once, renders their reattach configuration, runs the command with it while
// passing signals on, and stops every provider afterwards (gracefully, then by kill).
type Group struct {
	Members   []Member
	Providers []*Provider // by member, once started
	// Relays stand between tofu and the providers it cannot reattach to directly (ones that serve
	// TLS on their own, see relay.go); nil for the others.
	Relays []*Relay
}

// StopTimeout bounds how long Stop waits for all providers before giving up on them.
const StopTimeout = 10 * time.Second

// StartGroup starts every member at once. If any fails, the ones that started are stopped and the
// error names the member's address.
func StartGroup(ctx context.Context, members []Member) (*Group, error) {
	g := &Group{Members: members, Providers: make([]*Provider, len(members)), Relays: make([]*Relay, len(members))}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Providers[i], errs[i] = Start(ctx, m.Options)
			if errs[i] == nil && m.Options.ForReattach && g.Providers[i].TLS {
				g.Relays[i], errs[i] = StartRelay(g.Providers[i].conn)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			g.Stop()
			return nil, fmt.Errorf("%s: %w", members[i].Addr, err)
		}
	}
	return g, nil
}

// Stop stops every started provider at once: StopProvider, then go-plugin's shutdown, then a kill
// of its whole process group after a grace period.
func (g *Group) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range g.Providers {
		if p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop(ctx) }()
		}
	}
	wg.Wait()
	for _, r := range g.Relays {
		if r != nil {
			r.Close()
		}
	}
}

// ReattachJSON renders TF_REATTACH_PROVIDERS for the whole group.
func (g *Group) ReattachJSON() ([]byte, error) {
	m := map[string]Reattach{}
	for i, p := range g.Providers {
		rc := p.ReattachConfig()
		if r := g.Relays[i]; r != nil {
			rc.Addr = r.Addr()
		}
		m[g.Members[i].Addr] = rc
	}
	return json.Marshal(m)
}

// KillAfter is how long a command that ignores a forwarded signal has before it is killed.
const KillAfter = 30 * time.Second

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
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var killTimer <-chan time.Time
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
			if killTimer == nil {
				killTimer = time.After(KillAfter)
			}
		case <-killTimer:
			cmd.Process.Kill()
		case err := <-done:
			return exitCode(err)
		}
	}
}

// exitCode turns a finished command's error into its exit code.
func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, err
	}
	code := ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && code < 0 && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return code, nil
}
