package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/sign/trustedroot"
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

By default this is the public-good Sigstore instance (` + trustedroot.DefaultRepository + `), checked
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
	c.Flags().StringVar(&o.TUFURL, "tuf-url", "", "the TUF repository or a mirror of it (default "+trustedroot.DefaultRepository+")")
	c.Flags().StringVar(&o.TUFRoot, "tuf-root", "", "the TUF repository's root.json, obtained out of band (default: the public-good root built in)")
	c.Flags().DurationVar(&o.Timeout, "timeout", 2*time.Minute, "give up after this long")
	o.output.pathHint = "--to"
	o.output.register(c)
	return c
}

// source checks the flags and gives the repository to fetch from and the TUF root that vouches
// for it (nil: the public-good root built in).
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
	if repo, err = trustedroot.Repository(o.TUFURL); err != nil {
		return "", nil, o.fetchError(repo, err)
	}
	if o.TUFRoot != "" {
		if tufRoot, err = o.readTUFRoot(o.TUFRoot); err != nil {
			return "", nil, err
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
	res, err := trustedroot.Fetch(ctx, trustedroot.Options{
		Repository: repo,
		TUFRoot:    tufRoot,
		CacheDir:   filepath.Join(dir, "tuf"),
		Timeout:    o.Timeout,
		UserAgent:  "oprov/" + currentVersion().Version,
	})
	if err != nil {
		return o.failed(o.fetchError(repo, err))
	}
	if err := scratch.WriteFileAtomic(o.Out, func(w io.Writer) error {
		_, err := w.Write(res.JSON)
		return err
	}); err != nil {
		return o.failed(fmt.Errorf("trusted-root: writing %s: %w", o.Out, err))
	}
	sum := &trustSummary{File: o.Out, Repository: res.Repository, Summary: res.Summary}
	if o.output.JSON() {
		return writeJSON(o.io.Out, sum)
	}
	writeTrustedRootText(o.io.Out, sum)
	return nil
}

// fetchError words a failed fetch for the command line, naming the flag to change, and gives it
// the exit code of its kind: 2 a bad --tuf-url or --tuf-root, 3 unreachable or timed out, 10
// refused, 1 anything else.
func (o *trustedRootOptions) fetchError(repo string, err error) error {
	var te *trustedroot.Error
	if !errors.As(err, &te) {
		return err // cancelled
	}
	const none = "; nothing was written"
	msg := "trusted-root: " + te.Error()
	switch te.Reason {
	case trustedroot.BadURL, trustedroot.BadURLPath:
		msg = "trusted-root: --tuf-url " + te.Error()
	case trustedroot.TUFRootTooLarge:
		msg = fmt.Sprintf("trusted-root: --tuf-root %s is over %d KiB: it is not a TUF root.json", o.TUFRoot, trustedroot.MaxTUFRootSize>>10)
	case trustedroot.NotTUFRoot:
		msg = fmt.Sprintf("trusted-root: --tuf-root %s is not a TUF root.json (%v): give the root.json of the repository --tuf-url names", o.TUFRoot, te.Err)
	case trustedroot.TUFRootNotSelfSigned:
		msg = fmt.Sprintf("trusted-root: --tuf-root %s is not signed by its own root keys (%v): get the repository's root.json again", o.TUFRoot, te.Err)
	case trustedroot.TimedOut:
		msg = fmt.Sprintf("trusted-root: %s did not answer within %s (--timeout)"+none, repo, o.Timeout)
	case trustedroot.NotReached:
		msg += none + " (check --tuf-url and the network)"
	case trustedroot.RefusedByTUF:
		msg += none + " (the mirror may be stale or tampered with; with --tuf-root, check it is this repository's root.json)"
	default:
		msg += none
	}
	switch te.Kind {
	case trustedroot.BadInput:
		return usageErrorf("%s", msg)
	case trustedroot.Unreachable:
		return &exitCodeError{code: exitUnreachable, msg: msg}
	case trustedroot.Refused:
		return &exitCodeError{code: exitRefused, msg: msg}
	}
	return fmt.Errorf("trusted-root: %s: %w"+none, repo, te.Err)
}

// writeTrustedRootText says where the trusted root went and what it holds.
func writeTrustedRootText(w io.Writer, sum *trustSummary) {
	fmt.Fprintf(w, "Wrote %s, the trusted root from %s (checked through TUF)\n", sum.File, sum.Repository)
	for _, g := range []struct {
		title string
		list  []trustedroot.Entry
	}{
		{"certificate authorities", sum.CAs},
		{"timestamp authorities", sum.TSAs},
		{"transparency logs", sum.Logs},
		{"certificate transparency logs", sum.CTLogs},
	} {
		fmt.Fprintf(w, "  %s: %d\n", g.title, len(g.list))
		for _, e := range g.list {
			fmt.Fprintf(w, "    %s  %s\n", printableText(e.URI), validity(e))
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
	}{false, err.Error(), exitCode(err)})
	return &answeredError{err}
}

// readTUFRoot reads --tuf-root and checks it is a TUF root signed by its own keys, before
// anything is fetched.
func (o *trustedRootOptions) readTUFRoot(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("trusted-root: --tuf-root: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, trustedroot.MaxTUFRootSize+1))
	if err != nil {
		return nil, usageErrorf("trusted-root: --tuf-root %s: %v", path, err)
	}
	if err := trustedroot.CheckTUFRoot(data); err != nil {
		return nil, o.fetchError("", err)
	}
	return data, nil
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

// trustSummary is what trusted-root prints: the file written, where it came from and what it
// holds.
type trustSummary struct {
	File       string `json:"file"`
	Repository string `json:"repository"`
	trustedroot.Summary
}

// validity is when e is valid, as trusted-root prints it.
func validity(e trustedroot.Entry) string {
	from, until := "always", "now"
	if e.Start != nil {
		from = e.Start.Format(time.DateOnly)
	}
	if e.End != nil {
		until = e.End.Format(time.DateOnly)
	}
	return "valid " + from + " to " + until
}
