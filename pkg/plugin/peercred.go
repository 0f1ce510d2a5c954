package plugin

import (
	"fmt"
	"net"
	"os"
	"sync"
)

// Who may connect to a proxy. A proxy's socket is in the run's directory (0700, the user's), but
// every process oprov starts runs as the user: a provider, sandboxed or not, can find another
// provider's proxy socket there (inotify) and connect, and Landlock does not govern connecting to
// a socket by its path. Through it, it would drive the other provider: a remote one's calls run
// with the far side's credentials, a sandboxed one's with its rights.
//
// So a proxy accepts a connection only from oprov itself or from a process below the command
// oprov runs (tofu, or what runs it): the peer's pid, from the kernel (SO_PEERCRED), must lead
// through its parents to a child of oprov that is no provider oprov started, and no process on
// the way may be one. A provider's child that leaves its parent is given to init (or a
// subreaper above oprov), out of that tree, so it cannot pass for tofu. Where the kernel cannot
// say who connected (not Linux), every connection is taken, as before.
//
// What this does not cover: a provider tofu starts itself (one oprov does not manage) is below
// tofu, so it passes. It runs with every right of the user and is outside oprov's sandbox anyway.

// started holds the providers oprov started in this process, by pid, while they run.
var started sync.Map // int -> string (the provider's path, for messages)

// trackProvider notes a started provider's process; untrackProvider forgets it once stopped.
func trackProvider(p *Provider) {
	if p.cmd != nil && p.cmd.Process != nil {
		started.Store(p.cmd.Process.Pid, p.Path)
	}
}

func untrackProvider(p *Provider) {
	if p.cmd != nil && p.cmd.Process != nil {
		started.Delete(p.cmd.Process.Pid)
	}
}

// guardPeers gives a listener that closes, at once, each connection whose peer may not use the
// proxy of name (see above), and says so once per peer on oprov's stderr.
func guardPeers(l net.Listener, name string) net.Listener {
	return &peerGuard{Listener: l, name: name, said: map[int]bool{}}
}

type peerGuard struct {
	net.Listener
	name string
	mu   sync.Mutex
	said map[int]bool
}

func (g *peerGuard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		pid, why := refusePeer(c)
		if why == "" {
			return c, nil
		}
		c.Close()
		g.mu.Lock()
		if !g.said[pid] {
			g.said[pid] = true
			fmt.Fprintf(os.Stderr, "oprov: refused a connection to the proxy of %s from process %d: %s\n", quoteText(g.name), pid, why)
		}
		g.mu.Unlock()
	}
}

// allowedPeer walks pid's parents (parent gives a process's parent, 0 when unknown) and says why
// it may not connect, or "" when it may: self, or a process whose line of parents reaches self
// through no provider oprov started.
func allowedPeer(pid, self int, parent func(int) int) string {
	if pid == self {
		return ""
	}
	for p, steps := pid, 0; steps < 4096; steps++ {
		if path, ok := started.Load(p); ok {
			return fmt.Sprintf("it is the provider %s, or a process it started: only the command oprov runs may use a proxy", quoteText(path.(string)))
		}
		pp := parent(p)
		if pp == self {
			return ""
		}
		if pp <= 1 {
			return "it is no process below the command oprov runs: only that command may use a proxy"
		}
		p = pp
	}
	return "its line of parent processes is too long"
}
