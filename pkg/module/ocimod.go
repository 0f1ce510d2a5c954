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
		target, err = w.opts.Registry.Open(ctx, oref, false)
	}
	if err != nil {
		return fail(err)
	}
	m, err := w.fetchPackage(ctx, r, target, oref)
	if err != nil {
		return fail(err)
	}
	r.Version = m.Manifest.Digest.String()
	r.OriginChecksum = r.Version
	return nil
}

// fetchPackage resolves a module package, verifies its signature under the policies, and
// fetches its zip into r.Zip. Only an oci:// module must be signed: a registry, git or HTTP module
// that a mirror holds as a package (a loaded bundle's, unsigned) is judged by the module lock's
// hashes, as it would be from its origin (a mirror is asked only for modules the lock records);
// its signature, when it has one that passes, is said as well.
func (w *walker) fetchPackage(ctx context.Context, r *Resolved, t oci.ReadOnly, ref oci.Ref) (*modulepkg.Resolved, error) {
	m, err := modulepkg.Resolve(ctx, t, ref.Reference)
	if err != nil {
		return nil, err
	}
	if err := w.verify(ctx, r, t, ref, m); err != nil {
		if r.Kind == KindOCI {
			return nil, err
		}
		r.Auth = "the module lock's hashes (the mirror's package: " + err.Error() + ")"
	}
	if p := w.opts.Progress; p != nil {
		p.Plan(m.Layer().Size)
	}
	if r.Zip, err = m.FetchZip(ctx, t, w.opts.Limits.MaxPackage); err != nil {
		return nil, err
	}
	if p := w.opts.Progress; p != nil {
		p.Advance(int64(len(r.Zip)))
	}
	return m, nil
}

// annotationSubdir, on a module package that stands in for a registry module, names the module's
// directory inside the package when the registry's download location gave one (//subdir).
const annotationSubdir = "io.oprov.module.subdir"

// mirror fetches a module from Options.Mirror when it has the module: the package's provenance
// annotations give its version (the lock's when it has none) and subdirectory.
func (w *walker) mirror(ctx context.Context, r *Resolved, e *LockEntry) (bool, error) {
	if w.opts.Mirror == nil {
		return false, nil
	}
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("%s: %s: %s: from the mirror: %w", r.Where(), r.Call, r.Source, err)
	}
	t, ref, ok, err := w.opts.Mirror(ctx, r, e)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return false, nil
	}
	m, err := w.fetchPackage(ctx, r, t, ref)
	if err != nil {
		return fail(err)
	}
	ann := m.Parsed.Annotations
	r.Version, r.OriginChecksum = ann[modulepkg.AnnotationVersion], ann[modulepkg.AnnotationOriginChecksum]
	if r.Version == "" && e != nil {
		r.Version = e.Version
	}
	if r.Version == "" && r.Kind == KindOCI {
		r.Version = m.Manifest.Digest.String()
	}
	if sub := ann[annotationSubdir]; sub != "" {
		if r.Subdir, err = cleanSubdir(sub); err != nil {
			return fail(err)
		}
	}
	w.logf("%s: %s from the mirror %s", r.Call, r.Source, ref)
	return true, nil
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
