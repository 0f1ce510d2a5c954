package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/sign"
)

// cacheOptions are the flags every cache command takes.
type cacheOptions struct {
	io       *IOStreams
	CacheDir string
	output   outputFlag
}

func (o *cacheOptions) register(c *cobra.Command) {
	c.Flags().StringVar(&o.CacheDir, "cache-dir", "", "the cache (default $OPROV_CACHE_DIR, else $XDG_CACHE_HOME/oprov)")
	o.output.register(c)
}

// open checks the flags and opens the cache, which removes the temporary files of runs that are
// gone.
func (o *cacheOptions) open() (*cache.Cache, error) {
	if err := o.output.check(); err != nil {
		return nil, err
	}
	return o.io.Factory.openCache(o.CacheDir)
}

const cacheHelp = `The cache (OPROV_CACHE_DIR, default $XDG_CACHE_HOME/oprov) is shared by every project on the
machine: zips by digest, what each version's index held, unpacked packages, and builds of
providers kept as source. Each entry's last use is recorded when a run uses it.

Temporary files belong to the run writing them, which holds a lock on them while it lives. Any
run that opens the cache removes the temporary files of runs that are gone (killed, crashed) at
once; those of live runs are never touched.`

func newCacheCmd(ios *IOStreams) *cobra.Command {
	o := &cacheOptions{io: ios}
	c := &cobra.Command{
		Use:   "cache [list|prune|verify]",
		Short: "List, prune and verify the shared cache, and clear stale temporary files",
		Long:  "With no subcommand, list what the cache holds (as 'oprov cache list').\n\n" + cacheHelp,
		Example: `  oprov cache
  oprov cache prune --older-than 30d
  oprov cache verify -o json`,
		Args: argsRange(0, 0, "a subcommand: list, prune or verify"),
		RunE: func(c *cobra.Command, _ []string) error { return runCacheList(c.Context(), o) },
	}
	o.register(c)
	c.AddCommand(newCacheListCmd(ios), newCachePruneCmd(ios), newCacheVerifyCmd(ios))
	return c
}

func newCacheListCmd(ios *IOStreams) *cobra.Command {
	o := &cacheOptions{io: ios}
	c := &cobra.Command{
		Use:   "list",
		Short: "List the cache's entries (size, last use) and its temporary space",
		Long: `List every entry of the cache with its size and last use, the total, and the temporary space:
runs writing now, and what opening the cache just cleared of runs that are gone.

` + cacheHelp,
		Example: `  oprov cache list
  oprov cache list -o json | jq '.entries[] | select(.kind == "zip") | .size'`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runCacheList(c.Context(), o) },
	}
	o.register(c)
	return c
}

func runCacheList(ctx context.Context, o *cacheOptions) error {
	c, err := o.open()
	if err != nil {
		return err
	}
	defer c.Close()
	inv, err := c.List()
	if err != nil {
		return fmt.Errorf("cache %s: %w", c.Dir, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, inv)
	}
	fmt.Fprintf(o.io.Out, "Cache %s: %s, %s\n", inv.Dir, entries(len(inv.Entries), ""), humanBytes(inv.Size))
	for _, e := range inv.Entries {
		fmt.Fprintf(o.io.Out, "  %-8s  %9s  used %s  %s\n", e.Kind, humanBytes(e.Size), e.LastUsed.Local().Format("2006-01-02 15:04"), e.Name)
	}
	printTemp(o.io.Out, inv.Temp)
	return nil
}

// printTemp reports the temporary space: runs writing now, what is left by runs that are gone,
// and what opening the cache cleared.
func printTemp(w io.Writer, t cache.Temp) {
	fmt.Fprintf(w, "Temporary space: %s\n", humanBytes(t.Size))
	for _, o := range t.Owners {
		state := "being written by a live run"
		if !o.Live {
			state = "left by a run that is gone (the next run removes it)"
		}
		fmt.Fprintf(w, "  %9s  %s, pid %d, since %s\n", humanBytes(o.Size), state, o.PID, o.Since.Local().Format("2006-01-02 15:04:05"))
	}
	for _, o := range t.Unowned {
		fmt.Fprintf(w, "  %9s  %s, from an older oprov (removed once %s old)\n", humanBytes(o.Size), o.Path, cache.UnownedTempAge)
	}
	printCleared(w, t.Cleared)
}

func printCleared(w io.Writer, s scratch.Swept) {
	if s.Owners > 0 {
		fmt.Fprintf(w, "Cleared %s of temporary files left by %s that ended without cleaning up.\n", humanBytes(s.Bytes), plural(s.Owners, "run"))
	}
}

type cachePruneOptions struct {
	cacheOptions
	OlderThan string
	Unused    bool
	All       bool
	DryRun    bool
}

func newCachePruneCmd(ios *IOStreams) *cobra.Command {
	o := &cachePruneOptions{cacheOptions: cacheOptions{io: ios}}
	c := &cobra.Command{
		Use:   "prune [--older-than AGE] [--unused] [--all] [--dry-run]",
		Short: "Remove entries by last use or when nothing refers to them, and stale temporary files",
		Long: `Remove the entries the flags select, and the temporary files of runs that are gone. With no
flag, only the stale temporary files go. Each entry is removed whole: another run sees it or not,
never half of it. An install fetches what it needs again.

  --older-than AGE  entries not used for longer than AGE (30d, 12h, 90m)
  --unused          zips and unpacked packages that no cached version lists any more (left by
                    pruned versions, or by tags that moved)
  --all             everything

` + cacheHelp,
		Example: `  oprov cache prune
  oprov cache prune --older-than 30d --unused
  oprov cache prune --all --dry-run -o json`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runCachePrune(c.Context(), o) },
	}
	c.Flags().StringVar(&o.OlderThan, "older-than", "", "remove entries not used for longer than this (30d, 12h, 90m)")
	c.Flags().BoolVar(&o.Unused, "unused", false, "remove zips and unpacked packages no cached version lists")
	c.Flags().BoolVar(&o.All, "all", false, "remove every entry")
	c.Flags().BoolVar(&o.DryRun, "dry-run", false, "only say what would be removed")
	o.register(c)
	return c
}

// maxAgeDays bounds an age in days so that it fits a time.Duration (about 292 years).
const maxAgeDays = 100 * 365

// parseAge parses a duration that may also be given in days (30d).
func parseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || !(n > 0 && n <= maxAgeDays) {
			return 0, usageErrorf("--older-than %q: want a positive age (at most 100 years) such as 30d, 12h or 90m", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, usageErrorf("--older-than %q: want a positive age (at most 100 years) such as 30d, 12h or 90m", s)
	}
	return d, nil
}

func runCachePrune(ctx context.Context, o *cachePruneOptions) error {
	opts := cache.PruneOptions{Unused: o.Unused, All: o.All, DryRun: o.DryRun}
	if o.OlderThan != "" {
		var err error
		if opts.OlderThan, err = parseAge(o.OlderThan); err != nil {
			return err
		}
	}
	c, err := o.open()
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Prune(ctx, opts)
	if err != nil {
		return fmt.Errorf("cache prune: %w", err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			*cache.PruneResult
			DryRun bool `json:"dry_run"`
		}{res, o.DryRun})
	}
	verb := "Removed"
	if o.DryRun {
		verb = "Would remove"
	}
	fmt.Fprintf(o.io.Out, "%s %s (%s) from %s\n", verb, entries(len(res.Removed), ""), humanBytes(res.Bytes), c.Dir)
	for _, e := range res.Removed {
		fmt.Fprintf(o.io.Out, "  %-8s  %9s  %s\n", e.Kind, humanBytes(e.Size), e.Name)
	}
	printCleared(o.io.Out, res.TempCleared)
	return nil
}

type cacheVerifyOptions struct {
	cacheOptions
	Fix     bool
	Keys    []string
	Policy  string
	keyless keylessFlags
}

func newCacheVerifyCmd(ios *IOStreams) *cobra.Command {
	o := &cacheVerifyOptions{cacheOptions: cacheOptions{io: ios}}
	c := &cobra.Command{
		Use:   "verify [--fix]",
		Short: "Check every cache entry against its digest",
		Long: `Check every entry against its digest: each zip is hashed again, each version record must parse,
each unpacked package must hash (h1:) to what its zip holds, and each build must match the sums
recorded when it was built. Exits 1 if any entry is damaged; --fix removes damaged entries (an
install fetches or builds them again).

The cache keeps evidence (indexes, manifests, signature artifacts), never a verdict that something
was verified. With --key, --policy or a keyless identity, every cached version's signatures are
judged again from that evidence, offline, exactly as install judges them, and each version that
does not pass is reported; it exits 1 if any is refused.

` + cacheHelp,
		Example: `  oprov cache verify
  oprov cache verify --fix -o json`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runCacheVerify(c.Context(), o) },
	}
	c.Flags().BoolVar(&o.Fix, "fix", false, "remove damaged entries")
	c.Flags().StringSliceVar(&o.Keys, "key", nil, "judge every cached version's signatures against this trusted public key (repeatable)")
	c.Flags().StringVar(&o.Policy, "policy", "", "judge every cached version's signatures under this trust policy file")
	o.keyless.register(c)
	o.register(c)
	return c
}

func runCacheVerify(ctx context.Context, o *cacheVerifyOptions) error {
	c, err := o.open()
	if err != nil {
		return err
	}
	defer c.Close()
	bar := newProgress(o.io, "verifying")
	res, err := c.Verify(ctx, o.Fix, bar)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("cache verify: %w", err)
	}
	if o.output.JSON() {
		if err := writeJSON(o.io.Out, res); err != nil {
			return err
		}
	} else {
		printCacheVerified(o.io.Out, res)
	}
	if n := len(res.Problems); n > 0 && !o.Fix {
		return answered(o.output, fmt.Errorf("cache verify: %s in %s (run 'oprov cache verify --fix' to remove them; an install fetches them again)", entries(n, "damaged "), c.Dir))
	}
	return answered(o.output, verifyCachedSignatures(ctx, o, c))
}

// verifyCachedSignatures judges every cached version's signature evidence under the trust given
// on the command line, offline, with the verifier install uses.
func verifyCachedSignatures(ctx context.Context, o *cacheVerifyOptions, c *cache.Cache) error {
	if len(o.Keys) == 0 && o.Policy == "" && len(o.keyless.identities()) == 0 {
		return nil
	}
	policy, err := policyFromFlags(o.Keys, o.Policy, &o.keyless)
	if err != nil {
		return err
	}
	refs, err := c.VersionRefs()
	if err != nil {
		return fmt.Errorf("cache verify: %w", err)
	}
	refused := 0
	for _, ref := range refs {
		d, err := sign.Decide(ctx, c.Evidence(ref), ref, policy, "", sign.VerifyOptions{SignaturesOnly: true})
		switch {
		case err != nil:
			refused++
			fmt.Fprintf(o.io.ErrOut, "  refused    %s: %v\n", ref, err)
		case d.Warning != nil:
			fmt.Fprintf(o.io.ErrOut, "  warning    %s: %v\n", ref, d.Warning)
		case !o.output.JSON():
			var by []string
			for _, s := range d.Result.Signatures {
				by = append(by, s.By())
			}
			fmt.Fprintf(o.io.Out, "  signed     %s by %s\n", ref, strings.Join(by, ", "))
		}
	}
	if refused > 0 {
		return fmt.Errorf("cache verify: the evidence in the cache does not prove %d of %d versions under the trust given (an install asks the registry again)", refused, len(refs))
	}
	return nil
}

func printCacheVerified(w io.Writer, res *cache.VerifyResult) {
	fmt.Fprintf(w, "Checked %s (%s)", entries(res.Checked, ""), humanBytes(res.Bytes))
	if len(res.Problems) == 0 {
		fmt.Fprintln(w, ": every one matches its digest.")
	} else {
		fmt.Fprintf(w, ": %s damaged.\n", entries(len(res.Problems), ""))
	}
	for _, p := range res.Problems {
		fmt.Fprintf(w, "  damaged    %s %s: %s\n", p.Entry.Kind, p.Entry.Name, p.Error)
	}
	for _, p := range res.Unchecked {
		fmt.Fprintf(w, "  unchecked  %s %s: %s\n", p.Entry.Kind, p.Entry.Name, p.Error)
	}
	for _, e := range res.Removed {
		fmt.Fprintf(w, "  removed    %s %s\n", e.Kind, e.Name)
	}
}

// entries counts entries: "1 entry", "3 damaged entries".
func entries(n int, adjective string) string {
	if n == 1 {
		return "1 " + adjective + "entry"
	}
	return strconv.Itoa(n) + " " + adjective + "entries"
}
