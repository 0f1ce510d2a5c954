package artifact

import (
	"context"
	"errors"
	"fmt"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
)

// parseIndex parses an index with at most the limit of platform entries.
func parseIndex(l oci.Limits, data []byte) (*manifest.Index, error) {
	ix, err := manifest.ParseIndexLimit(data, l.WithDefaults().MaxPlatforms)
	var tooMany *manifest.TooManyEntriesError
	if errors.As(err, &tooMany) {
		return nil, &oci.LimitError{
			What:    fmt.Sprintf("the index lists %d platform entries", tooMany.N),
			Limit:   fmt.Sprintf("the limit of %d", tooMany.Max),
			Setting: oci.SettingMaxPlatforms,
		}
	}
	return ix, err
}

// errTagLoop marks a tag listing that repeats itself.
var errTagLoop = errors.New("the registry's tag list repeats itself")

// listTags lists a repository's tags, page by page, within the limits: at most MaxTagPages pages
// and MaxTags tags, and it stops when the registry pages in a loop (a page that brings no tag not
// seen before, followed by yet another page: a repeated `last` or Link).
func listTags(ctx context.Context, t oci.ReadOnly, l oci.Limits) ([]string, error) {
	l = l.WithDefaults()
	seen := map[string]bool{}
	var out []string
	pages, stale := 0, false
	err := t.Tags(ctx, "", func(tags []string) error {
		pages++
		if stale {
			return fmt.Errorf("%w: page %d came after a page that brought no new tag (a repeated `last` or Link), so the listing was stopped", errTagLoop, pages)
		}
		if pages > l.MaxTagPages {
			return &oci.LimitError{What: fmt.Sprintf("the tag list goes on past %d pages", l.MaxTagPages), Limit: "the limit of tag pages", Setting: oci.SettingMaxTagPages}
		}
		fresh := 0
		for _, tag := range tags {
			if !seen[tag] {
				seen[tag] = true
				out = append(out, tag)
				fresh++
			}
		}
		if len(out) > l.MaxTags {
			return &oci.LimitError{What: fmt.Sprintf("the repository lists more than %d tags", l.MaxTags), Limit: "the limit of tags", Setting: oci.SettingMaxTags}
		}
		stale = fresh == 0
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
