package loader

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/release"
	"github.com/oprov/oprov/pkg/sign"
)

// PackageDir is where a mirror root holds a provider's unpacked package.
func PackageDir(root string, addr oci.ProviderAddress, version string, p manifest.Platform) string {
	return filepath.Join(root, addr.Hostname, addr.Namespace, addr.Type, version, p.String())
}

// FindExecutable finds a provider's executable in its unpacked package: the file whose name
// starts with terraform-provider-TYPE.
func FindExecutable(pkgDir, typ string) (string, error) {
	entries, err := os.ReadDir(pkgDir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), "terraform-provider-"+typ) {
			return filepath.Join(pkgDir, e.Name()), nil
		}
	}
	return "", fmt.Errorf("%s holds no terraform-provider-%s executable", pkgDir, typ)
}

// FetchForLaunch gets one provider version ready to run from a repository, through the same
// checks as an install: the signature per the policy (when one is given), this machine's zip
// checked against its digest into the cache, and unpacked safely. It returns the executable.
func FetchForLaunch(ctx context.Context, ref oci.Ref, addr oci.ProviderAddress, policy *sign.Policy, opts Options) (string, error) {
	t, err := oci.Open(ctx, ref, opts.Registry, false)
	if err != nil {
		return "", oci.Explain("fetch", ref, err)
	}
	v, err := oci.ResolveVersion(ctx, t, ref)
	if err != nil {
		return "", oci.Explain("fetch", ref, err)
	}
	if policy != nil {
		d, err := policy.VerifyWithPolicy(ctx, t, ref, addr.String(), sign.VerifyOptions{})
		if err != nil {
			return "", err
		}
		if d.Warning != nil {
			opts.logf("oprov: warning (policy mode warn): %v", d.Warning)
		}
	}
	host := opts.host()
	e, ok := v.Parsed.Lookup(host)
	if !ok {
		return "", fmt.Errorf("%s has no package for this machine (%s); it has %s", ref, host, platformList(v.Parsed.Platforms()))
	}
	p, err := oci.FetchPlatform(ctx, t, v, e)
	if err != nil {
		return "", err
	}
	if _, err := opts.Cache.PutBlob(ctx, p.Zip.Digest, p.Zip.Size, func(w io.Writer) error {
		return oci.FetchZip(ctx, t, p, w, opts.Progress)
	}); err != nil {
		return "", err
	}
	version := v.Version
	if version == "" { // named by digest: take the version from the zip's name
		if fn, err := release.ParseFilename(p.Filename); err == nil {
			version = fn.Version
		} else {
			version = "0.0.0"
		}
	}
	root, err := opts.Cache.EnsureMirror(ctx, p.Zip.Digest, addr, version, host)
	if err != nil {
		return "", err
	}
	return FindExecutable(PackageDir(root, addr, version, host), addr.Type)
}
