package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/oprov/oprov/manifest"
)

// Remote is one remote block of oprov.hcl: the providers it selects run on another machine, the
// far side, reached by a command whose standard input and output carry the connection (ssh,
// kubectl exec -i, docker exec -i) and which runs `oprov provider host --stdio` there.
type Remote struct {
	Label   string  // as written: an address, a pattern, or "*" for every provider
	Pattern Pattern // what the label selects
	Command []string
	// HelloTimeout bounds the wait for the far side's hello; 0 is oprov's default.
	HelloTimeout time.Duration
	Range        hcl.Range
}

type remoteFile struct {
	Label        string    `hcl:"pattern,label"`
	Command      []string  `hcl:"command"`
	HelloTimeout string    `hcl:"hello_timeout,optional"`
	DeclRange    hcl.Range `hcl:",def_range"`
}

// Bounds of a remote block's hello_timeout.
const (
	minHelloTimeout = time.Second
	maxHelloTimeout = 30 * time.Minute
)

// At is where the block is, FILE:LINE.
func (r *Remote) At() string { return fmt.Sprintf("%s:%d", r.Range.Filename, r.Range.Start.Line) }

// Name is how messages name the remote: its block, and the program it starts.
func (r *Remote) Name() string { return fmt.Sprintf("remote %q (%s)", r.Label, r.Command[0]) }

// parseRemotes checks every remote block: its label and its command.
func (c *Config) parseRemotes(blocks []remoteFile) error {
	seen := map[string]bool{}
	for _, b := range blocks {
		at := fmt.Sprintf("%s:%d", b.DeclRange.Filename, b.DeclRange.Start.Line)
		label := b.Label
		if label == "*" {
			label = "*/*/*"
		}
		pat, err := parsePattern(label)
		if err != nil {
			return fmt.Errorf("%s: remote %q: %w (or \"*\" for every provider)", at, b.Label, err)
		}
		if len(b.Command) == 0 || strings.TrimSpace(b.Command[0]) == "" {
			return fmt.Errorf("%s: remote %q: command is empty: name the program that reaches the far side and runs oprov there, e.g. [\"ssh\", \"-T\", \"deploy@bastion\", \"oprov\", \"provider\", \"host\", \"--stdio\"]", at, b.Label)
		}
		var hello time.Duration
		if b.HelloTimeout != "" {
			if hello, err = time.ParseDuration(b.HelloTimeout); err != nil || hello < minHelloTimeout || hello > maxHelloTimeout {
				return fmt.Errorf("%s: remote %q: hello_timeout = %q: give a duration from %s to %s, such as \"45s\" or \"2m\"", at, b.Label, b.HelloTimeout, minHelloTimeout, maxHelloTimeout)
			}
		}
		if seen[pat.String()] {
			return fmt.Errorf("%s: remote %q: a remote block for %s is declared twice", at, b.Label, pat)
		}
		seen[pat.String()] = true
		c.Remotes = append(c.Remotes, &Remote{Label: b.Label, Pattern: pat, Command: b.Command, HelloTimeout: hello, Range: b.DeclRange})
	}
	return nil
}

// RemoteFor gives the remote block that applies to addr, or nil (the provider runs here): the
// most specific pattern wins, as for sandbox blocks, the first written among equals.
func (c *Config) RemoteFor(addr manifest.ProviderAddress) *Remote {
	var best *Remote
	for _, r := range c.Remotes {
		if r.Pattern.Match(addr) && (best == nil || specificity(r.Pattern) > specificity(best.Pattern)) {
			best = r
		}
	}
	return best
}

// specificity counts a pattern's parts that are not "*": an exact address before
// NAMESPACE/*, before "*".
func specificity(p Pattern) int {
	n := 0
	for _, s := range []string{p.Hostname, p.Namespace, p.Type} {
		if s != "*" {
			n++
		}
	}
	return n
}
