package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oprov/oprov/internal/scratch"
)

// PruneOptions say which entries Prune removes. With none set, Prune only clears stale
// temporary space.
type PruneOptions struct {
	// OlderThan removes entries not used for longer than this (0: no age limit). Unowned
	// temporary files older than this go too.
	OlderThan time.Duration
	// Unused removes zips and unpacked packages that no cached version lists: what is left of
	// versions pruned, or of tags that moved. An install would fetch them again.
	Unused bool
	// All removes every entry.
	All bool
	// DryRun only says what would be removed.
	DryRun bool
}

// PruneResult says what Prune removed (or, in a dry run, would remove).
type PruneResult struct {
	Removed []Entry `json:"removed"`
	Bytes   int64   `json:"bytes"`
	// TempCleared is the stale temporary space cleared, by opening the cache and by Prune.
	TempCleared scratch.Swept `json:"temp_cleared"`
}

// Prune removes the entries opts select, and stale temporary space. Each entry is taken away
// whole, under the lock its writers take: moved into this Cache's temporary directory first, so
// that no other process sees it half removed.
func (c *Cache) Prune(ctx context.Context, opts PruneOptions) (*PruneResult, error) {
	inv, err := c.List()
	if err != nil {
		return nil, err
	}
	res := &PruneResult{Removed: []Entry{}, TempCleared: c.swept}
	if !opts.DryRun {
		age := UnownedTempAge
		if opts.All {
			age = 0
		} else if opts.OlderThan > 0 && opts.OlderThan < age {
			age = opts.OlderThan
		}
		res.TempCleared.Add(c.sweepTmp(age))
	}
	for _, e := range selectEntries(inv.Entries, opts, time.Now()) {
		if !opts.DryRun {
			if err := c.remove(ctx, e); err != nil {
				return res, err
			}
		}
		res.Removed = append(res.Removed, e)
		res.Bytes += e.Size
	}
	return res, nil
}

// selectEntries picks the entries PruneOptions select.
func selectEntries(entries []Entry, opts PruneOptions, now time.Time) []Entry {
	listed := map[string]bool{} // hex digests of the zips some version lists
	for _, e := range entries {
		for _, z := range e.zips {
			if z != "" {
				listed[z.Encoded()] = true
			}
		}
	}
	unused := func(e Entry) bool {
		switch e.Kind {
		case kindZip:
			return !listed[strings.TrimPrefix(e.Name, "sha256:")]
		case kindUnpacked:
			for z := range listed {
				if e.zipPrefix != "" && strings.HasPrefix(z, e.zipPrefix) {
					return false
				}
			}
			return true
		}
		return false
	}
	var out []Entry
	for _, e := range entries {
		if opts.All || (opts.OlderThan > 0 && now.Sub(e.LastUsed) > opts.OlderThan) || (opts.Unused && unused(e)) {
			out = append(out, e)
		}
	}
	return out
}

// remove takes an entry out of the cache: under its writers' lock, renamed into this Cache's
// temporary directory (it disappears at once), then deleted there. A process killed in between
// leaves it to the next Open's sweep.
func (c *Cache) remove(ctx context.Context, e Entry) error {
	if e.lockName != "" {
		unlock, err := c.lock(ctx, e.lockName)
		if err != nil {
			return err
		}
		defer unlock()
	}
	tmp, err := c.TmpDir()
	if err != nil {
		return err
	}
	trash, err := os.MkdirTemp(tmp, "removing-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(trash)
	if err := os.Rename(e.Path, filepath.Join(trash, "entry")); err != nil {
		if os.IsNotExist(err) {
			return nil // another run removed it first
		}
		return fmt.Errorf("removing %s %s from the cache: %w", e.Kind, e.Name, err)
	}
	return nil
}
