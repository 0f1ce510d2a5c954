// Package publish is the one sequence that puts a provider release into an OCI repository as a
// version: check the release files, push them in OpenTofu's format (index created at
// SOURCE_DATE_EPOCH when it is set), say what a client will trip over, and sign. 'oprov push' and
// 'oprov mirror' both publish through it.
package publish

import (
	"context"
	"fmt"
	"time"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/sign"
)

// Options tune a publish.
type Options struct {
	Concurrency int // blobs to upload at once (default oci.DefaultConcurrency)
	Progress    oci.Progress
	// Sign signs the version once it is pushed: with Signer, or as SignOptions say (keyless).
	Sign        bool
	Signer      *sign.Signer
	SignOptions sign.SignOptions
}

// Result tells what a publish did.
type Result struct {
	*artifact.PushResult
	Signed   *sign.SignResult // when signed
	Warnings []string         // what the user should know: the version is there, but...
}

// SignError is a publish whose push succeeded and whose signing failed: the version is in the
// repository, unsigned.
type SignError struct {
	Index string // the digest of the pushed index
	Err   error
}

func (e *SignError) Error() string {
	return fmt.Sprintf("the version was pushed (%s) but signing it failed: %v", e.Index, e.Err)
}

func (e *SignError) Unwrap() error { return e.Err }

// Files checks release files (providerrelease.Collect: zips, or their directory or SHA256SUMS) and
// publishes them to t as the version ref's tag names.
func Files(ctx context.Context, t oci.Target, ref oci.Ref, paths []string, opts Options) (*Result, error) {
	rel, err := providerrelease.Collect(ctx, paths)
	if err != nil {
		return nil, err
	}
	return Release(ctx, t, ref, rel, opts)
}

// Release publishes a checked release to t under ref's tag, which must be the release's version.
// Errors from the registry are returned as they are, for the caller to explain; a
// failed signature is a *SignError.
func Release(ctx context.Context, t oci.Target, ref oci.Ref, rel *providerrelease.Release, opts Options) (*Result, error) {
	created, err := sourceDateEpoch()
	if err != nil {
		return nil, err
	}
	pushed, err := artifact.PushRelease(ctx, t, rel, ref.Reference, artifact.PushOptions{
		Concurrency: opts.Concurrency, Progress: opts.Progress, Index: manifest.IndexOptions{Created: created},
	})
	if err != nil {
		return nil, err
	}
	res := &Result{PushResult: pushed}
	if oci.IsPlainHTTP(t) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s was reached over plain HTTP; OpenTofu's oci_mirror speaks only HTTPS, so it cannot install from there (serve the registry over TLS)", ref.Registry))
	}
	if opts.Sign {
		res.Signed, err = sign.Sign(ctx, t, ref, pushed.Index, opts.Signer, opts.SignOptions)
		if err != nil {
			return res, &SignError{Index: pushed.Index.Digest.String(), Err: err}
		}
	}
	return res, nil
}

// sourceDateEpoch gives SOURCE_DATE_EPOCH as an RFC 3339 time for the index's created annotation,
// or "" when it is not set: the index never records the wall clock.
func sourceDateEpoch() (string, error) {
	t, ok, err := providerrelease.SourceDateEpoch()
	if err != nil || !ok {
		return "", err
	}
	return t.Format(time.RFC3339), nil
}
