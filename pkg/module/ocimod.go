package module

import (
	"context"
	"fmt"

	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// oci fetches an oci:// module package (OpenTofu's modulepkg: one manifest, one zip layer) by
// tag (default "latest", as OpenTofu) or digest, records the manifest digest as its version, and
// checks its signature under the trust policy before its zip is fetched.
func (w *walker) oci(ctx context.Context, r *Resolved, src Source) error {
	fail := func(err error) error {
		return fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
	}
	ref := src.Digest
	if ref == "" {
		ref = src.Tag
	}
	if ref == "" {
		ref = "latest"
	}
	sep := ":"
	if src.Digest != "" {
		sep = "@"
	}
	oref, err := oci.ParseRef(src.URL + sep + ref)
	if err != nil {
		return fail(err)
	}
	var target oci.ReadOnly
	if w.opts.OCI != nil {
		target, err = w.opts.OCI(ctx, oref)
	} else {
		target, err = oci.Open(ctx, oref, w.opts.Registry, false)
	}
	if err != nil {
		return fail(err)
	}
	m, err := modulepkg.Resolve(ctx, target, ref)
	if err != nil {
		return fail(err)
	}
	r.Version = m.Manifest.Digest.String()
	r.OriginChecksum = r.Version
	if err := w.verify(ctx, r, target, oref, m); err != nil {
		return fail(err)
	}
	if r.Zip, err = m.FetchZip(ctx, target, w.opts.Limits.MaxPackage); err != nil {
		return fail(err)
	}
	return nil
}

// verify checks an OCI module's signatures under the policy that has a rule for its repository
// (the first of Policies that does; the first policy when none does, which refuses it in
// enforce mode). With no policy at all the module is used unverified, and the log says so.
func (w *walker) verify(ctx context.Context, r *Resolved, t oci.ReadOnly, ref oci.Ref, m *modulepkg.Resolved) error {
	if len(w.opts.Policies) == 0 {
		r.Auth = "none (no trust policy)"
		w.logf("warning: %s: %s is not verified: no oci_mirror block of oprov.hcl gives a trust policy", r.Call, r.Source)
		return nil
	}
	pol := w.opts.Policies[0]
	for _, p := range w.opts.Policies {
		if p.Match(ref.Repo(), "") != nil {
			pol = p
			break
		}
	}
	d, err := sign.DecideModule(ctx, t, ref, m, pol, sign.VerifyOptions{})
	if err != nil {
		return fmt.Errorf("its signature: %w; nothing was installed", err)
	}
	r.Auth = "cosign, rule " + d.Rule
	if d.Warning != nil {
		r.Auth = "unverified (warn mode): " + d.Warning.Error()
		w.logf("warning: %s: %s: %v", r.Call, r.Source, d.Warning)
	} else if d.Result != nil && len(d.Result.Signatures) > 0 {
		r.Auth += ", signed by " + d.Result.Signatures[0].By()
	}
	return nil
}
