package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
	"unicode"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/spf13/cobra"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/sign/trustroot"
)

type trustedRootOptions struct {
	io      *IOStreams
	Out     string
	TUFURL  string
	TUFRoot string
	Timeout time.Duration
	output  outputFlag
}

func newTrustedRootCmd(ios *IOStreams) *cobra.Command {
	o := &trustedRootOptions{io: ios}
	c := &cobra.Command{
		Use:   "trusted-root [--to FILE] [--tuf-url URL --tuf-root ROOT.json]",
		Short: "Fetch Sigstore's trusted_root.json through TUF, for keyless verification offline",
		Long: `Fetch the trusted root that keyless verification needs (--trusted-root of verify and
verify-blob), through TUF, as cosign and gh do. TUF checks that the file is the one the
repository's keys signed, that the metadata is fresh, and that no mirror changed it.

By default this is the public-good Sigstore instance (` + trustroot.DefaultMirror + `), checked
against the TUF root built into oprov. For a private Sigstore instance, or a mirror of one
inside an air gap, give --tuf-url (https://, http:// or file://) and --tuf-root, the
repository's root.json obtained out of band. A mirror of the public-good repository needs only
--tuf-url.

This is the one oprov command that reaches the network for trust material: verify and
verify-blob never do. Run it once, check what it prints, and pass the file on.

The file is written whole or not at all, only once it parses as a trusted root with at least
one certificate authority. TUF metadata is kept in oprov's cache directory, under tuf/.

Exit codes: 0 written; 10 refused (metadata not signed by the root's keys, expired, or a file
that does not match it); 3 the repository could not be reached or timed out; 2 a bad flag or
--tuf-root file; 1 anything else.`,
		Example: `  oprov trusted-root
  oprov trusted-root --to /etc/oprov/trusted_root.json -o json
  oprov trusted-root --tuf-url file:///media/usb/tuf --tuf-root root.json --to trusted_root.json`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return runTrustedRoot(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Out, "to", "trusted_root.json", "the file to write")
	c.Flags().StringVar(&o.TUFURL, "tuf-url", "", "the TUF repository or a mirror of it (default "+trustroot.DefaultMirror+")")
	c.Flags().StringVar(&o.TUFRoot, "tuf-root", "", "the TUF repository's root.json, obtained out of band (default: the public-good root built in)")
	c.Flags().DurationVar(&o.Timeout, "timeout", 2*time.Minute, "give up after this long")
	o.output.pathHint = "--to"
	o.output.register(c)
	return c
}

// source checks the flags and gives the repository to fetch from and the TUF root that vouches
// for it.
func (o *trustedRootOptions) source() (repo string, tufRoot []byte, err error) {
	if o.TUFRoot != "" && o.TUFURL == "" {
		return "", nil, usageErrorf("trusted-root: --tuf-root needs --tuf-url, the repository that root.json is for")
	}
	if o.Out == "" {
		return "", nil, usageErrorf("trusted-root: --to is empty: give the file to write")
	}
	if o.Timeout <= 0 {
		return "", nil, usageErrorf("trusted-root: --timeout %s: give a positive duration, such as 2m", o.Timeout)
	}
	if st, err := os.Stat(o.Out); err == nil && st.IsDir() {
		return "", nil, usageErrorf("trusted-root: --to %s is a directory: give a file name", o.Out)
	}
	if st, err := os.Stat(filepath.Dir(o.Out)); err != nil || !st.IsDir() {
		return "", nil, usageErrorf("trusted-root: --to %s: its directory %s does not exist", o.Out, filepath.Dir(o.Out))
	}
	repo = trustroot.DefaultMirror
	if o.TUFURL != "" {
		if repo, err = trustroot.CheckRepository(o.TUFURL); err != nil {
			return "", nil, usageErrorf("trusted-root: --tuf-url %q: %v", o.TUFURL, err)
		}
	}
	if o.TUFRoot != "" {
		if tufRoot, err = trustroot.ReadTUFRoot(o.TUFRoot); err != nil {
			return "", nil, usageErrorf("trusted-root: --tuf-root %v", err)
		}
	}
	return repo, tufRoot, nil
}

func runTrustedRoot(ctx context.Context, o *trustedRootOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	repo, tufRoot, err := o.source()
	if err != nil {
		return err
	}
	dir, err := cache.DefaultDir()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	data, tr, err := trustroot.Fetch(ctx, trustroot.Options{Repository: repo, TUFRoot: tufRoot,
		CacheDir: filepath.Join(dir, "tuf"), UserAgent: "oprov/" + currentVersion().Version})
	if err != nil {
		return o.failed(o.fetchError(repo, err))
	}
	if err := scratch.WriteFileAtomic(o.Out, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return o.failed(fmt.Errorf("trusted-root: writing %s: %w", o.Out, err))
	}
	sum := summarizeTrustedRoot(tr)
	sum.File, sum.Repository = o.Out, repo
	if o.output.JSON() {
		return writeJSON(o.io.Out, sum)
	}
	writeTrustedRootText(o.io.Out, sum)
	return nil
}

// writeTrustedRootText says where the trusted root went and what it holds.
func writeTrustedRootText(w io.Writer, sum *trustSummary) {
	fmt.Fprintf(w, "Wrote %s, the trusted root from %s (checked through TUF)\n", sum.File, sum.Repository)
	for _, g := range []struct {
		title string
		list  []trustEntry
	}{
		{"certificate authorities", sum.CAs},
		{"timestamp authorities", sum.TSAs},
		{"transparency logs", sum.Logs},
		{"certificate transparency logs", sum.CTLogs},
	} {
		fmt.Fprintf(w, "  %s: %d\n", g.title, len(g.list))
		for _, e := range g.list {
			fmt.Fprintf(w, "    %s  %s\n", printableText(e.URI), e.validity())
		}
	}
}

// failed answers a failure; with -o json, {"written": false, ...} on stdout too.
func (o *trustedRootOptions) failed(err error) error {
	if !o.output.JSON() {
		return err
	}
	writeJSON(o.io.Out, struct {
		Written  bool   `json:"written"`
		Reason   string `json:"reason"`
		ExitCode int    `json:"exit_code"`
	}{false, err.Error(), exitCodeOf(err)})
	return &answeredError{err}
}

// exitCodeOf is exitCode, reading an exitCodeError's own code first.
func exitCodeOf(err error) int {
	var ce *exitCodeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitCode(err)
}

// fetchError is a failed fetch as the command says it, with its exit code: 3 the repository
// could not be reached or did not answer within --timeout, 10 what it served was refused.
func (o *trustedRootOptions) fetchError(repo string, err error) error {
	switch trustroot.KindOf(err) {
	case trustroot.TimedOut:
		return &exitCodeError{code: exitUnreachable, msg: fmt.Sprintf("trusted-root: %s did not answer within %s (--timeout); nothing was written", repo, o.Timeout)}
	case trustroot.Refused:
		return &exitCodeError{code: exitRefused, msg: fmt.Sprintf("trusted-root: %v; nothing was written (the mirror may be stale or tampered with; with --tuf-root, check it is this repository's root.json)", err)}
	case trustroot.Unusable:
		return &exitCodeError{code: exitRefused, msg: fmt.Sprintf("trusted-root: %v; nothing was written", err)}
	case trustroot.Unreachable:
		return &exitCodeError{code: exitUnreachable, msg: fmt.Sprintf("trusted-root: %v; nothing was written (check --tuf-url and the network)", err)}
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("trusted-root: %w; nothing was written", err)
}

// printableText is s as it may reach a terminal: itself when every character is printable, else
// quoted, so that a trusted root's URIs cannot send control sequences to the user's terminal.
func printableText(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// trustSummary is what a trusted root holds, as trusted-root prints it.
type trustSummary struct {
	File       string       `json:"file"`
	Repository string       `json:"repository"`
	CAs        []trustEntry `json:"certificate_authorities"`
	TSAs       []trustEntry `json:"timestamp_authorities"`
	Logs       []trustEntry `json:"transparency_logs"`
	CTLogs     []trustEntry `json:"ct_logs"`
}

type trustEntry struct {
	URI   string     `json:"uri"`
	Start *time.Time `json:"valid_from,omitempty"`
	End   *time.Time `json:"valid_until,omitempty"`
}

func (e trustEntry) validity() string {
	from, until := "always", "now"
	if e.Start != nil {
		from = e.Start.Format(time.DateOnly)
	}
	if e.End != nil {
		until = e.End.Format(time.DateOnly)
	}
	return "valid " + from + " to " + until
}

func newTrustEntry(uri string, start, end time.Time) trustEntry {
	e := trustEntry{URI: uri}
	if !start.IsZero() {
		s := start.UTC()
		e.Start = &s
	}
	if !end.IsZero() {
		t := end.UTC()
		e.End = &t
	}
	return e
}

func summarizeTrustedRoot(tr *root.TrustedRoot) *trustSummary {
	s := &trustSummary{CAs: []trustEntry{}, TSAs: []trustEntry{}}
	for _, ca := range tr.FulcioCertificateAuthorities() {
		if f, ok := ca.(*root.FulcioCertificateAuthority); ok {
			s.CAs = append(s.CAs, newTrustEntry(f.URI, f.ValidityPeriodStart, f.ValidityPeriodEnd))
		}
	}
	for _, ta := range tr.TimestampingAuthorities() {
		if t, ok := ta.(*root.SigstoreTimestampingAuthority); ok {
			s.TSAs = append(s.TSAs, newTrustEntry(t.URI, t.ValidityPeriodStart, t.ValidityPeriodEnd))
		}
	}
	s.Logs, s.CTLogs = logEntries(tr.RekorLogs()), logEntries(tr.CTLogs())
	return s
}

func logEntries(logs map[string]*root.TransparencyLog) []trustEntry {
	out := []trustEntry{}
	for _, l := range logs {
		out = append(out, newTrustEntry(l.BaseURL, l.ValidityPeriodStart, l.ValidityPeriodEnd))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].URI != out[j].URI {
			return out[i].URI < out[j].URI
		}
		return out[i].Start != nil && (out[j].Start == nil || out[i].Start.Before(*out[j].Start))
	})
	return out
}
