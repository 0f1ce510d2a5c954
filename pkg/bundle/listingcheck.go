package bundle

import (
	"context"
	"fmt"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/manifest"
)

// checkListing checks a configuration bundle's listing against what the bundle holds, before
// anything is loaded: every listed provider must be a provider address (never a pattern), listed
// under the repository its address gives, and, when the listing says the bundle holds it, held
// there under its tag with the listed index digest. The listing is not signed: it may say only
// what the bundle shows. It gives each listed repository's provider address.
func (b *Bundle) checkListing(ctx context.Context) (map[string]string, error) {
	addrs := map[string]string{}
	if b.Listing == nil {
		return addrs, nil
	}
	for _, p := range b.Listing.Providers {
		if err := b.checkListed(ctx, p); err != nil {
			return nil, fmt.Errorf("the bundle's listing (%s) does not match what the bundle holds: %w; the listing is not signed, so it may say only what the bundle shows", listingName, err)
		}
		addrs[p.Repository] = p.Address
	}
	return addrs, nil
}

func (b *Bundle) checkListed(ctx context.Context, p ListedProvider) error {
	if strings.ContainsAny(p.Address, "*?[]{}") {
		return fmt.Errorf("it names %q, a pattern, not a provider address", p.Address)
	}
	addr, err := manifest.ParseProviderAddress(p.Address)
	if err != nil {
		return fmt.Errorf("it names %q: %w", p.Address, err)
	}
	if addr.String() != p.Address {
		return fmt.Errorf("it names %q, which OpenTofu reads as %s", p.Address, addr)
	}
	if want := repositoryFor(addr); p.Repository != want {
		return fmt.Errorf("it puts %s in repository %q, not %q", p.Address, p.Repository, want)
	}
	if err := checkTag(p.Repository, p.Tag); err != nil {
		return err
	}
	if v, err := manifest.TagToVersion(p.Tag); err != nil || v != p.Version {
		return fmt.Errorf("it lists %s %s under the tag %q", p.Address, p.Version, p.Tag)
	}
	if !p.InBundle {
		return nil // a delta's base holds it: checkBase looks where the base was loaded
	}
	held := false
	for _, t := range b.Repos[p.Repository] {
		held = held || t == p.Tag
	}
	if !held {
		return fmt.Errorf("it names %s %s (%s:%s), which the bundle does not hold", p.Address, p.Version, p.Repository, p.Tag)
	}
	d, err := b.Repo(p.Repository).Resolve(ctx, p.Tag)
	if err != nil {
		return err
	}
	if d.Digest.String() != p.Index {
		return fmt.Errorf("it says %s %s is %s, but the bundle's %s:%s is %s", p.Address, p.Version, p.Index, p.Repository, p.Tag, d.Digest)
	}
	return nil
}

// checkBase looks, for each provider a delta's listing leaves to its base, at where the base was
// loaded: the version must be there under its tag with the listed index digest and, with a
// policy, verify there. It gives the addresses that passed; the others are noted in the report.
func (l *load) checkBase(ctx context.Context, report *LoadReport) (map[string]bool, error) {
	passed := map[string]bool{}
	if l.b.Listing == nil {
		return passed, nil
	}
	for _, p := range l.b.Listing.Providers {
		if p.InBundle {
			continue
		}
		ref, err := l.dstRef(p.Repository)
		if err != nil {
			return nil, err
		}
		ref.Reference = p.Tag
		dst, err := l.opts.Registry.Open(ctx, ref.WithReference(""), false)
		var d ocispec.Descriptor
		if err == nil {
			d, err = dst.Resolve(ctx, p.Tag)
		}
		if err != nil || d.Digest.String() != p.Index {
			report.Left = append(report.Left, fmt.Sprintf("%s %s: the delta leaves it to its base, and %s does not hold it as listed (%s): load the base there", p.Address, p.Version, ref, p.Index))
			continue
		}
		if l.opts.Policy != nil {
			warn, err := verifyVersion(ctx, l.opts.Policy, dst, ref, p.Address, l.opts.Registry.Bounds())
			if err != nil || warn != nil {
				report.Left = append(report.Left, fmt.Sprintf("%s %s (left to the base): its signature in %s was not verified: %v", p.Address, p.Version, ref, firstErr(err, warn)))
				continue
			}
		}
		passed[p.Address] = true
	}
	return passed, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// printable keeps the listed providers a printed configuration may name: held and checked (see
// LoadReport.Printable).
func (l *load) printable(report *LoadReport, trusted map[string]bool, warnings map[string]error, base map[string]bool) {
	if l.b.Listing == nil {
		return
	}
	out := &Listing{Format: l.b.Listing.Format}
	for _, p := range l.b.Listing.Providers {
		key := p.Repository + ":" + p.Tag
		switch {
		case !p.InBundle && !base[p.Address]:
			continue // noted by checkBase
		case p.InBundle && l.opts.Policy != nil && !trusted[key]:
			report.Left = append(report.Left, fmt.Sprintf("%s %s: loaded, but its signature was not verified (%v)", p.Address, p.Version, warnings[key]))
			continue
		}
		out.Providers = append(out.Providers, p)
	}
	out.Modules = l.printMods
	report.Printable = out
}
