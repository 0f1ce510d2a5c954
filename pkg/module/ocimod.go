package module

import (
	"context"
	"fmt"

	"github.com/oprov/oprov/pkg/modulepkg"
)

// oci fetches an oci:// module package (OpenTofu's modulepkg: one manifest, one zip layer) by
// tag (default "latest", as OpenTofu) or digest, recording the manifest digest as its version,
// and has its signature checked (VerifyOCI) before anything of it is used.
func (w *walker) oci(ctx context.Context, r *Resolved, src Source) error {
	fail := func(err error) error {
		return fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
	}
	if w.opts.OCI == nil {
		return fail(fmt.Errorf("no OCI registry access was given for oci:// modules"))
	}
	target, err := w.opts.OCI(ctx, src.URL)
	if err != nil {
		return fail(err)
	}
	ref := src.Digest
	if ref == "" {
		ref = src.Tag
	}
	if ref == "" {
		ref = "latest"
	}
	f, err := modulepkg.Fetch(ctx, target, ref, w.opts.Limits.MaxPackage)
	if err != nil {
		return fail(err)
	}
	r.Version = f.Manifest.Digest.String()
	r.OriginChecksum = r.Version
	if w.opts.VerifyOCI != nil {
		if err := w.opts.VerifyOCI(ctx, r, target, f.Manifest); err != nil {
			return fail(fmt.Errorf("its signature: %w; nothing was installed", err))
		}
	}
	r.Zip = f.Zip
	return nil
}
