package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/release"
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
	Address    oci.ProviderAddress // on the origin
	Constraint string              // versions to mirror ("" for all)
	Platforms  []manifest.Platform // empty for every platform the origin offers
	To         oci.Ref
	Registry   oci.Options // TLS policy for the origin and the destination
	// TrustedKeys, when set, pins the OpenPGP keys allowed to sign SHA256SUMS; otherwise the keys
	// the origin lists for each download are used.
	TrustedKeys openpgp.EntityList
	Progress    oci.Progress
	// TempDir holds downloads while they are checked (default: the system's).
	TempDir string
}

// Mirrored is what mirroring did to one version.
type Mirrored struct {
	Version     string `json:"version"`
	Tag         string `json:"tag"`
	IndexDigest string `json:"index_digest"`
	Platforms   int    `json:"platforms"`
	Skipped     bool   `json:"skipped"` // already mirrored with identical digests
	Uploaded    int    `json:"uploaded"`
	KeyID       string `json:"gpg_key_id"`
}

// Mirror copies the versions of a provider that meet the constraint from its origin registry to
// an OCI repository. For each version it checks the OpenPGP signature of SHA256SUMS and every zip
// against SHA256SUMS before pushing anything; versions already mirrored with identical digests
// are skipped, and a run cut short resumes where it stopped (content already pushed is not sent
// again).
func Mirror(ctx context.Context, t oci.Target, opts Options) ([]Mirrored, error) {
	set, err := manifest.Constraints(opts.Constraint)
	if err != nil {
		return nil, err
	}
	origin, err := NewOrigin(ctx, opts.Address.Hostname, opts.Registry)
	if err != nil {
		return nil, err
	}
	all, err := origin.Versions(ctx, opts.Address.Namespace, opts.Address.Type)
	if err != nil {
		return nil, err
	}
	var chosen []OriginVersion
	for _, v := range all {
		pv, err := versions.ParseVersion(v.Version)
		if err != nil || !set.Has(pv) {
			continue
		}
		chosen = append(chosen, v)
	}
	if len(chosen) == 0 {
		var have []string
		for _, v := range all {
			have = append(have, v.Version)
		}
		return nil, fmt.Errorf("%s offers no version of %s that meets %q (it has: %s)", opts.Address.Hostname, opts.Address, opts.Constraint, strings.Join(have, ", "))
	}
	sort.Slice(chosen, func(i, j int) bool {
		a, _ := versions.ParseVersion(chosen[i].Version)
		b, _ := versions.ParseVersion(chosen[j].Version)
		return a.LessThan(b)
	})
	var out []Mirrored
	for _, v := range chosen {
		m, err := mirrorVersion(ctx, origin, t, v, opts)
		if err != nil {
			return out, fmt.Errorf("%s %s: %w", opts.Address, v.Version, err)
		}
		out = append(out, *m)
	}
	return out, nil
}

func mirrorVersion(ctx context.Context, origin *Origin, t oci.Target, v OriginVersion, opts Options) (*Mirrored, error) {
	platforms := v.Platforms
	if len(opts.Platforms) > 0 {
		offered := map[manifest.Platform]bool{}
		for _, p := range v.Platforms {
			offered[p] = true
		}
		platforms = nil
		for _, p := range opts.Platforms {
			if !offered[p] {
				return nil, fmt.Errorf("the origin offers no %s package", p)
			}
			platforms = append(platforms, p)
		}
	}
	manifest.SortPlatforms(platforms)
	tag, err := manifest.VersionToTag(v.Version)
	if err != nil {
		return nil, err
	}

	// Where each platform's package is, and how the release is signed.
	downloads := make([]*Download, len(platforms))
	for i, p := range platforms {
		if downloads[i], err = origin.Download(ctx, opts.Address.Namespace, opts.Address.Type, v.Version, p); err != nil {
			return nil, err
		}
	}
	sumsURL, err := downloads[0].Resolve(downloads[0].SHASumsURL)
	if err != nil {
		return nil, err
	}
	sigURL, err := downloads[0].Resolve(downloads[0].SHASumsSignatureURL)
	if err != nil {
		return nil, err
	}
	for _, d := range downloads[1:] {
		u1, _ := d.Resolve(d.SHASumsURL)
		u2, _ := d.Resolve(d.SHASumsSignatureURL)
		if u1 != sumsURL || u2 != sigURL {
			return nil, fmt.Errorf("the origin names different SHA256SUMS files for %s_%s and %s_%s", downloads[0].OS, downloads[0].Arch, d.OS, d.Arch)
		}
	}
	var sumsBuf, sigBuf bytes.Buffer
	if _, err := origin.Fetch(ctx, sumsURL, &sumsBuf, 1<<20); err != nil {
		return nil, err
	}
	if _, err := origin.Fetch(ctx, sigURL, &sigBuf, 64<<10); err != nil {
		return nil, err
	}
	keyring, armoredKeys, err := signingKeys(downloads, opts.TrustedKeys)
	if err != nil {
		return nil, err
	}
	signer, err := openpgp.CheckDetachedSignature(keyring, bytes.NewReader(sumsBuf.Bytes()), bytes.NewReader(sigBuf.Bytes()), nil)
	if err != nil {
		return nil, fmt.Errorf("the SHA256SUMS signature does not verify with the %s: %v (nothing was pushed)", keyringName(opts.TrustedKeys), err)
	}
	keyID := fmt.Sprintf("%016X", signer.PrimaryKey.KeyId)
	for _, d := range downloads {
		for _, k := range d.SigningKeys.GPGPublicKeys {
			if k.KeyID != "" && !strings.EqualFold(k.KeyID, keyID) && !hasKeyID(keyring, k.KeyID) {
				return nil, fmt.Errorf("the origin names signing key %s, but SHA256SUMS was signed by %s (nothing was pushed)", k.KeyID, keyID)
			}
		}
	}
	sums, err := release.ParseSums(bytes.NewReader(sumsBuf.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("SHA256SUMS: %w", err)
	}
	for _, d := range downloads {
		want, ok := sums[d.Filename]
		if !ok {
			return nil, fmt.Errorf("SHA256SUMS does not list %s (nothing was pushed)", d.Filename)
		}
		if !strings.EqualFold(want, d.SHASum) {
			return nil, fmt.Errorf("the origin's shasum for %s (%s) disagrees with its signed SHA256SUMS (%s) (nothing was pushed)", d.Filename, d.SHASum, want)
		}
	}

	res := &Mirrored{Version: v.Version, Tag: tag, Platforms: len(platforms), KeyID: keyID}
	ref := opts.To.WithReference(tag)
	if ok, digest, err := alreadyMirrored(ctx, t, ref, downloads, sums); err != nil {
		return nil, err
	} else if ok {
		res.Skipped, res.IndexDigest = true, digest
		return res, nil
	}

	// Download every zip, checking it against the signed SHA256SUMS as it streams in.
	dir, err := os.MkdirTemp(opts.TempDir, "oprov-mirror-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(oci.DefaultConcurrency)
	paths := make([]string, len(downloads))
	for i, d := range downloads {
		g.Go(func() error {
			if _, err := release.ParseFilename(d.Filename); err != nil {
				return fmt.Errorf("the origin's file name: %w", err)
			}
			u, err := d.Resolve(d.DownloadURL)
			if err != nil {
				return err
			}
			paths[i] = filepath.Join(dir, d.Filename)
			return release.WriteFileAtomic(paths[i], func(w io.Writer) error {
				h := sha256.New()
				var dst io.Writer = io.MultiWriter(w, h)
				if opts.Progress != nil {
					dst = &progressWriter{w: dst, p: opts.Progress}
				}
				if _, err := origin.Fetch(gctx, u, dst, 4<<30); err != nil {
					return err
				}
				if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(sums[d.Filename]) {
					return fmt.Errorf("%s does not match the signed SHA256SUMS: it has sha256 %s, SHA256SUMS says %s (nothing was pushed)", d.Filename, got, sums[d.Filename])
				}
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rel, err := release.Collect(paths)
	if err != nil {
		return nil, err
	}
	pushed, err := oci.PushRelease(ctx, t, rel, tag, oci.PushOptions{Progress: opts.Progress})
	if err != nil {
		return nil, oci.Explain("mirror", ref, err)
	}
	res.IndexDigest, res.Uploaded = pushed.Index.Digest.String(), pushed.Uploaded
	// The origin's provenance travels with the index as a referrer.
	sumsName := release.SumsName(opts.Address.Type, v.Version)
	_, err = oci.Attach(ctx, t, pushed.Index, ArtifactTypeChecksums, []oci.AttachFile{
		{Name: sumsName, MediaType: mediaTypeSums, Data: sumsBuf.Bytes()},
		{Name: sumsName + ".sig", MediaType: mediaTypeSignature, Data: sigBuf.Bytes()},
		{Name: "signing-keys.asc", MediaType: mediaTypeKeys, Data: armoredKeys},
	}, map[string]string{AnnotationOrigin: "https://" + opts.Address.Hostname + "/" + opts.Address.Namespace + "/" + opts.Address.Type, AnnotationGPGKeyID: keyID})
	if err != nil {
		return nil, oci.Explain("mirror", ref, fmt.Errorf("attaching SHA256SUMS: %w", err))
	}
	return res, nil
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

// alreadyMirrored reports whether ref already holds exactly these zips.
func alreadyMirrored(ctx context.Context, t oci.Target, ref oci.Ref, downloads []*Download, sums release.Sums) (bool, string, error) {
	v, err := oci.ResolveVersion(ctx, t, ref)
	if errors.Is(err, errdef.ErrNotFound) {
		return false, "", nil
	}
	if err != nil {
		return false, "", oci.Explain("mirror", ref, err)
	}
	for _, d := range downloads {
		e, ok := v.Parsed.Lookup(manifest.Platform{OS: d.OS, Arch: d.Arch})
		if !ok {
			return false, "", nil
		}
		p, err := oci.FetchPlatform(ctx, t, v, e)
		if err != nil {
			return false, "", err
		}
		if !strings.EqualFold(p.Zip.Digest.Encoded(), sums[d.Filename]) {
			return false, "", fmt.Errorf("%s already holds a different %s package (%s, the origin's is sha256:%s): not overwriting it", ref, e.Platform, p.Zip.Digest, sums[d.Filename])
		}
	}
	return true, v.Index.Digest.String(), nil
}

type progressWriter struct {
	w io.Writer
	p oci.Progress
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	pw.p.Advance(int64(n))
	return n, err
}
