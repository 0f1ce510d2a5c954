package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/publish"
	"github.com/oprov/oprov/pkg/referrers"
	"github.com/oprov/oprov/pkg/release"
	"github.com/oprov/oprov/pkg/scratch"
	"github.com/oprov/oprov/pkg/source"
)

// ArtifactTypeChecksums is the artifact type of the referrer that carries an origin release's
// SHA256SUMS, its OpenPGP signature and the signing key, attached to the mirrored index.
const ArtifactTypeChecksums = "application/vnd.oprov.provider-shasums.v1"

// Provenance annotations on that referrer.
const (
	AnnotationOrigin   = "dev.oprov.origin"          // the origin registry and provider address
	AnnotationGPGKeyID = "dev.oprov.gpg-key-id"      // the key that signed SHA256SUMS
	mediaTypeSums      = "text/plain"                // SHA256SUMS
	mediaTypeSignature = "application/pgp-signature" // its detached signature
	mediaTypeKeys      = "application/pgp-keys"      // the signing key, ASCII-armored
)

// Options say what to mirror where.
type Options struct {
	Address    artifact.ProviderAddress // on the origin
	Constraint string                   // versions to mirror ("" for all)
	Platforms  []manifest.Platform      // empty for every platform the origin offers
	To         oci.Ref
	Registry   oci.Options // TLS policy for the origin and the destination
	// TrustedKeys, when set, pins the OpenPGP keys allowed to sign SHA256SUMS; otherwise the keys
	// the origin lists for each download are used.
	TrustedKeys openpgp.EntityList
	Progress    oci.Progress
	// Warn, when set, is told of each version left out of a range because oprov cannot launch
	// its plugin protocols.
	Warn func(msg string)
	// TempDir holds downloads while they are checked (default: the system's), in a directory
	// owned by this process (see pkg/scratch): a killed run's downloads go at the next run.
	TempDir string
}

// Mirrored is what mirroring did to one version.
type Mirrored struct {
	Version     string `json:"version"`
	Tag         string `json:"tag"`
	IndexDigest string `json:"index_digest"`
	Platforms   int    `json:"platform_count"`
	Skipped     bool   `json:"skipped"` // already mirrored with identical digests
	Uploaded    int    `json:"uploaded"`
	KeyID       string `json:"gpg_key_id"`
}

// Mirror copies the versions of a provider that meet the constraint from its origin registry to
// an OCI repository (MirrorFrom with an OriginSource). For each version it checks the OpenPGP
// signature of SHA256SUMS and every zip against SHA256SUMS before pushing anything; versions
// already mirrored with identical digests are skipped, and a run cut short resumes where it
// stopped (content already pushed is not sent again).
func Mirror(ctx context.Context, t oci.Target, opts Options) ([]Mirrored, error) {
	return MirrorFrom(ctx, t, NewOriginSource(&opts), opts)
}

// MirrorFrom copies the versions of opts.Address that meet opts.Constraint from any source into
// an OCI repository, one version at a time, oldest first, with the source's evidence (an
// origin's signed SHA256SUMS, say) attached to each copied index.
func MirrorFrom(ctx context.Context, t oci.Target, src source.Source, opts Options) ([]Mirrored, error) {
	set, err := manifest.Constraints(opts.Constraint)
	if err != nil {
		return nil, err
	}
	chosen, err := chooseVersions(ctx, src, set, opts)
	if err != nil {
		return nil, err
	}
	var out []Mirrored
	for _, v := range chosen {
		m, err := mirrorVersion(ctx, src, t, v, opts)
		if err != nil {
			return out, fmt.Errorf("%s %s: %w", opts.Address, v, err)
		}
		out = append(out, *m)
	}
	return out, nil
}

// chooseVersions picks the versions to mirror, oldest first: those that meet the constraint,
// less those the source screens out (an origin's versions oprov could not launch).
func chooseVersions(ctx context.Context, src source.Source, set versions.Set, opts Options) (versions.List, error) {
	all, err := src.AvailableVersions(ctx, opts.Address)
	if err != nil {
		return nil, err
	}
	chosen := all.Filter(set)
	if len(chosen) == 0 {
		var have []string
		for _, v := range all {
			have = append(have, v.String())
		}
		return nil, fmt.Errorf("%s offers no version of %s that meets %q (it has: %s)", opts.Address.Hostname, opts.Address, opts.Constraint, strings.Join(have, ", "))
	}
	chosen.Sort()
	sc, ok := src.(source.Screener)
	if !ok {
		return chosen, nil
	}
	warn := opts.Warn
	if warn != nil {
		warn = func(msg string) { opts.Warn(opts.Address.String() + ": " + msg) }
	}
	if chosen, err = sc.Screen(ctx, opts.Address, chosen, warn); err != nil {
		return nil, fmt.Errorf("%s: %w (nothing was pushed)", opts.Address, err)
	}
	return chosen, nil
}

// mirrorVersion mirrors one version: it asks the source for each platform's package (checking
// what authenticates them), skips the version if the destination already holds exactly these
// zips, downloads and checks every zip, and pushes them with the source's evidence attached.
func mirrorVersion(ctx context.Context, src source.Source, t oci.Target, v versions.Version, opts Options) (*Mirrored, error) {
	platforms, err := selectPlatforms(ctx, src, opts.Address, v, opts.Platforms)
	if err != nil {
		return nil, err
	}
	tag, err := manifest.VersionToTag(v.String())
	if err != nil {
		return nil, err
	}
	pkgs := make([]*source.Package, len(platforms))
	for i, p := range platforms {
		if pkgs[i], err = src.PackageFor(ctx, opts.Address, v, p); err != nil {
			return nil, err
		}
	}
	res := &Mirrored{Version: v.String(), Tag: tag, Platforms: len(platforms)}
	if a := pkgs[0].Auth; a.Method == "gpg" && len(a.Keys) > 0 {
		res.KeyID = a.Keys[0]
	}
	ref := opts.To.WithReference(tag)
	if ok, digest, err := alreadyMirrored(ctx, t, ref, pkgs); err != nil {
		return nil, err
	} else if ok {
		res.Skipped, res.IndexDigest = true, digest
		return res, nil
	}
	pushed, err := pushPackages(ctx, t, tag, pkgs, opts)
	if err != nil {
		return nil, oci.Explain("mirror", ref, err)
	}
	res.IndexDigest, res.Uploaded = pushed.Index.Digest.String(), pushed.Uploaded
	if ev := pkgs[0].Auth.Evidence; ev != nil {
		if _, err := referrers.Attach(ctx, t, pushed.Index, ev.ArtifactType, ev.Files, ev.Annotations); err != nil {
			return nil, oci.Explain("mirror", ref, fmt.Errorf("attaching the source's evidence: %w", err))
		}
	}
	return res, nil
}

// pushPackages downloads every package into a temporary directory (each checked as it streams
// in) and publishes them as one version, as 'oprov push' does.
func pushPackages(ctx context.Context, t oci.Target, tag string, pkgs []*source.Package, opts Options) (*artifact.PushResult, error) {
	parent := opts.TempDir
	if parent == "" {
		parent = os.TempDir()
	}
	work, err := scratch.Beside(parent)
	if err != nil {
		return nil, err
	}
	defer work.Release()
	dir := work.Path
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(oci.DefaultConcurrency)
	paths := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		paths[i] = filepath.Join(dir, pkg.Filename)
		g.Go(func() error {
			return scratch.WriteFileAtomic(paths[i], func(w io.Writer) error { return pkg.Fetch(gctx, w, opts.Progress) })
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res, err := publish.Files(ctx, t, opts.To.WithReference(tag), paths, publish.Options{Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	return res.PushResult, nil
}

// selectPlatforms picks the platforms to mirror: those asked for, each of which the source must
// offer, or else every one it offers.
func selectPlatforms(ctx context.Context, src source.Source, addr artifact.ProviderAddress, v versions.Version, want []manifest.Platform) ([]manifest.Platform, error) {
	platforms, err := src.Platforms(ctx, addr, v)
	if err != nil {
		return nil, err
	}
	if len(want) > 0 {
		offered := map[manifest.Platform]bool{}
		for _, p := range platforms {
			offered[p] = true
		}
		platforms = nil
		for _, p := range want {
			if !offered[p] {
				return nil, fmt.Errorf("the origin offers no %s package", p)
			}
			platforms = append(platforms, p)
		}
	}
	manifest.SortPlatforms(platforms)
	return platforms, nil
}

// signedSums is a release's SHA256SUMS after its signature was checked.
type signedSums struct {
	sums        release.Sums
	data, sig   []byte // SHA256SUMS and its detached signature, as served
	armoredKeys []byte // the keys the origin lists, kept as provenance
	keyID       string // the key that signed
}

// fetchSignedSums fetches the release's SHA256SUMS and signature (one pair for all platforms),
// checks the signature, and checks that SHA256SUMS agrees with the shasum of every download.
func fetchSignedSums(ctx context.Context, origin *Origin, downloads []*Download, pinned openpgp.EntityList) (*signedSums, error) {
	sumsURL, sigURL, err := sumsURLs(downloads)
	if err != nil {
		return nil, err
	}
	var sumsBuf, sigBuf bytes.Buffer
	if _, err := origin.Fetch(ctx, sumsURL, &sumsBuf, 1<<20); err != nil {
		return nil, err
	}
	if _, err := origin.Fetch(ctx, sigURL, &sigBuf, 64<<10); err != nil {
		return nil, err
	}
	keyring, armoredKeys, err := signingKeys(downloads, pinned)
	if err != nil {
		return nil, err
	}
	signer, err := openpgp.CheckDetachedSignature(keyring, bytes.NewReader(sumsBuf.Bytes()), bytes.NewReader(sigBuf.Bytes()), nil)
	if err != nil {
		return nil, fmt.Errorf("the SHA256SUMS signature does not verify with the %s: %v (nothing was pushed)", keyringName(pinned), err)
	}
	s := &signedSums{data: sumsBuf.Bytes(), sig: sigBuf.Bytes(), armoredKeys: armoredKeys, keyID: fmt.Sprintf("%016X", signer.PrimaryKey.KeyId)}
	for _, d := range downloads {
		for _, k := range d.SigningKeys.GPGPublicKeys {
			if k.KeyID != "" && !strings.EqualFold(k.KeyID, s.keyID) && !hasKeyID(keyring, k.KeyID) {
				return nil, fmt.Errorf("the origin names signing key %s, but SHA256SUMS was signed by %s (nothing was pushed)", k.KeyID, s.keyID)
			}
		}
	}
	if s.sums, err = release.ParseSums(bytes.NewReader(s.data)); err != nil {
		return nil, fmt.Errorf("SHA256SUMS: %w", err)
	}
	for _, d := range downloads {
		want, ok := s.sums[d.Filename]
		if !ok {
			return nil, fmt.Errorf("SHA256SUMS does not list %s (nothing was pushed)", d.Filename)
		}
		if !strings.EqualFold(want, d.SHASum) {
			return nil, fmt.Errorf("the origin's shasum for %s (%s) disagrees with its signed SHA256SUMS (%s) (nothing was pushed)", d.Filename, d.SHASum, want)
		}
	}
	return s, nil
}

// sumsURLs gives the SHA256SUMS and signature URLs, which every platform's answer must share.
func sumsURLs(downloads []*Download) (string, string, error) {
	sumsURL, err := downloads[0].Resolve(downloads[0].SHASumsURL)
	if err != nil {
		return "", "", err
	}
	sigURL, err := downloads[0].Resolve(downloads[0].SHASumsSignatureURL)
	if err != nil {
		return "", "", err
	}
	for _, d := range downloads[1:] {
		u1, _ := d.Resolve(d.SHASumsURL)
		u2, _ := d.Resolve(d.SHASumsSignatureURL)
		if u1 != sumsURL || u2 != sigURL {
			return "", "", fmt.Errorf("the origin names different SHA256SUMS files for %s_%s and %s_%s", downloads[0].OS, downloads[0].Arch, d.OS, d.Arch)
		}
	}
	return sumsURL, sigURL, nil
}

// signingKeys builds the keyring to check SHA256SUMS with: the pinned keys when given, else the
// keys the origin lists. It also returns the origin's keys, armored, to keep as provenance.
func signingKeys(downloads []*Download, pinned openpgp.EntityList) (openpgp.EntityList, []byte, error) {
	var armored bytes.Buffer
	var listed openpgp.EntityList
	seen := map[string]bool{}
	for _, d := range downloads {
		for _, k := range d.SigningKeys.GPGPublicKeys {
			if seen[k.ASCIIArmor] {
				continue
			}
			seen[k.ASCIIArmor] = true
			armored.WriteString(strings.TrimSpace(k.ASCIIArmor) + "\n")
			el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(k.ASCIIArmor))
			if err != nil {
				return nil, nil, fmt.Errorf("the origin's signing key %s is not a valid OpenPGP key: %w", k.KeyID, err)
			}
			listed = append(listed, el...)
		}
	}
	if pinned != nil {
		return pinned, armored.Bytes(), nil
	}
	if len(listed) == 0 {
		return nil, nil, errors.New("the origin lists no signing keys, so SHA256SUMS cannot be checked (nothing was pushed)")
	}
	return listed, armored.Bytes(), nil
}

func keyringName(pinned openpgp.EntityList) string {
	if pinned != nil {
		return "pinned signing keys (--gpg-key)"
	}
	return "origin's signing keys"
}

func hasKeyID(el openpgp.EntityList, id string) bool {
	for _, e := range el {
		if strings.EqualFold(fmt.Sprintf("%016X", e.PrimaryKey.KeyId), id) {
			return true
		}
	}
	return false
}

// ReadKeyFile reads armored OpenPGP public keys to pin.
func ReadKeyFile(path string) (openpgp.EntityList, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	block, err := armor.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not an armored OpenPGP key: %w", path, err)
	}
	el, err := openpgp.ReadKeyRing(block.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return el, nil
}

// ReadKeyFiles reads several files of armored OpenPGP public keys into one list, in order.
func ReadKeyFiles(paths []string) (openpgp.EntityList, error) {
	var out openpgp.EntityList
	for _, p := range paths {
		el, err := ReadKeyFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, el...)
	}
	return out, nil
}

// alreadyMirrored reports whether ref already holds exactly these zips.
func alreadyMirrored(ctx context.Context, t oci.Target, ref oci.Ref, pkgs []*source.Package) (bool, string, error) {
	v, err := artifact.ResolveVersion(ctx, t, ref)
	if errors.Is(err, errdef.ErrNotFound) {
		return false, "", nil
	}
	if err != nil {
		return false, "", oci.Explain("mirror", ref, err)
	}
	entries := make([]manifest.Entry, len(pkgs))
	for i, pkg := range pkgs {
		e, ok := v.Parsed.Lookup(pkg.Platform)
		if !ok {
			return false, "", nil
		}
		entries[i] = e
	}
	platforms, err := artifact.FetchEntries(ctx, t, v, entries)
	if err != nil {
		return false, "", err
	}
	for i, p := range platforms {
		if p.Zip.Digest != pkgs[i].Zip {
			return false, "", fmt.Errorf("%s already holds a different %s package (%s, the origin's is %s): not overwriting it", ref, p.Platform, p.Zip.Digest, pkgs[i].Zip)
		}
	}
	return true, v.Index.Digest.String(), nil
}

type progressWriter struct {
	w       io.Writer
	p       oci.Progress
	planned atomic.Bool
}

// ExpectSize plans the download's bytes, once: without it, bytes downloaded would count against
// the push's plan and the display would pass 100%.
func (pw *progressWriter) ExpectSize(n int64) {
	if pw.planned.CompareAndSwap(false, true) {
		pw.p.Plan(n)
	}
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	pw.p.Advance(int64(n))
	return n, err
}
